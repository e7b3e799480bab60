"""Job locks on real Redis: kept while the job runs, fenced before each write, busy → skip or CommandError."""

import datetime as dt
import logging
import os
import subprocess
import sys
import threading
import time

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError
from redis.cluster import RedisCluster

from cpsproject.common import faults, redis_keys
from cpsproject.common.locks import LockBusy, LockLost, job_lock
from loginlog import keys as login_keys
from loginlog.models import LoginMonth
from loginlog.services import login_record, sync_logins
from loginlog.tasks import sync_logins_task
from stats import keys as stats_keys
from stats.jobs.flush import flush
from stats.jobs.reconcile import reconcile
from stats.jobs.tasks import flush_task, reconcile_yesterday_task
from stats.models import BucketStat, DailyStat, ReconcileDrift
from tests.conftest import ROOT
from tests.factories import at, create_tree, feed, pv_event

DAY = dt.date(2026, 11, 21)
NOON = at("2026-11-21 12:00")
LATER = at("2026-11-21 13:00")
THIEF_TOKEN = b"another-run"


@pytest.fixture
def thief(settings):
    """A second Redis connection, as another process holding the same lock would have."""
    client = (RedisCluster if settings.REDIS_CLUSTER else redis.Redis).from_url(settings.REDIS_URL)
    yield client
    client.close()


def steal(thief: redis.Redis, name: str) -> None:
    """Overwrite the lock's token, as a second run would after the first one's key expired."""
    thief.set(redis_keys.lock(name), THIEF_TOKEN, px=60_000)


def feed_noon() -> None:
    create_tree()
    feed([pv_event(NOON, code, f"u{n}") for n, code in enumerate(["A1a", "A2", "B", None] * 5)], now=NOON)


# --- keeping the lock -------------------------------------------------------------------------------------


def test_job_running_three_times_its_ttl_keeps_its_lock(settings, redis_client):
    settings.CPS_LOCK_SECONDS = 1
    key = redis_keys.lock("demo")
    with job_lock("demo") as job:
        started = time.monotonic()
        while time.monotonic() - started < 3:
            time.sleep(0.25)
            with pytest.raises(LockBusy, match="another demo is running"), job_lock("demo"):
                pass
        job.ensure_held()
    assert redis_client.exists(key) == 0


@pytest.mark.django_db
def test_reconcile_slower_than_its_ttl_writes_and_refuses_a_second_reconcile(settings, monkeypatch):
    settings.CPS_LOCK_SECONDS = 1
    feed_noon()
    from stats.jobs import reconcile as reconcile_module

    archive = reconcile_module.get_archive()
    runs, refused = [], []

    class SlowArchive:
        def count_day(self, day: dt.date):
            runs.append(day)
            if len(runs) > 1:
                return archive.count_day(day)  # a second run got the lock: let it finish quickly
            started = time.monotonic()
            while time.monotonic() - started < 3:  # three TTLs of counting, as a day of a million events
                time.sleep(0.5)
                try:
                    reconcile(day=day, now=LATER)
                except LockBusy:
                    refused.append(day)
            return archive.count_day(day)

    monkeypatch.setattr(reconcile_module, "get_archive", SlowArchive)
    result = reconcile(day=DAY, now=LATER)
    assert len(runs) == 1 and len(refused) >= 5
    assert result.partner_days == 6  # A, A1, A1a, A2, B and the no-partner row
    assert DailyStat.objects.get(partner__code="A", date=DAY).pv == 10


# --- stopping before a write once the lock is lost ----------------------------------------------------------


def test_job_whose_lock_was_taken_stops_before_writing_and_leaves_the_new_holder_alone(thief):
    written = []
    with pytest.raises(LockLost, match="demo lost its lock"), job_lock("demo") as job:
        steal(thief, "demo")
        job.ensure_held()
        written.append("row")
    assert written == []
    assert thief.get(redis_keys.lock("demo")) == THIEF_TOKEN


def test_job_whose_lock_expired_unseen_stops_before_writing(settings, thief):
    settings.CPS_LOCK_SECONDS = 1
    with pytest.raises(LockLost), job_lock("demo") as job:
        thief.delete(redis_keys.lock("demo"))  # as if the key had expired while the process was frozen
        time.sleep(0.5)  # the heartbeat finds out on its own
        job.ensure_held()
    assert thief.exists(redis_keys.lock("demo")) == 0


@pytest.mark.django_db
def test_flush_whose_lock_is_taken_before_its_transaction_writes_nothing(monkeypatch, redis_client, thief):
    feed_noon()
    from stats.jobs import flush as flush_module

    read_hlls = flush_module._merge_hlls

    def read_then_lose_the_lock(*args, **kwargs):
        steal(thief, "flush")
        return read_hlls(*args, **kwargs)

    monkeypatch.setattr(flush_module, "_merge_hlls", read_then_lose_the_lock)
    indexed = redis_client.zcard(stats_keys.pv_index(0))
    with pytest.raises(LockLost):
        flush(now=LATER)
    assert (BucketStat.objects.count(), DailyStat.objects.count()) == (0, 0)
    assert redis_client.zcard(stats_keys.pv_index(0)) == indexed > 0
    assert thief.get(redis_keys.lock("flush")) == THIEF_TOKEN


