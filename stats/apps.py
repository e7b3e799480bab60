from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class StatsConfig(AppConfig):
    name = "stats"
    verbose_name = _("Traffic statistics")

    def ready(self) -> None:
        from stats.counters import queue_page_view_counters
        from stats.pipeline.events import parse_page_view
        from stats.plugins import register_counter, register_event_type

        register_event_type("pv", parse_page_view)
        # PV buckets and UV, rankings, series: one counter, so that the batch is tallied once for the three.
        register_counter("page_views", event_type="pv", queue=queue_page_view_counters)
