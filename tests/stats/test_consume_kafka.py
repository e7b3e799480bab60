"""``manage.py consume`` as a real process against the real broker, Redis and database, crashes included."""

import datetime as dt
import signal
import subprocess
import sys
import time

import pytest
from django.db.models import Count
from django.utils import timezone

from cpsproject.common import redis_keys
from cpsproject.common.timeutil import local_day
from stats.devtools.producer import send_to_kafka
from stats.devtools.simulate import simulate_events
from stats.jobs.flush import flush
from stats.keys import NO_PARTNER
from stats.models import DailyStat, DeadLetter
from tests.conftest import ROOT, subprocess_env
from tests.factories import archived_event_count, create_tree, feed, pv_event

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]


def consume(settings, *args: str, fault: str | None = None) -> subprocess.CompletedProcess:
    env = subprocess_env(settings, **({"CPS_FAULT_KILL": fault} if fault else {}))
    return subprocess.run(
        [sys.executable, "manage.py", "consume", "--exit-when-idle", "2", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def produce_day(*, events: int, users: int, seed: int = 5):
    values, truth = simulate_events(
        events=events,
        day=local_day(timezone.now()),
        users=users,
        until=timezone.now(),
        seed=seed,
        bad_share=0.01,
    )
    send_to_kafka(values)
    return values, truth


def realtime_by_code() -> dict[str, DailyStat]:
    today = local_day(timezone.now())
    return {
        (row.partner.code if row.partner else NO_PARTNER): row for row in DailyStat.objects.filter(date=today)
    }


def test_consume_drains_topic_and_counts_every_partner_exactly(kafka_settings):
    create_tree()
    values, truth = produce_day(events=40_000, users=5000)
    run = consume(kafka_settings, "--batch-size", "2000")
    assert run.returncode == 0, run.stderr[-2000:]
    flush(include_open=True)
    rows = realtime_by_code()
    for code in truth.pv:
        assert (rows[code].pv, rows[code].pv_self) == (truth.pv[code], truth.pv_self[code]), code
        true_uv = len(truth.users[code])
        assert abs(rows[code].uv - true_uv) <= max(2, 0.02 * true_uv), (code, rows[code].uv, true_uv)
    assert len(truth.users["A"]) > 4900  # the root sees (nearly) the whole 5,000-user pool
    reasons = dict(DeadLetter.objects.values_list("reason").annotate(n=Count("id")))
    assert sum(reasons.values()) == truth.bad, str(sorted(reasons.items()))
    assert archived_event_count() == len(values) - truth.bad


@pytest.mark.parametrize("fault", ["after_archive:2", "after_redis:4", "after_commit:3"])
def test_consumer_killed_mid_stream_counts_every_event_once_after_restart(kafka_settings, fault):
    create_tree()
    values, truth = produce_day(events=6000, users=300, seed=9)
    crashed = consume(kafka_settings, "--batch-size", "250", fault=fault)
    assert crashed.returncode == -signal.SIGKILL
    restarted = consume(kafka_settings, "--batch-size", "250")
    assert restarted.returncode == 0, restarted.stderr[-2000:]
    flush(include_open=True)
    rows = realtime_by_code()
    assert {code: rows[code].pv for code in truth.pv} == dict(truth.pv)
    assert archived_event_count() == len(values) - truth.bad
    assert DeadLetter.objects.count() == truth.bad


def test_sigterm_finishes_the_batch_and_exits_zero(kafka_settings):
    create_tree()
    produce_day(events=500, users=50)
    process = subprocess.Popen(
        [sys.executable, "manage.py", "consume"],
        cwd=ROOT,
        env=subprocess_env(kafka_settings),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while archived_event_count() == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err[-2000:]
    assert "counted" in out


@pytest.mark.parametrize("include_open", [False, True])
def test_flush_killed_between_commit_and_delete_leaves_the_same_tables(kafka_settings, include_open):
    """A real `flush` process is SIGKILLed after its SQL commit, before deleting keys; a re-run repairs it."""
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
    assert crashed.returncode == -signal.SIGKILL
    assert indexed_bucket_count() > 0  # nothing was deleted
    wait_for_lock_to_expire()  # the killed flush's lock frees itself after CPS_LOCK_SECONDS
    flush(include_open=include_open)
    after_crash = stat_tables()
    flush(include_open=include_open)
    assert stat_tables() == after_crash
    rows = realtime_by_code()
    assert (rows["A"].pv, rows["A1a"].pv, rows["B"].pv, rows[NO_PARTNER].pv) == (
        100 + (30 if include_open else 0),
        50,
        50,
        50,
    )


def wait_for_lock_to_expire() -> None:
    from django_redis import get_redis_connection

    deadline = time.monotonic() + 10
    while get_redis_connection("default").exists(redis_keys.lock("flush")) and time.monotonic() < deadline:
        time.sleep(0.1)


def indexed_bucket_count() -> int:
    from django_redis import get_redis_connection

    from stats import keys

    return get_redis_connection("default").zcard(keys.pv_index())


def stat_tables() -> tuple[list, list]:
    from stats.models import BucketStat

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


def test_hostile_messages_through_the_broker_are_dead_lettered_and_known_traffic_counts_exactly(
    kafka_settings,
):
    """1,100 hostile messages of 44 kinds among 3,000 good ones: consume drains the topic and exits 0."""
    from kafka import KafkaProducer

    from tests.hostile import hostile_kinds

    create_tree()
    now = timezone.now()
    kinds = hostile_kinds(now, partner="A1")
    good_partners = ["A1a", "A1", "A2", "B", None]
    good = [
        pv_event(now - dt.timedelta(seconds=n % 600), good_partners[n % 5], f"u{n % 97}") for n in range(3000)
    ]
    hostile = [value for _ in range(25) for value, _ in kinds.values()]
    producer = KafkaProducer(bootstrap_servers=kafka_settings.KAFKA_BOOTSTRAP_SERVERS, linger_ms=20)
    for n in range(max(len(good), len(hostile))):
        for values in (good, hostile):
            if n < len(values):
                # A key on every message, so that a tombstone (no value) can be sent at all.
                producer.send(kafka_settings.KAFKA_TOPIC, key=str(n % 7).encode(), value=values[n])
    producer.flush()
    producer.close()

    run = consume(kafka_settings, "--batch-size", "500")
    assert run.returncode == 0, run.stderr[-3000:]
    flush(include_open=True)
    rows = realtime_by_code()
    # Each of the five targets got 600 good events; A sees A1a, A1 and A2.
    assert {code: rows[code].pv for code in ["A", "A1", "A1a", "A2", "B", NO_PARTNER]} == {
        "A": 1800,
        "A1": 1200,
        "A1a": 600,
        "A2": 600,
        "B": 600,
        NO_PARTNER: 600,
    }
    expected: dict[str, int] = {}
    for _, reason in kinds.values():
        expected[reason] = expected.get(reason, 0) + 25
    assert len(hostile) == 1100 and len(kinds) >= 30
    assert dict(DeadLetter.objects.values_list("reason").annotate(n=Count("id"))) == expected
    # Every message either counted or dead-lettered: 4,100 read, 3,000 counted, 1,100 dead letters.
    assert "counted 3000 events" in run.stdout
    assert DeadLetter.objects.count() == len(good) + len(hostile) - 3000
