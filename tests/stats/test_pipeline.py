"""Ingest → Redis → flush → SQL → reconcile, in-process, against real Redis and the real database."""

import datetime as dt
import json
import random

import pytest
from django.db.models import Count
from rest_framework.test import APIClient

from stats.jobs.flush import flush
from stats.jobs.reconcile import reconcile
from stats.models import BucketStat, DailyStat, DeadLetter, ReconcileDrift
from stats.read.selectors import uv_between
from tests.factories import archived_event_count, at, create_staff, create_tree, feed, pv_event

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 21)
NOON = at("2026-11-21 12:00")
LATER = at("2026-11-21 13:00")  # every noon bucket is settled by then


def daily(code: str | None, day: dt.date = DAY) -> DailyStat:
    return (
        DailyStat.objects.get(partner__code=code, date=day)
        if code
        else DailyStat.objects.get(partner=None, date=day)
    )


def table_snapshot() -> tuple[list, list]:
    buckets = sorted(
        BucketStat.objects.values_list("partner_id", "start", "generation", "pv", "pv_self", "bot_pv"),
        key=lambda row: (row[0] or 0, *row[1:]),
    )
    days = sorted(
        DailyStat.objects.values_list("partner_id", "date", "pv", "pv_self", "uv", "uv_self", "bot_pv"),
        key=lambda row: (row[0] or 0, row[1]),
    )
    return buckets, days


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
    assert (daily("A").pv, daily("A").pv_self) == (4, 0)
    assert (daily("A1").pv, daily("A1").pv_self) == (3, 1)
    assert (daily("A1a").pv, daily("A1a").pv_self) == (2, 2)
    assert (daily("A2").pv, daily("A2").pv_self) == (1, 1)
    assert daily(None).pv == 1
    assert not DailyStat.objects.filter(partner__code="B").exists()


def test_parent_uv_counts_a_user_seen_through_two_children_once():
    create_tree()
    feed([pv_event(NOON, "A1", "same-user"), pv_event(NOON, "A2", "same-user")], now=NOON)
    flush(now=LATER)
    assert (daily("A1").uv, daily("A2").uv, daily("A").uv) == (1, 1, 1)
    assert daily("A").uv_self == 0


def test_uv_is_within_two_percent_for_five_thousand_users():
    create_tree()
    rng = random.Random(3)
    users = [f"user-{n}" for n in range(5000)]
    values = [pv_event(NOON, rng.choice(["A1", "A2"]), u) for u in users for _ in range(2)]
    for start in range(0, len(values), 2000):
        feed(values[start : start + 2000], now=NOON)
    flush(now=LATER)
    assert daily("A").pv == 10_000
    assert abs(daily("A").uv - 5000) / 5000 < 0.02


def test_bot_traffic_is_counted_apart():
    create_tree()
    feed(
        [pv_event(NOON, "A1", "u1", ua="Googlebot/2.1"), pv_event(NOON, "A1", "u2", ua="Mozilla/5.0")],
        now=NOON,
    )
    flush(now=LATER)
    assert (daily("A1").pv, daily("A1").uv, daily("A1").bot_pv) == (1, 1, 1)
    assert daily("A").bot_pv == 0


def test_events_either_side_of_shanghai_midnight_land_on_two_days():
    create_tree()
    now = at("2026-11-22 00:20")
    feed([pv_event(at("2026-11-21 23:59:59"), "B"), pv_event(at("2026-11-22 00:00:00"), "B")], now=now)
    flush(now=now, include_open=True)
    assert daily("B", dt.date(2026, 11, 21)).pv == 1
    assert daily("B", dt.date(2026, 11, 22)).pv == 1
    assert BucketStat.objects.get(partner__code="B", start=at("2026-11-21 23:55")).pv == 1


