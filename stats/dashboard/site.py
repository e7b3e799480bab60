"""The admin site: its index is the statistics dashboard, and it serves the partner page."""

from typing import Any

from django.contrib import admin
from django.contrib.auth.models import AbstractUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseBase
from django.template.response import TemplateResponse
from django.urls import URLPattern, URLResolver, path
from django.utils.translation import gettext_lazy as _

# What the "statistics viewers" group (cpsproject.common.viewers) grants for the figures of every partner.
READ_STATISTICS = "stats.view_dailystat"


def can_read_statistics(user: AbstractUser | AnonymousUser) -> bool:
    """Whether ``user`` (staff) may read the statistics pages: the dashboard, the partner page, /metrics."""
    return user.is_active and user.is_staff and user.has_perm(READ_STATISTICS)


class StatsAdminSite(admin.AdminSite):
    site_header = _("CPS partner statistics")
    site_title = _("CPS partner statistics")  # the browser tab says what the header says
    index_title = _("Statistics dashboard")
    # Django's "View site" would lead to /, which is no page here; the header's "Dashboard" link is the way home.
    site_url = None

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> TemplateResponse:
        """Show the dashboard, with the list of models below it: the first page a statistics viewer sees.

        Staff without the statistics (``stats.view_dailystat``) get Django's plain index: the models they may
        open, and no figure.
        """
        from stats.dashboard.views import dashboard  # the views read models: import them once apps are ready

        if not can_read_statistics(request.user):
            return super().index(request, extra_context)
        return dashboard(request, site=self)

    def partner_network_view(self, request: HttpRequest, code: str) -> HttpResponseBase:
        from stats.dashboard.views import partner_network

        if not can_read_statistics(request.user):
            raise PermissionDenied
        return partner_network(request, code, site=self)

    def get_urls(self) -> list[URLResolver | URLPattern]:
        network = path("network/<str:code>/", self.admin_view(self.partner_network_view), name="network")
        return [network, *super().get_urls()]
