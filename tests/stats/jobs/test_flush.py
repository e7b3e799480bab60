"""Flush (stats.jobs.flush): Redis buckets and HyperLogLogs to SQL, idempotently, crash included."""

import datetime as dt
import signal
import subprocess
import sys
import time

import pytest
from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common import redis_keys
from cpsproject.common.timeutil import local_day
from stats import keys
from stats.jobs import flush as flush_job
from stats.jobs.flush import flush
from stats.keys import NO_PARTNER
from stats.models import BucketStat, DailyStat
from tests.conftest import ROOT, subprocess_env
from tests.factories import at, create_tree, daily, feed, pv_event, table_snapshot

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 21)
NOON = at("2026-11-21 12:00")
LATER = at("2026-11-21 13:00")  # every noon bucket is settled by then


def test_flush_twice_writes_same_totals():
    create_tree()
    feed([pv_event(NOON, "A1a", f"u{n}") for n in range(25)], now=NOON)
    flush(now=LATER)
    first = table_snapshot()
    flush(now=LATER)
    assert table_snapshot() == first
    assert daily("A", DAY).pv == 25
    assert (daily("A1a", DAY).uv, BucketStat.objects.get(partner__code="A", start=NOON).pv) == (25, 25)


def test_settled_keys_are_deleted_and_open_ones_kept(redis_client):
    create_tree()
    feed([pv_event(at("2026-11-21 12:58"), "B")], now=LATER)
    feed([pv_event(NOON, "B")], now=LATER)
    result = flush(now=LATER, include_open=True)
    assert result.buckets == 2
    assert redis_client.exists(keys.pv_bucket(0, "B", "202611211255")) == 1
    assert redis_client.exists(keys.pv_bucket(0, "B", "202611211200")) == 0
    assert daily("B", DAY).pv == 2


@pytest.mark.parametrize(
    ("bucket", "unsettled", "settled"),
    [
        # A bucket settles SETTLE_SECONDS (5 min) after it ends: 12:00-12:05 at 12:10.
        (at("2026-11-21 12:00"), at("2026-11-21 12:09:59"), at("2026-11-21 12:10")),
        (at("2026-12-31 23:55"), at("2027-01-01 00:04:59"), at("2027-01-01 00:05")),
        (at("2027-02-28 23:55"), at("2027-03-01 00:04:59"), at("2027-03-01 00:05")),
    ],
    ids=["noon", "year end", "end of february"],
)
def test_a_flush_without_include_open_writes_a_bucket_once_it_is_settled(bucket, unsettled, settled):
    create_tree()
    feed([pv_event(bucket + dt.timedelta(minutes=4), "B")], now=bucket + dt.timedelta(minutes=4))
    assert flush(now=unsettled).buckets == 0
    assert not DailyStat.objects.filter(partner__code="B", date=bucket.date(), pv__gt=0).exists()
    assert flush(now=settled).buckets == 1
    assert daily("B", bucket.date()).pv == 1


def test_late_event_after_its_bucket_was_flushed_adds_to_it():
    create_tree()
    feed([pv_event(NOON, "A1", "u1")], now=NOON)
    flush(now=LATER)
    feed([pv_event(NOON, "A1", "u2")], now=LATER)  # same bucket, key deleted by the flush: a new generation
    flush(now=LATER)
    flush(now=LATER)
    assert daily("A1", DAY).pv == 2 and daily("A", DAY).pv == 2
    assert daily("A1", DAY).uv == 2
    assert BucketStat.objects.filter(partner__code="A1", start=NOON).count() == 2


def test_a_day_of_buckets_is_written_once_each_site_rows_included():
    """More rows than one upsert statement holds, and the site rows (NULL partner), which the DB cannot match."""
    create_tree()
    slots = [at("2026-11-21 00:00") + dt.timedelta(minutes=5 * n) for n in range(288)]
    next_day = at("2026-11-22 01:00")
    feed(
        [pv_event(s, code, f"u{n}") for n, s in enumerate(slots) for code in ("A1a", "B", None)], now=next_day
    )
    flush(now=next_day)
    flush(now=next_day)
    feed([pv_event(NOON, "A1a", "late"), pv_event(NOON, None, "late")], now=next_day)  # new generations
    flush(now=next_day)
    flush(now=next_day)
    assert (daily("A", DAY).pv, daily("A1a", DAY).pv, daily("B", DAY).pv, daily(None, DAY).pv) == (
        289,
        289,
        288,
        289,
    )
    assert BucketStat.objects.filter(partner__code="A").count() == 289
    assert BucketStat.objects.filter(partner=None).count() == 289
    assert sorted(BucketStat.objects.filter(partner=None, start=NOON).values_list("pv", flat=True)) == [1, 1]


