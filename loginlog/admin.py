import datetime as dt
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from cpsproject.common.admin_csv import CsvExportMixin
from cpsproject.common.timeutil import local_day
from loginlog.models import LoginMonth, user_type_label
from loginlog.selectors import active_user_count, login_days
from loginlog.validation import LoginRejected, user_types, validate_login

if TYPE_CHECKING:  # generic to the checker only
    from django.contrib.admin import ModelAdmin


class UserTypeFilter(admin.SimpleListFilter):
    title = gettext_lazy("user type")
    parameter_name = "user_type"

    def lookups(self, request: HttpRequest, model_admin: "ModelAdmin[Any]") -> list[tuple[str, str]]:
        return [(user_type, user_type_label(user_type)) for user_type in user_types()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[LoginMonth]) -> QuerySet[LoginMonth]:
        return queryset.filter(user_type=self.value()) if self.value() else queryset


class MonthFilter(admin.SimpleListFilter):
    """The months that have rows, newest first: a row is a month, so "today" or "past 7 days" mean nothing."""

    title = gettext_lazy("month")
    parameter_name = "month"

    def lookups(self, request: HttpRequest, model_admin: "ModelAdmin[Any]") -> list[tuple[str, str]]:
        months = LoginMonth.objects.order_by("-month").values_list("month", flat=True).distinct()[:36]
        return [(f"{month:%Y-%m}", date_format(month, "YEAR_MONTH_FORMAT")) for month in months]

    def queryset(self, request: HttpRequest, queryset: QuerySet[LoginMonth]) -> QuerySet[LoginMonth]:
        value = self.value()
        if not value:
            return queryset
        try:
            month = dt.datetime.strptime(value, "%Y-%m").date()
        except ValueError as exc:
            raise IncorrectLookupParameters(exc) from exc
        return queryset.filter(month=month)


@admin.register(LoginMonth)
class LoginMonthAdmin(CsvExportMixin, admin.ModelAdmin):
    """Months synced from the login bitmaps: looked at (``loginlog.view_loginmonth``), never edited here."""

    list_display = ["user_type_shown", "user_id", "month_shown", "login_days"]
    list_filter = [UserTypeFilter, MonthFilter]
    search_fields = ["user_id"]
    fields = readonly_fields = ("user_type_shown", "user_id", "month_shown", "login_dates", "synced_at")
    change_list_template = "admin/loginlog/loginmonth_change_list.html"
    csv_fields = [
        (gettext_lazy("user type"), "user_type"),
        (gettext_lazy("user id"), "user_id"),
        (gettext_lazy("month"), "month"),
        (gettext_lazy("days logged in"), "days"),
    ]

    def csv_row(self, values: tuple[Any, ...]) -> tuple[object, ...]:
        user_type, user_id, month, days = values
        return (
            user_type,
            user_id,
            f"{month:%Y-%m}",
            " ".join(str(d) for d in range(1, 32) if days >> (d - 1) & 1),
        )

    # Viewing needs loginlog.view_loginmonth, as Django's admin asks by default ("statistics viewers" hold it).
    # The sync writes the rows: nobody adds, changes or deletes one, so the page is a view with no buttons.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    @admin.display(description=gettext_lazy("user type"), ordering="user_type")
    def user_type_shown(self, obj: LoginMonth) -> str:
        return user_type_label(obj.user_type)

    @admin.display(description=gettext_lazy("month"), ordering="month")
    def month_shown(self, obj: LoginMonth) -> str:
        return date_format(obj.month, "YEAR_MONTH_FORMAT")

    @admin.display(description=gettext_lazy("days logged in"))
    def login_days(self, obj: LoginMonth) -> str:
        return ", ".join(map(str, obj.day_numbers()))

    @admin.display(description=gettext_lazy("dates logged in"))
    def login_dates(self, obj: LoginMonth) -> str:
        dates = [obj.month.replace(day=day) for day in obj.day_numbers()]
        return ", ".join(date_format(day, "SHORT_DATE_FORMAT") for day in dates) or "—"

    def get_urls(self) -> list[URLPattern]:
        return [
            path("activity/", self.admin_site.admin_view(self.activity_view), name="loginlog_activity")
        ] + super().get_urls()

    def activity_view(self, request: HttpRequest) -> TemplateResponse:
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
                    "user": f"{user_type_label(user_type)} {user_id}",
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
            "user_types": [(user_type, user_type_label(user_type)) for user_type in user_types()],
            "calendar": calendar,
            "error": error,
            "dau": {
                user_type_label(t): [(d, n, round(100 * n / peak)) for d, n in rows]
                for t, rows in dau.items()
            },
        }
        return TemplateResponse(request, "admin/loginlog/activity.html", context)
