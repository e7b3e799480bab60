from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ConversionsConfig(AppConfig):
    name = "conversions"
    verbose_name = _("Conversions")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from conversions.attribution import remember_views
        from conversions.events import parse_order
        from conversions.held import held_refunds_health
        from conversions.reconcile import reconcile_orders
        from conversions.recording import record_orders
        from stats.plugins import (
            register_day_recount,
            register_event_type,
            register_health_check,
            register_recorder,
        )

        register_event_type("order", parse_order)
        register_recorder("orders", event_type="order", record=record_orders)
        # A recorder, not a counter: it reads the buyers' views before it merges a batch's into them, which a
        # counter (built while the batch before is still being applied) cannot do.
        register_recorder("partner views", event_type="pv", record=remember_views)
        register_health_check("held refunds", held_refunds_health)
        register_day_recount("orders", reconcile_orders)
