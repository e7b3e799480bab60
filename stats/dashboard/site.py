"""The admin site: its index is the statistics dashboard, and it serves the partner page."""

from django.contrib import admin
from django.urls import path
from django.utils.translation import gettext_lazy as _


class StatsAdminSite(admin.AdminSite):
    site_header = _("CPS partner statistics")
    site_title = _("CPS statistics")
    index_title = _("Statistics dashboard")
    # Django's "View site" would lead to /, which is no page here; the header's "Dashboard" link is the way home.
    site_url = None

    def index(self, request, extra_context=None):
        """Show the dashboard, with the list of models below it: the first page every staff user sees."""
        from stats.dashboard.views import dashboard  # the views read models: import them once apps are ready

        return dashboard(request, site=self)

    def partner_network_view(self, request, code: str):
        from stats.dashboard.views import partner_network

        return partner_network(request, code, site=self)

    def get_urls(self):
        network = path("network/<str:code>/", self.admin_view(self.partner_network_view), name="network")
        return [network, *super().get_urls()]
