from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ConversionsConfig(AppConfig):
    name = "conversions"
    verbose_name = _("Conversions")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from conversions.attribution import queue_views
        from conversions.events import parse_order
        from conversions.held import held_refunds_health
        from conversions.reconcile import reconcile_orders
        from conversions.recording import record_orders
        from stats.plugins import (
            register_counter,
            register_day_recount,
            register_event_type,
            register_health_check,
            register_recorder,
        )

        register_event_type("order", parse_order)
        register_counter("partner views", event_type="pv", queue=queue_views)
        register_recorder("orders", event_type="order", record=record_orders)
        register_health_check("held refunds", held_refunds_health)
        register_day_recount("orders", reconcile_orders)
