"""Day UV HyperLogLogs (stats.counters.uniques): their safety TTL and scopes, fed through the real ingest
pipeline."""

import datetime as dt

import pytest

from partners.models import Partner
from stats import keys
from stats.jobs.flush import flush
from stats.models import DailyStat
from stats.read.selectors import partner_days
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


def test_a_subtree_hyperloglog_an_earlier_version_wrote_is_read_and_flushed_with_the_new_scopes(redis_client):
    """A view now goes to its partner's ``self`` and its ancestors' ``below`` HyperLogLogs; the ``tree`` one an
    earlier version wrote for the same day still counts, live and once flushed, and goes with the day."""
    create_tree()
    start = at("2026-11-21 08:00")
    feed([pv_event(start, "A1a", "u2"), pv_event(start, "A1a", "u3"), pv_event(start, "A", "u4")], now=start)
    legacy = keys.uv_day(0, "A", DAY_STAMP, "tree")  # as an earlier version left it: u1 and u2
    redis_client.pfadd(legacy, "u1", "u2")
    redis_client.sadd(keys.uv_index(0, DAY_STAMP), legacy)
    day = start.date()

    def uv(code: str) -> tuple[int, int]:
        (shown,) = partner_days(partner=Partner.objects.get(code=code), start=day, end=day, now=start)
        return shown.uv, shown.uv_self

    assert (uv("A"), uv("A1"), uv("A1a")) == ((4, 1), (2, 0), (2, 2))
    flush(now=start)
    assert (uv("A"), uv("A1"), uv("A1a")) == ((4, 1), (2, 0), (2, 2))
    stored = DailyStat.objects.get(partner__code="A", date=day)
    assert (stored.realtime_uv, stored.realtime_uv_self) == (4, 1)
    flush(now=at("2026-11-22 01:00"))  # the day settled: its HyperLogLogs are in SQL alone
    assert not redis_client.exists(legacy, keys.uv_day(0, "A", DAY_STAMP, "below"))
    assert DailyStat.objects.get(partner__code="A", date=day).realtime_uv == 4
