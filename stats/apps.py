from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class StatsConfig(AppConfig):
    name = "stats"
    verbose_name = _("Traffic statistics")

    def ready(self) -> None:
        from stats.counters.pageviews import queue_page_views
        from stats.counters.rankings import queue_rankings
        from stats.counters.series import queue_series
        from stats.pipeline.events import parse_page_view
        from stats.plugins import register_counter, register_event_type

        register_event_type("pv", parse_page_view)
        register_counter("pv_uv", event_type="pv", queue=queue_page_views)
        register_counter("rankings", event_type="pv", queue=queue_rankings)
        register_counter("series", event_type="pv", queue=queue_series)
