"""The Redis counters that batches of events feed, registered with the pipeline in ``stats.apps``."""

import datetime as dt
from collections.abc import Iterable

from stats.counters.pageviews import queue_page_views
from stats.counters.rankings import queue_rankings
from stats.counters.series import queue_series
from stats.counters.tally import PageViewTally
from stats.pipeline.events import PageView


def queue_page_view_counters(pipe, views: Iterable[PageView], *, now: dt.datetime) -> None:
    """Queue PV buckets and UV, the rankings and the series of ``views``, counted per partner-second once."""
    tally = PageViewTally.of(views)
    queue_page_views(pipe, tally, now=now)
    queue_rankings(pipe, tally, now=now)
    queue_series(pipe, tally, now=now)
