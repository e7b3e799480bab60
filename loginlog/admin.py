import datetime as dt

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from cpsproject.common.admin_csv import CsvExportMixin
from cpsproject.common.timeutil import local_day
from loginlog.models import LoginMonth
from loginlog.selectors import active_user_count, login_days
from loginlog.validation import LoginRejected, user_types, validate_login


@admin.register(LoginMonth)
class LoginMonthAdmin(CsvExportMixin, admin.ModelAdmin):
    list_display = ["user_type", "user_id", "month", "login_days"]
    list_filter = ["user_type", "month"]
    search_fields = ["user_id"]
    readonly_fields = ["user_type", "user_id", "month", "days", "synced_at"]
    change_list_template = "admin/loginlog/loginmonth_change_list.html"
    csv_fields = [
        (gettext_lazy("user type"), "user_type"),
        (gettext_lazy("user id"), "user_id"),
        (gettext_lazy("month"), "month"),
        (gettext_lazy("days logged in"), "days"),
    ]

    def csv_row(self, values: tuple) -> tuple:
        user_type, user_id, month, days = values
        return (
            user_type,
            user_id,
            f"{month:%Y-%m}",
            " ".join(str(d) for d in range(1, 32) if days >> (d - 1) & 1),
        )

    # Viewing needs loginlog.view_loginmonth, as Django's admin asks by default ("statistics viewers" hold it).
    def has_add_permission(self, request) -> bool:
        return False

    @admin.display(description=gettext_lazy("days logged in"))
    def login_days(self, obj: LoginMonth) -> str:
        return ", ".join(map(str, obj.day_numbers()))

    def get_urls(self):
        return [
            path("activity/", self.admin_site.admin_view(self.activity_view), name="loginlog_activity")
        ] + super().get_urls()

    def activity_view(self, request):
        """A user's login calendar (Redis first, then MySQL) and the DAU of each type over 30 days."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        today = local_day(timezone.now())
        calendar, error = None, ""
        if request.GET.get("user_id"):
            try:
                user_type, user_id = validate_login(
                    user_type=request.GET.get("user_type"), user_id=request.GET["user_id"]
                )
                start = today - dt.timedelta(days=89)
                calendar = {
                    "user": f"{user_type} {user_id}",
                    "days": login_days(user_type=user_type, user_id=user_id, start=start, end=today),
                }
            except LoginRejected as exc:
                error = str(exc)
        dau = {}
        for user_type in user_types():
            series = [(today - dt.timedelta(days=n)) for n in range(29, -1, -1)]
            dau[user_type] = [(d, active_user_count(user_type=user_type, start=d, end=d)) for d in series]
        peak = max([n for rows in dau.values() for _, n in rows] + [1])
        context = {
            **self.admin_site.each_context(request),
            "title": _("Login activity"),
            "user_types": user_types(),
            "calendar": calendar,
            "error": error,
            "dau": {t: [(d, n, round(100 * n / peak)) for d, n in rows] for t, rows in dau.items()},
        }
        return TemplateResponse(request, "admin/loginlog/activity.html", context)
