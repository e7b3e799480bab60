from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class QualityConfig(AppConfig):
    name = "quality"
    verbose_name = _("Traffic quality")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from quality.counting import queue_quality
        from quality.recount import recount
        from stats.plugins import register_counter, register_day_recount

        register_counter("traffic quality", event_type="pv", queue=queue_quality)
        register_day_recount("traffic quality", recount)
        # The panels and /metrics figures: registered here, as the admin may not load in every process.
        from quality import dashboard  # noqa: F401