def test_flush_twice_writes_same_totals(redis_client):
    create_tree()
    feed([pv_event(NOON, "A1a", f"u{n}") for n in range(25)], now=NOON)
    flush(now=LATER)
    first = table_snapshot()
    flush(now=LATER)
    assert table_snapshot() == first
    assert daily("A").pv == 25


def test_settled_keys_are_deleted_and_open_ones_kept(redis_client):
    create_tree()
    feed([pv_event(at("2026-11-21 12:58"), "B")], now=LATER)
    feed([pv_event(NOON, "B")], now=LATER)
    result = flush(now=LATER, include_open=True)
    assert result.buckets == 2
    from stats import keys

    assert redis_client.exists(keys.pv_bucket("B", "202611211255")) == 1
    assert redis_client.exists(keys.pv_bucket("B", "202611211200")) == 0
    assert daily("B").pv == 2


def test_late_event_after_its_bucket_was_flushed_adds_to_it():
    create_tree()
    feed([pv_event(NOON, "A1", "u1")], now=NOON)
    flush(now=LATER)
    feed([pv_event(NOON, "A1", "u2")], now=LATER)  # same bucket, key deleted by the flush: a new generation
    flush(now=LATER)
    flush(now=LATER)
    assert daily("A1").pv == 2 and daily("A").pv == 2
    assert daily("A1").uv == 2
    assert BucketStat.objects.filter(partner__code="A1", start=NOON).count() == 2


def test_api_shows_unflushed_counts_without_double_counting_flushed_ones(settings):
    create_tree()
    create_staff()
    client = APIClient()
    client.login(username="staff", password="pw")
    today = dt.date.today()
    now = dt.datetime.now(tz=dt.UTC)
    feed([pv_event(now - dt.timedelta(minutes=1), "A1", "u1")], now=now)
    flush(now=now, include_open=True)  # written but kept: the bucket is open
    feed([pv_event(now - dt.timedelta(seconds=5), "A1", "u2")], now=now)
    body = client.get(f"/api/v1/partners/A/stats/?start={today - dt.timedelta(days=1)}&end={today}").json()
    assert body["total_pv"] == 2
    assert body["days"][-1]["uv"] == 2 and body["days"][-1]["reconciled"] is False
    buckets = client.get("/api/v1/partners/A1/buckets/").json()
    assert sum(b["pv"] for b in buckets) == 2 and len(buckets) == 288


def test_api_rejects_bad_parameters_naming_them():
    create_tree()
    create_staff()
    client = APIClient()
    client.login(username="staff", password="pw")
    response = client.get("/api/v1/partners/A/stats/?start=yesterday")
    assert response.status_code == 400 and "start" in response.json()
    assert client.get("/api/v1/partners/A/stats/?start=2026-11-10&end=2026-11-01").status_code == 400
    assert "date" in client.get("/api/v1/partners/A/buckets/?date=2026-13-01").json()
    assert client.get("/api/v1/partners/NOPE/stats/").status_code == 404


def test_reconcile_counts_duplicates_once_records_drift_and_is_repeatable():
    create_tree()
    feed([pv_event(NOON, "A1a", "u1", event_id="dup"), pv_event(NOON, "A1a", "u2")], now=NOON)
    feed([pv_event(NOON, "A1a", "u1", event_id="dup")], now=NOON)  # the client sent it twice
    feed([pv_event(NOON, "A2", "u1"), pv_event(NOON, None, "u5")], now=NOON)
    flush(now=LATER)
    assert daily("A").pv == 4  # realtime counts the duplicate
    reconcile(day=DAY, now=LATER)
    first = table_snapshot()
    assert (daily("A").pv, daily("A").uv, daily("A1a").pv, daily("A1a").uv_self) == (3, 2, 2, 2)
    assert daily(None).pv == 1 and daily("A").reconciled_at is not None
    drift = ReconcileDrift.objects.get(partner__code="A", date=DAY)
    assert (drift.realtime_pv, drift.exact_pv, drift.pv_drift) == (4, 3, -1)
    reconcile(day=DAY, now=LATER)
    assert table_snapshot() == first