def test_an_increment_that_races_the_flush_stays_in_redis_for_the_next_one(monkeypatch, redis_client):
    create_tree()
    feed([pv_event(NOON, "B", "u1"), pv_event(NOON, "A2", "u1"), pv_event(NOON, "A1a", "u1")], now=NOON)
    deletes = flush_job._delete_settled

    def racing(*args, **kwargs):
        feed([pv_event(NOON, "B", "u2")], now=LATER)  # after the flush read B's bucket, before its delete
        return deletes(*args, **kwargs)

    monkeypatch.setattr(flush_job, "_delete_settled", racing)
    flush(now=LATER)
    monkeypatch.undo()
    assert (daily("B", DAY).pv, daily("A", DAY).pv) == (1, 2)
    assert redis_client.exists(keys.pv_bucket(0, "B", "202611211200")) == 1
    assert redis_client.exists(keys.pv_bucket(0, "A2", "202611211200")) == 0
    flush(now=LATER)
    assert (daily("B", DAY).pv, daily("A", DAY).pv) == (2, 2)
    assert redis_client.exists(keys.pv_bucket(0, "B", "202611211200")) == 0


# --- a real `flush` process killed between its commit and its deletes ----------------------------------------


def realtime_pv(days: set[dt.date]) -> dict[str, int]:
    """Flushed PV per partner code summed over ``days`` (a test near midnight spans two)."""
    totals: dict[str, int] = {}
    for row in DailyStat.objects.filter(date__in=days).select_related("partner"):
        code = row.partner.code if row.partner else NO_PARTNER
        totals[code] = totals.get(code, 0) + row.pv
    return totals


def wait_for_lock_to_expire() -> None:
    deadline = time.monotonic() + 10
    while get_redis_connection("default").exists(redis_keys.lock("flush")) and time.monotonic() < deadline:
        time.sleep(0.1)


def indexed_bucket_count() -> int:
    return get_redis_connection("default").zcard(keys.pv_index(0))


def stat_tables() -> tuple[list, list]:
    buckets = sorted(
        (pid or 0, start, gen, pv, pv_self)
        for pid, start, gen, pv, pv_self in BucketStat.objects.values_list(
            "partner_id", "start", "generation", "pv", "pv_self"
        )
    )
    days = sorted(
        (pid or 0, day, pv, uv)
        for pid, day, pv, uv in DailyStat.objects.values_list("partner_id", "date", "pv", "uv")
    )
    return buckets, days


@pytest.mark.kafka  # for kafka_settings: the child process gets this test's database, Redis prefix and topic
@pytest.mark.real_clock
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("include_open", [False, True])
def test_flush_killed_between_commit_and_delete_leaves_the_same_tables(kafka_settings, include_open):
    """A real `flush` process is SIGKILLed after its SQL commit, before deleting keys; a re-run repairs it.

    The child process reads the real clock, so the events are placed relative to the real now.
    """
    create_tree()
    now = timezone.now()
    earlier = now - dt.timedelta(minutes=30)  # settled buckets, deleted by a flush that gets that far
    values = [pv_event(earlier, code, f"u{n % 40}") for n, code in enumerate(["A1a", "A2", "B", ""] * 50)]
    values += [pv_event(now, "A1", f"u{n}") for n in range(30)]  # the open bucket
    feed(values, now=now)
    args = ["--include-open"] if include_open else []
    crashed = subprocess.run(
        [sys.executable, "manage.py", "flush", *args],
        cwd=ROOT,
        env=subprocess_env(kafka_settings, CPS_FAULT_KILL="flush_after_commit:1", CPS_LOCK_SECONDS="1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert indexed_bucket_count() > 0  # nothing was deleted
    wait_for_lock_to_expire()  # the killed flush's lock frees itself after CPS_LOCK_SECONDS
    flush(include_open=include_open)
    after_crash = stat_tables()
    flush(include_open=include_open)
    assert stat_tables() == after_crash
    rows = realtime_pv({local_day(earlier), local_day(now)})
    assert (rows["A"], rows["A1a"], rows["B"], rows[NO_PARTNER]) == (
        100 + (30 if include_open else 0),
        50,
        50,
        50,
    )
