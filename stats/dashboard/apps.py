from django.apps import apps
from django.contrib.admin.apps import AdminConfig
from django.utils.translation import gettext_lazy as _


class StatsAdminConfig(AdminConfig):
    """``django.contrib.admin`` with the statistics dashboard as the index every staff user lands on."""

    default_site = "stats.dashboard.site.StatsAdminSite"

    def ready(self) -> None:
        super().ready()
        # django-q2 names its app with a fixed English label ("Django Q"); staff read the index in their language.
        if apps.is_installed("django_q"):
            apps.get_app_config("django_q").verbose_name = _("Task queue")
