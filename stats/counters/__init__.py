"""The Redis counters that batches of events feed, registered with the pipeline in ``stats.apps``.

One module per Redis structure, each the only one that writes and reads it: ``pageviews`` (PV buckets),
``uniques`` (day UV HyperLogLogs), ``rankings``, ``series``; ``partitions`` lists the Kafka partitions whose
hash tags hold counters. Lua sources are ``.lua`` files beside their module.
"""

import datetime as dt
from collections.abc import Iterable

from stats.counters.pageviews import queue_page_views
from stats.counters.rankings import queue_rankings
from stats.counters.series import queue_series
from stats.counters.tally import PageViewTally
from stats.counters.uniques import queue_uniques
from stats.pipeline.events import PageView
from stats.pipeline.registry import CounterWrites


def queue_page_view_counters(writes: CounterWrites, views: Iterable[PageView], *, now: dt.datetime) -> None:
    """Queue PV buckets and UV, the rankings and the series of ``views``, counted per partner-second once."""
    tally = PageViewTally.of(views)
    queue_page_views(writes, tally, now=now)
    queue_uniques(writes, tally)
    queue_rankings(writes, tally, now=now)
    queue_series(writes, tally, now=now)
