"""Reconcile (stats.jobs.reconcile): the exact recount of a business day from the raw archive."""

import datetime as dt
import threading
import time

import pytest
from django.core.management import CommandError, call_command

from cpsproject.common.locks import LockBusy, job_lock
from stats.jobs import reconcile as reconcile_job
from stats.jobs.flush import flush
from stats.jobs.reconcile import default_reconcile_day, reconcile
from stats.models import DailyStat, ReconcileDrift
from tests.factories import at, create_tree, daily, feed, pv_event, table_snapshot

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 21)
NOON = at("2026-11-21 12:00")
LATER = at("2026-11-21 13:00")


def test_reconcile_counts_duplicates_once_records_drift_and_is_repeatable():
    create_tree()
    feed([pv_event(NOON, "A1a", "u1", event_id="dup"), pv_event(NOON, "A1a", "u2")], now=NOON)
    feed([pv_event(NOON, "A1a", "u1", event_id="dup")], now=NOON)  # the client sent it twice
    feed([pv_event(NOON, "A2", "u1"), pv_event(NOON, None, "u5")], now=NOON)
    flush(now=LATER)
    assert daily("A", DAY).pv == 4  # realtime counts the duplicate
    reconcile(day=DAY, now=LATER)
    first = table_snapshot()
    assert (daily("A", DAY).pv, daily("A", DAY).uv, daily("A1a", DAY).pv, daily("A1a", DAY).uv_self) == (
        3,
        2,
        2,
        2,
    )
    assert daily(None, DAY).pv == 1 and daily("A", DAY).reconciled_at == LATER
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
    assert daily("B", DAY).pv == 1 and daily("B", DAY).realtime_pv == 2
    reconcile(day=DAY, now=LATER)
    assert daily("B", DAY).pv == 2
    assert ReconcileDrift.objects.get(partner__code="B").pv_drift == 0


@pytest.mark.parametrize(
    ("now", "yesterday"),
    [
        (at("2026-11-22 00:30"), dt.date(2026, 11, 21)),
        (at("2027-01-01 00:30"), dt.date(2026, 12, 31)),
        (at("2027-03-01 00:30"), dt.date(2027, 2, 28)),
        (at("2026-12-01 00:30"), dt.date(2026, 11, 30)),
        # 16:30 UTC on Nov 21 is already the 22nd in Shanghai: yesterday is the 21st there, not the 20th.
        (dt.datetime(2026, 11, 21, 16, 30, tzinfo=dt.UTC), dt.date(2026, 11, 21)),
    ],
    ids=["ordinary day", "year end", "end of february", "month end", "utc date behind"],
)
def test_the_default_day_is_yesterday_in_business_time(now, yesterday):
    assert default_reconcile_day(now) == yesterday


@pytest.mark.time_machine("2027-01-01T00:30:00+08:00", tick=False)
def test_the_reconcile_command_recounts_yesterday_by_default(capsys):
    create_tree()
    late_evening = at("2026-12-31 23:59:59")
    feed(
        [pv_event(late_evening, "A1a", "u1"), pv_event(at("2027-01-01 00:00"), "A1a", "u2")], now=late_evening
    )
    call_command("reconcile")
    assert "reconciled 2026-12-31" in capsys.readouterr().out
    assert (daily("A", dt.date(2026, 12, 31)).pv, daily("A", dt.date(2026, 12, 31)).reconciled_at) == (
        1,
        at("2027-01-01 00:30"),
    )
    assert not DailyStat.objects.filter(date=dt.date(2027, 1, 1), reconciled_at__isnull=False).exists()


def test_reconcile_does_not_write_while_a_flush_holds_its_lock(monkeypatch):
    create_tree()
    feed([pv_event(NOON, "B", "u1", event_id="once"), pv_event(NOON, "B", "u1", event_id="once")], now=NOON)
    flush(now=LATER)
    monkeypatch.setattr(reconcile_job, "FLUSH_LOCK_WAIT_SECONDS", 0.5)
    with job_lock("flush"), pytest.raises(LockBusy):
        reconcile(day=DAY, now=LATER)
    # The realtime numbers (the duplicate counted twice) are untouched: nothing was written.
    assert (daily("B", DAY).pv, daily("B", DAY).reconciled_at) == (2, None)
    assert not ReconcileDrift.objects.exists()


def test_reconcile_waits_for_a_running_flush_then_writes():
    create_tree()
    feed([pv_event(NOON, "B", "u1", event_id="once"), pv_event(NOON, "B", "u1", event_id="once")], now=NOON)
    flush(now=LATER)
    holding, released_at = threading.Event(), []

    def running_flush() -> None:
        with job_lock("flush"):
            holding.set()
            time.sleep(1.0)
            released_at.append(time.monotonic())

    flusher = threading.Thread(target=running_flush)
    flusher.start()
    holding.wait(5)
    reconcile(day=DAY, now=LATER)
    finished = time.monotonic()
    flusher.join()
    assert finished > released_at[0]  # it waited for the flush instead of writing beside it
    assert (daily("B", DAY).pv, daily("B", DAY).reconciled_at) == (1, LATER)


def test_users_are_told_apart_byte_for_byte_and_bots_do_not_split_them():
    create_tree()
    feed(
        [
            pv_event(NOON, "A1a", "o-ab"),
            pv_event(NOON, "A1a", "O-AB"),  # another user: openids are case-sensitive, as in Redis
            pv_event(NOON, "A2", "o-ab", ua="Baiduspider"),  # a bot borrowing a user's openid
            pv_event(NOON, "A2", "o-ab"),
            pv_event(NOON, "A1", "o-ab "),  # a trailing space is another openid too
            pv_event(NOON, "B", ""),  # no openid: a page view, no user
        ],
        now=NOON,
    )
    reconcile(day=DAY, now=LATER)
    assert (daily("A", DAY).pv, daily("A", DAY).uv) == (4, 3)
    assert (daily("A1", DAY).uv, daily("A1", DAY).uv_self, daily("A1a", DAY).uv) == (3, 1, 2)
    assert (daily("A2", DAY).pv, daily("A2", DAY).uv, daily("A2", DAY).bot_pv) == (1, 1, 1)
    assert (daily("B", DAY).pv, daily("B", DAY).uv) == (1, 0)


@pytest.mark.time_machine("2027-01-01T00:30:00+08:00", tick=False)
@pytest.mark.parametrize("day", ["2027-01-01", "2027-01-02"], ids=["today", "tomorrow"])
def test_the_reconcile_command_refuses_a_day_that_has_not_ended_with_one_line(day):
    create_tree()
    feed([pv_event(at("2027-01-01 00:10"), "A1a", "u1")], now=at("2027-01-01 00:10"))
    flush(include_open=True, now=at("2027-01-01 00:20"))
    with pytest.raises(CommandError) as refused:
        call_command("reconcile", "--date", day)
    assert str(refused.value) == (
        f"cannot reconcile {day}: the day has not ended yet (today is 2027-01-01 in Asia/Shanghai); "
        "reconcile it from 00:00 tomorrow"
    )
    # Today stays realtime: flush goes on writing it.
    assert (daily("A", dt.date(2027, 1, 1)).pv, daily("A", dt.date(2027, 1, 1)).reconciled_at) == (1, None)
    assert not ReconcileDrift.objects.exists()
