"""The read side (stats.read.selectors): flushed rows plus what Redis holds that is not flushed yet.

Which days may still have Redis keys depends on the moment: the tests pass it as ``now``.
"""

import datetime as dt

import pytest

from partners.models import Partner
from stats.jobs.flush import flush
from stats.jobs.reconcile import reconcile
from stats.read.selectors import partner_bucket_series, partner_days, uv_between
from tests.factories import at, create_tree, feed, pv_event

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 21)
NOON = at("2026-11-21 12:00")


def test_uv_between_merges_days_and_subtrees():
    create_tree()
    feed([pv_event(NOON, "A1", "u1"), pv_event(NOON, "A2", "u2")], now=NOON)
    next_noon = NOON + dt.timedelta(days=1)
    feed([pv_event(next_noon, "A1", "u1"), pv_event(next_noon, "A2", "u3")], now=next_noon)
    flush(now=next_noon + dt.timedelta(hours=1))
    a = Partner.objects.get(code="A")
    assert uv_between(a, DAY, DAY + dt.timedelta(days=1)) == 3
    assert uv_between(Partner.objects.get(code="A1"), DAY, DAY + dt.timedelta(days=1)) == 1
    assert uv_between(a, DAY, DAY, scope="self") == 0


def test_partner_days_add_unflushed_counts_once_and_show_reconciled_days_as_final():
    tree = create_tree()
    yesterday, today = DAY, DAY + dt.timedelta(days=1)
    feed([pv_event(NOON, "A1", "u1"), pv_event(NOON, "A1a", "u2", event_id="twice")], now=NOON)
    feed([pv_event(NOON, "A1a", "u2", event_id="twice")], now=NOON)  # a duplicate: realtime counts it
    flush(now=at("2026-11-21 13:00"))
    feed([pv_event(at("2026-11-21 23:59"), "A1a", "u3")], now=at("2026-11-22 00:10"))  # not flushed yet
    feed([pv_event(at("2026-11-22 00:10"), "A1", "u1")], now=at("2026-11-22 00:10"))
    now = at("2026-11-22 00:20")
    days = partner_days(partner=tree["A1"], start=DAY - dt.timedelta(days=1), end=today, now=now)
    assert [(d.date, d.pv, d.uv, d.pv_self, d.uv_self, d.reconciled) for d in days] == [
        (DAY - dt.timedelta(days=1), 0, 0, 0, 0, False),
        (yesterday, 4, 3, 1, 1, False),
        (today, 1, 1, 1, 1, False),
    ]
    buckets = partner_bucket_series(partner=tree["A1"], day=yesterday, now=now)
    assert len(buckets) == 288 and sum(pv for _, pv, _ in buckets) == 4
    assert [(start, pv, pv_self) for start, pv, pv_self in buckets if pv] == [
        (NOON, 3, 1),
        (at("2026-11-21 23:55"), 1, 0),
    ]
    reconcile(day=yesterday, now=now)  # exact: the duplicate once, the late event in
    days = partner_days(partner=tree["A1"], start=yesterday, end=yesterday, now=now)
    assert [(d.pv, d.uv, d.pv_self, d.uv_self, d.reconciled) for d in days] == [(3, 3, 1, 1, True)]
    feed([pv_event(at("2026-11-21 23:58"), "A1", "u9")], now=now)  # after the recount
    assert partner_days(partner=tree["A1"], start=yesterday, end=yesterday, now=now)[0].pv == 3  # final


def test_unflushed_counts_show_until_no_late_event_can_reach_the_day_and_never_before_it():
    """Redis may hold a day's counts until its end + MAX_LATENESS + SETTLE + a day; never a future day's."""
    tree = create_tree()
    feed([pv_event(NOON, "B", "u1")], now=NOON)

    def pv(now: dt.datetime) -> int:
        return partner_days(partner=tree["B"], start=DAY, end=DAY, now=now)[0].pv

    assert pv(NOON) == 1
    # 2026-11-22 00:00 + 7 days + 300 s + 1 day = 2026-11-30 00:05.
    assert pv(at("2026-11-30 00:04:59")) == 1
    assert pv(at("2026-11-30 00:05")) == 0
    assert pv(at("2026-11-20 23:59")) == 0  # a day after "today" has no counts yet