def test_reconciled_day_is_final_and_late_events_show_as_drift():
    create_tree()
    feed([pv_event(NOON, "B", "u1")], now=NOON)
    flush(now=LATER)
    reconcile(day=DAY, now=LATER)
    feed([pv_event(NOON, "B", "u2", event_id="late-1")], now=LATER)
    flush(now=LATER)
    assert daily("B").pv == 1 and daily("B").realtime_pv == 2
    reconcile(day=DAY, now=LATER)
    assert daily("B").pv == 2
    assert ReconcileDrift.objects.get(partner__code="B").pv_drift == 0


def test_uv_between_merges_days_and_subtrees():
    create_tree()
    feed([pv_event(NOON, "A1", "u1"), pv_event(NOON, "A2", "u2")], now=NOON)
    next_noon = NOON + dt.timedelta(days=1)
    feed([pv_event(next_noon, "A1", "u1"), pv_event(next_noon, "A2", "u3")], now=next_noon)
    flush(now=next_noon + dt.timedelta(hours=1))
    from partners.models import Partner

    a = Partner.objects.get(code="A")
    assert uv_between(a, DAY, DAY + dt.timedelta(days=1)) == 3
    assert uv_between(Partner.objects.get(code="A1"), DAY, DAY + dt.timedelta(days=1)) == 1


def test_hostile_events_become_dead_letters_and_good_ones_all_count():
    create_tree()
    rng = random.Random(11)
    hostile = {
        "not_json": b"{oops",
        "not_utf8": b'{"event_id": "\xff"}',
        "not_object": b"[1, 2]",
        "missing_field": json.dumps({"type": "pv", "ts": NOON.isoformat()}).encode(),
        "unknown_type": json.dumps({"event_id": "x", "type": "click", "ts": NOON.isoformat()}).encode(),
        "bad_ts": json.dumps({"event_id": "x", "type": "pv", "ts": "2026-11-21T12:00:00"}).encode(),
        "ts_in_future": pv_event(NOON + dt.timedelta(hours=1), "A1"),
        "ts_too_old": pv_event(NOON - dt.timedelta(days=8), "A1"),
        "unknown_partner": pv_event(NOON, "NOPE"),
        "too_large": pv_event(NOON, "A1", url="x" * 70_000),
        "bad_field": json.dumps(
            {"event_id": "x", "type": "login", "ts": NOON.isoformat(), "user_type": "alien", "user_id": 1}
        ).encode(),
    }
    reasons = list(hostile)
    messages, expected_dead = [], {}
    good = 0
    for n in range(2000):
        if n % 2:
            reason = reasons[n % len(reasons)]
            messages.append(hostile[reason])
            expected_dead[reason] = expected_dead.get(reason, 0) + 1
        else:
            messages.append(pv_event(NOON, rng.choice(["A1", "A1a", "A2", "B"]), f"u{n}"))
            good += 1
    result = feed(messages, now=NOON)
    assert result.counted == good == 1000
    assert dict(result.dead) == expected_dead
    stored = dict(DeadLetter.objects.values_list("reason").annotate(n=Count("id")))
    assert stored == expected_dead
    assert bytes(DeadLetter.objects.filter(reason="not_utf8").first().raw) == hostile["not_utf8"]
    flush(now=LATER)
    assert daily("A").pv + daily("B").pv == 1000


def test_inactive_partner_events_are_dead_letters():
    from partners.services import partner_deactivate

    tree = create_tree()
    partner_deactivate(partner=tree["B"])
    feed([pv_event(NOON, "B")], now=NOON)
    assert DeadLetter.objects.get().reason == "inactive_partner"


def test_replayed_batch_is_archived_once():
    create_tree()
    values = [pv_event(NOON, "A1", f"u{n}") for n in range(10)]
    feed(values, now=NOON)
    feed(values, now=NOON)
    assert archived_event_count() == 10
