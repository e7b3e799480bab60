"""Day UV HyperLogLogs (stats.counters.uniques): their safety TTL, fed through the real ingest pipeline."""

import datetime as dt

import pytest

from stats import keys
from tests.factories import at, create_tree, feed, pv_event

pytestmark = pytest.mark.django_db

DAY_STAMP = "20261121"


def test_a_new_day_hyperloglog_gets_its_ttl_and_a_later_batch_leaves_it_alone(redis_client):
    """Renewing every HyperLogLog's TTL on every batch was a write for each (issue 35)."""
    create_tree()
    start = at("2026-11-21 08:00")
    feed([pv_event(start, "B", "u1")], now=start)
    hll = keys.uv_day(0, "B", DAY_STAMP, "self")
    assert keys.realtime_ttl() - 60 < redis_client.ttl(hll) <= keys.realtime_ttl()
    redis_client.expire(hll, 1000)
    later = start + dt.timedelta(minutes=1)
    feed([pv_event(later, "B", "u2")], now=later)
    assert 0 < redis_client.ttl(hll) <= 1000


def test_a_day_hyperloglog_deleted_and_written_again_gets_its_ttl_again(redis_client):
    create_tree()
    start = at("2026-11-21 08:00")
    feed([pv_event(start, "B", "u1")], now=start)
    hll = keys.uv_day(0, "B", DAY_STAMP, "self")
    redis_client.delete(hll)  # as flush deletes a settled day's
    later = start + dt.timedelta(minutes=1)
    feed([pv_event(later, "B", "u2")], now=later)
    assert keys.realtime_ttl() - 60 < redis_client.ttl(hll) <= keys.realtime_ttl()
