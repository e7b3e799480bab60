from django.contrib.admin.apps import AdminConfig


class StatsAdminConfig(AdminConfig):
    """``django.contrib.admin`` with the statistics dashboard as the index every staff user lands on."""

    default_site = "stats.dashboard.site.StatsAdminSite"
