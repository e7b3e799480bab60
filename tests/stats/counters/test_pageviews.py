"""PV buckets and UV HyperLogLogs (stats.counters.pageviews): roll-up to ancestors, bots apart, business days.

Fed through the real ingest pipeline and read back from SQL after a flush.
"""

import datetime as dt
import random

import pytest

from cpsproject.common.timeutil import stamp_minute
from stats.counters.pageviews import bucket_start
from stats.jobs.flush import flush
from stats.models import BucketStat, DailyStat
from tests.factories import at, create_tree, daily, feed, pv_event

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 21)
NOON = at("2026-11-21 12:00")
LATER = at("2026-11-21 13:00")  # every noon bucket is settled by then
UTC = dt.UTC


@pytest.mark.parametrize(
    ("moment", "bucket"),
    [
        (at("2026-11-21 01:00:00"), "202611210100"),
        (at("2026-11-21 01:04:59"), "202611210100"),
        (at("2026-11-21 01:05:00"), "202611210105"),
        (at("2026-11-21 23:59:59"), "202611212355"),
        (dt.datetime(2026, 11, 20, 16, 0, tzinfo=UTC), "202611210000"),  # UTC 16:00 is Shanghai midnight
        (at("2026-12-31 23:59:59.999"), "202612312355"),
        (dt.datetime(2026, 12, 31, 16, 0, tzinfo=UTC), "202701010000"),  # a new year in Shanghai, not in UTC
        (at("2027-02-28 23:57"), "202702282355"),
        (at("2027-03-01 00:00"), "202703010000"),
    ],
)
def test_bucket_of_a_timestamp_is_in_business_time(moment, bucket):
    assert stamp_minute(bucket_start(moment)) == bucket


def test_pv_counts_for_the_partner_and_every_ancestor():
    create_tree()
    feed(
        [
            pv_event(NOON, "A1a", "u1"),
            pv_event(NOON, "A1a", "u2"),
            pv_event(NOON, "A1", "u1"),
            pv_event(NOON, "A2", "u3"),
            pv_event(NOON, None, "u9"),
        ],
        now=NOON,
    )
    flush(now=LATER)
    assert (daily("A", DAY).pv, daily("A", DAY).pv_self) == (4, 0)
    assert (daily("A1", DAY).pv, daily("A1", DAY).pv_self) == (3, 1)
    assert (daily("A1a", DAY).pv, daily("A1a", DAY).pv_self) == (2, 2)
    assert (daily("A2", DAY).pv, daily("A2", DAY).pv_self) == (1, 1)
    assert daily(None, DAY).pv == 1
    assert not DailyStat.objects.filter(partner__code="B").exists()
    assert (daily("A", DAY).uv, daily("A1", DAY).uv, daily("A1", DAY).uv_self) == (3, 2, 1)


def test_parent_uv_counts_a_user_seen_through_two_children_once():
    create_tree()
    feed([pv_event(NOON, "A1", "same-user"), pv_event(NOON, "A2", "same-user")], now=NOON)
    flush(now=LATER)
    assert (daily("A1", DAY).uv, daily("A2", DAY).uv, daily("A", DAY).uv) == (1, 1, 1)
    assert daily("A", DAY).uv_self == 0


def test_uv_is_within_two_percent_for_five_thousand_users():
    create_tree()
    rng = random.Random(3)
    users = [f"user-{n}" for n in range(5000)]
    values = [pv_event(NOON, rng.choice(["A1", "A2"]), u) for u in users for _ in range(2)]
    for start in range(0, len(values), 2000):
        feed(values[start : start + 2000], now=NOON)
    flush(now=LATER)
    assert daily("A", DAY).pv == 10_000
    assert abs(daily("A", DAY).uv - 5000) / 5000 < 0.02


def test_bot_traffic_is_counted_apart():
    create_tree()
    feed(
        [pv_event(NOON, "A1", "u1", ua="Googlebot/2.1"), pv_event(NOON, "A1", "u2", ua="Mozilla/5.0")],
        now=NOON,
    )
    flush(now=LATER)
    assert (daily("A1", DAY).pv, daily("A1", DAY).uv, daily("A1", DAY).bot_pv) == (1, 1, 1)
    assert daily("A", DAY).bot_pv == 0


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (at("2026-11-21 23:59:59"), at("2026-11-22 00:00:00")),
        (at("2026-12-31 23:59:59"), at("2027-01-01 00:00:00")),
        (at("2027-02-28 23:59:59"), at("2027-03-01 00:00:00")),
        (at("2026-11-30 23:59:59"), at("2026-12-01 00:00:00")),
    ],
    ids=["midnight", "year end", "end of february", "month end"],
)
def test_events_either_side_of_shanghai_midnight_land_on_two_days(before, after):
    create_tree()
    now = after + dt.timedelta(minutes=20)
    feed([pv_event(before, "B"), pv_event(after, "B")], now=now)
    flush(now=now, include_open=True)
    assert daily("B", before.date()).pv == 1
    assert daily("B", after.date()).pv == 1
    assert BucketStat.objects.get(partner__code="B", start=before.replace(minute=55, second=0)).pv == 1
    assert BucketStat.objects.get(partner__code="B", start=after).pv == 1