@pytest.mark.django_db
def test_flush_whose_lock_is_taken_inside_its_transaction_rolls_it_back(monkeypatch, redis_client, thief):
    feed_noon()
    from stats.jobs import flush as flush_module

    daily_rows = flush_module._daily_rows

    def lose_the_lock_mid_transaction(*args, **kwargs):
        steal(thief, "flush")
        return daily_rows(*args, **kwargs)

    monkeypatch.setattr(flush_module, "_daily_rows", lose_the_lock_mid_transaction)
    with pytest.raises(LockLost):
        flush(now=LATER)
    assert (BucketStat.objects.count(), DailyStat.objects.count()) == (0, 0)
    assert redis_client.zcard(stats_keys.pv_index(0)) > 0


@pytest.mark.django_db
def test_flush_whose_lock_is_taken_after_its_commit_deletes_no_key(monkeypatch, redis_client, thief):
    feed_noon()
    reach = faults.reach

    def lose_the_lock_after_commit(point: str) -> None:
        if point == "flush_after_commit":
            steal(thief, "flush")
        reach(point)

    monkeypatch.setattr(faults, "reach", lose_the_lock_after_commit)
    indexed = redis_client.zcard(stats_keys.pv_index(0))
    with pytest.raises(LockLost):
        flush(now=LATER)
    assert DailyStat.objects.get(partner__code="A", date=DAY).pv == 10  # step 2 committed
    assert redis_client.zcard(stats_keys.pv_index(0)) == indexed > 0  # step 3 did not run


@pytest.mark.django_db
def test_reconcile_whose_lock_is_taken_writes_nothing(monkeypatch, thief):
    feed_noon()
    flush(now=LATER)
    from stats.jobs import reconcile as reconcile_module

    archive = reconcile_module.get_archive()

    class ArchiveThatLosesTheLock:
        def count_day(self, day: dt.date):
            steal(thief, "reconcile")
            return archive.count_day(day)

    monkeypatch.setattr(reconcile_module, "get_archive", ArchiveThatLosesTheLock)
    with pytest.raises(LockLost):
        reconcile(day=DAY, now=LATER)
    assert not DailyStat.objects.filter(reconciled_at__isnull=False).exists()
    assert ReconcileDrift.objects.count() == 0


@pytest.mark.django_db
def test_sync_logins_whose_lock_is_taken_writes_nothing(monkeypatch, redis_client, thief):
    login_record(user_type="client", user_id=1001, day=dt.date(2026, 11, 20))
    from loginlog import services

    months_to_sync = services.months_to_sync

    def months_then_lose_the_lock(today: dt.date) -> list[dt.date]:
        steal(thief, "sync_logins")
        return months_to_sync(today)

    monkeypatch.setattr(services, "months_to_sync", months_then_lose_the_lock)
    with pytest.raises(LockLost):
        sync_logins(now=at("2026-11-22 03:00"))
    assert LoginMonth.objects.count() == 0
    assert redis_client.exists(login_keys.login_month("client", 1001, "202611")) == 1


# --- busy → skip for tasks, busy or lost → CommandError for commands ----------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("task", "name"),
    [(flush_task, "flush"), (reconcile_yesterday_task, "reconcile"), (sync_logins_task, "sync_logins")],
)
def test_task_returns_a_skip_summary_when_its_lock_is_busy(caplog, task, name):
    caplog.set_level(logging.WARNING, logger="cpsproject.common.locks")
    with job_lock(name):
        summary = task()
    assert summary == f"skipped: another {name} is running"
    assert summary in caplog.text


@pytest.mark.django_db
def test_reconcile_task_waits_out_a_running_flush_and_reconciles():
    feed_noon()
    holding = threading.Event()

    def running_flush() -> None:
        with job_lock("flush"):
            holding.set()
            time.sleep(1.0)

    flusher = threading.Thread(target=running_flush)
    flusher.start()
    holding.wait(5)
    summary = reconcile_yesterday_task()  # the flush lock is another job's: waited for, not a skip
    flusher.join()
    assert summary.startswith("reconciled ")


@pytest.mark.django_db
@pytest.mark.parametrize("command", ["flush", "reconcile", "sync_logins"])
def test_command_fails_with_one_readable_line_when_its_lock_is_busy(command):
    with job_lock(command), pytest.raises(CommandError) as failure:
        call_command(command)
    message = str(failure.value)
    assert message == f"another {command} is running (lock {redis_keys.lock(command)} is held)"


@pytest.mark.django_db
def test_flush_command_turns_a_lost_lock_into_one_readable_line(monkeypatch, thief):
    feed_noon()
    from stats.jobs import flush as flush_module

    read_hlls = flush_module._merge_hlls

    def read_then_lose_the_lock(*args, **kwargs):
        steal(thief, "flush")
        return read_hlls(*args, **kwargs)

    monkeypatch.setattr(flush_module, "_merge_hlls", read_then_lose_the_lock)
    with pytest.raises(CommandError) as failure:
        call_command("flush")
    assert str(failure.value) == (
        f"flush lost its lock {redis_keys.lock('flush')} while running and stopped before its next write; "
        "run it again"
    )


def test_manage_py_flush_exits_non_zero_with_one_line_when_busy(settings):
    with job_lock("flush"):
        done = subprocess.run(
            [sys.executable, "manage.py", "flush"],
            cwd=ROOT,
            env={**os.environ, "CPS_REDIS_PREFIX": settings.CPS_REDIS_PREFIX},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert (
        done.stderr.strip()
        == f"CommandError: another flush is running (lock {redis_keys.lock('flush')} is held)"
    )
