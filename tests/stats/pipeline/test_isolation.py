"""A poison pill is dead-lettered and the rest of its batch counted; an outage is waited out, losing nothing."""

import shutil
import subprocess
import threading
import time

import pytest
import redis
from django.db import connection

from stats.jobs.flush import flush
from stats.models import DailyStat, DeadLetter
from stats.pipeline.isolation import is_unavailable, isolate_failures
from tests.conftest import free_port
from tests.factories import archived_event_count, at, create_tree, feed, pv_event

pytestmark = pytest.mark.django_db

NOON = at("2026-11-21 12:00")
LATER = at("2026-11-21 13:00")


def batch_with_one_poison_pill() -> list[bytes]:
    good = [pv_event(NOON, "A1a" if n % 2 else "B", f"u{n}", event_id=f"good-{n}") for n in range(49)]
    return good[:20] + [pv_event(NOON, "A1a", "u-bad", event_id="poison")] + good[20:]


@pytest.mark.parametrize("stage", ["archive", "count"])
def test_an_event_a_stage_refuses_is_dead_lettered_and_the_rest_counted(monkeypatch, stage):
    create_tree()
    monkeypatch.setenv("CPS_FAULT_FAIL_EVENT", f"{stage}:poison")
    result = feed(batch_with_one_poison_pill(), now=NOON)
    assert (result.counted, dict(result.dead)) == (49, {"unstorable": 1})
    letter = DeadLetter.objects.get()
    assert letter.reason == "unstorable"
    assert f"fault injected at {stage} for event poison" in letter.detail
    assert b'"event_id": "poison"' in bytes(letter.raw)
    flush(now=LATER)
    # 24 good events went to A1a (odd n below 49), 25 to B; the poison pill counts nowhere, not even archived.
    assert DailyStat.objects.get(partner__code="A").pv == 24
    assert DailyStat.objects.get(partner__code="B").pv == 25
    assert archived_event_count() == 49


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stage", ["archive", "count"])
def test_with_the_archive_in_a_worker_thread_a_refused_event_is_still_archived_nowhere(monkeypatch, stage):
    create_tree()
    monkeypatch.setenv("CPS_FAULT_FAIL_EVENT", f"{stage}:poison")
    result = feed(batch_with_one_poison_pill(), now=NOON, archive_concurrently=True)
    assert (result.counted, dict(result.dead)) == (49, {"unstorable": 1})
    assert f"fault injected at {stage} for event poison" in DeadLetter.objects.get().detail
    flush(now=LATER)
    assert DailyStat.objects.get(partner__code="A").pv == 24
    assert DailyStat.objects.get(partner__code="B").pv == 25
    # The worker stored the poison pill before the counters refused it; the batch took it back.
    assert archived_event_count() == 49


def test_bisecting_finds_every_item_that_fails_alone_and_stores_the_rest():
    stored: list[int] = []

    def store(items):
        if any(item % 7 == 3 for item in items):
            raise ValueError("refused")
        stored.extend(items)

    failures = isolate_failures(list(range(40)), store)
    assert [item for item, _ in failures] == [3, 10, 17, 24, 31, 38]
    assert sorted(set(stored)) == [n for n in range(40) if n % 7 != 3]


def test_an_unreachable_redis_is_an_outage_and_a_bad_query_is_not():
    dead = redis.Redis(port=free_port(), socket_connect_timeout=0.5)
    with pytest.raises(redis.ConnectionError) as outage:
        dead.ping()
    assert is_unavailable(outage.value)
    with pytest.raises(Exception) as bad_query, connection.cursor() as cursor:
        cursor.execute("SELECT no_such_column FROM stats_deadletter")
    assert not is_unavailable(bad_query.value)


@pytest.fixture
def private_redis(settings, tmp_path):
    """A redis-server of this test's own, so the test can stop and start it."""
    port = free_port()
    binary = shutil.which("redis-server")
    assert binary, "redis-server is needed (scripts/test installs it)"

    def start() -> subprocess.Popen:
        process = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                redis.Redis(port=port).ping()
                return process
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("private redis-server did not start")

    shared = settings.CACHES
    # A single private server, whatever the suite runs on (its cluster client factory left out).
    options = {
        k: v for k, v in settings.CACHES["default"].get("OPTIONS", {}).items() if k != "CONNECTION_FACTORY"
    }
    settings.CACHES = {
        "default": {
            **settings.CACHES["default"],
            "LOCATION": f"redis://127.0.0.1:{port}/0",
            "OPTIONS": {**options, "SOCKET_CONNECT_TIMEOUT": 0.5},
        }
    }
    processes = [start()]
    timers: list[threading.Timer] = []

    def restart_in(seconds: float) -> None:
        processes[0].terminate()
        processes[0].wait(timeout=10)
        timers.append(threading.Timer(seconds, lambda: processes.append(start())))
        timers[-1].start()

    yield restart_in
    for timer in timers:
        timer.join()
    settings.CACHES = shared  # the per-test key cleanup runs after this, against the shared server
    for process in processes:
        process.terminate()
        process.wait(timeout=10)


def test_a_batch_waits_for_redis_to_come_back_and_counts_exactly_once(private_redis, caplog):
    create_tree()
    private_redis(2.0)  # stopped now, back in two seconds
    result = feed([pv_event(NOON, "B", f"u{n}") for n in range(30)], now=NOON)
    assert result.counted == 30
    assert "service unavailable" in caplog.text and "retrying in" in caplog.text
    flush(now=LATER)
    assert DailyStat.objects.get(partner__code="B").pv == 30
