"""Flush reading the bucket index while consumers write to it: what one flush writes, what the next one does."""

import datetime as dt
from collections.abc import Callable

import pytest
from django_redis import get_redis_connection

from stats import keys
from stats.counters import pageviews
from stats.counters.pageviews import queue_page_views
from stats.counters.tally import PageViewTally
from stats.jobs.flush import flush
from stats.models import BucketStat
from stats.pipeline.events import parse_event
from stats.pipeline.ingest import PartnerDirectory, unfenced_writes
from tests.factories import at, create_tree, daily, feed, pv_event

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 21)
LATER = at("2026-11-21 13:00")  # buckets of 12:00-12:25 are settled by then


def counter_in_redis(values: list[bytes], *, now: dt.datetime) -> Callable[[], None]:
    """Return a function counting ``values`` in Redis as the consumer does, without the database (the flush
    has a statement in flight on its connection while it reads)."""
    lineages = PartnerDirectory().lineages()
    views = [parse_event(value, lineages=lineages, now=now) for value in values]
    client = get_redis_connection("default")

    def write() -> None:
        pipe = client.pipeline(transaction=False)
        queue_page_views(unfenced_writes(pipe), PageViewTally.of(views), now=now)
        pipe.execute()

    return write


def test_buckets_indexed_and_incremented_while_the_flush_reads_are_each_counted_once(monkeypatch):
    """Six buckets of B read two at a time; after the first two, a late event indexes a bucket of 09:00 (every
    later bucket moves one rank up) and 12:05 is incremented: 12:05 is read twice and written with its last
    value, 12:25 waits for the next flush. Eight page views in all, eight counted."""
    create_tree()
    feed(
        [pv_event(at("2026-11-21 12:00") + dt.timedelta(minutes=5 * n), "B", f"u{n}") for n in range(6)],
        now=LATER,
    )
    late = counter_in_redis(
        [pv_event(at("2026-11-21 09:00"), "B", "late"), pv_event(at("2026-11-21 12:05"), "B", "again")],
        now=LATER,
    )
    monkeypatch.setattr(pageviews, "READ_CHUNK", 2)
    monkeypatch.setattr(pageviews, "INDEX_PAGE", 2)
    read_buckets = pageviews.read_indexed

    def read_while_a_consumer_writes(*args, **kwargs):
        for n, chunk in enumerate(read_buckets(*args, **kwargs)):
            yield chunk
            if n == 0:
                late()

    monkeypatch.setattr(pageviews, "read_indexed", read_while_a_consumer_writes)
    first = flush(now=LATER)
    monkeypatch.undo()
    index = get_redis_connection("default")
    assert (first.buckets, daily("B", DAY).pv) == (5, 6)
    assert sorted(m.decode() for m in index.zrange(keys.pv_index(0), 0, -1)) == [
        keys.pv_bucket(0, "B", "202611210900"),
        keys.pv_bucket(0, "B", "202611211225"),
    ]
    second = flush(now=LATER)
    assert (second.buckets, daily("B", DAY).pv, BucketStat.objects.filter(partner__code="B").count()) == (
        2,
        8,
        7,
    )
    assert index.zcard(keys.pv_index(0)) == 0
