from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class QualityConfig(AppConfig):
    name = "quality"
    verbose_name = _("Traffic quality")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from conversions.public import register_commission_reviews
        from quality.counting import queue_quality
        from quality.health import quality_health
        from quality.recount import recount
        from quality.selectors import commission_reviews
        from stats.plugins import register_counter, register_day_recount, register_health_check

        register_counter("traffic quality", event_type="pv", queue=queue_quality)
        register_day_recount("traffic quality", recount)
        # manage.py health: the quality flush behind the counted days, findings nobody reviews.
        register_health_check("traffic quality", quality_health)
        # An open finding holds its partner-day's commissions from the statement; a confirmed one reverses them.
        register_commission_reviews(commission_reviews)
        # The panels and /metrics figures: registered here, as the admin may not load in every process.
        from quality import dashboard  # noqa: F401
