"""``manage.py consume`` (stats.pipeline.consumer) as a real process against the real broker, Redis and database.

The consumer is another process that reads the real clock: these tests cannot move it, so every timestamp they
produce is placed relative to the real now, and every day they read is the one those timestamps fall on. They
pass at any moment, the last seconds of a day included.
"""

import datetime as dt
import re
import signal
import subprocess
import sys
import time

import pytest
from django.db.models import Count
from django.utils import timezone

from cpsproject.common.timeutil import local_day
from stats.devtools.producer import send_to_kafka
from stats.devtools.simulate import simulate_events
from stats.jobs.flush import flush
from stats.keys import NO_PARTNER
from stats.models import DailyStat, DeadLetter
from stats.pipeline.ingest import stored_offsets
from tests.conftest import ROOT, subprocess_env
from tests.factories import archived_event_count, create_tree, hll_estimate_of, pv_event

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.real_clock]

# How long `consume` may take to exit after SIGTERM: finish the batch in hand (a poll waits at most 0.5 s),
# close the consumer, print its summary.
STOP_SECONDS = 10


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


def produce_day(*, events: int, users: int, seed: int = 5, bad_share: float = 0.01):
    """Produce ``events`` of today (business time) up to now; return the values, the truth and the day."""
    now = timezone.now()
    day = local_day(now)
    values, truth = simulate_events(
        events=events, day=day, users=users, until=now, seed=seed, bad_share=bad_share
    )
    send_to_kafka(values)
    return values, truth, day


def realtime_by_code(day: dt.date) -> dict[str, DailyStat]:
    return {
        (row.partner.code if row.partner else NO_PARTNER): row for row in DailyStat.objects.filter(date=day)
    }


def pv_by_code(days: set[dt.date]) -> dict[str, int]:
    """Flushed PV per partner code summed over ``days`` (events placed relative to now may span two)."""
    totals: dict[str, int] = {}
    for row in DailyStat.objects.filter(date__in=days).select_related("partner"):
        code = row.partner.code if row.partner else NO_PARTNER
        totals[code] = totals.get(code, 0) + row.pv
    return totals


def reported_count(output: str) -> int:
    """The count in the summary line `consume` prints when it exits."""
    (counted,) = re.findall(r"counted (\d+) events", output)
    return int(counted)


def counted_in_redis(settings) -> int:
    """Messages whose counts are in Redis: the next offsets stored with them (a fresh topic starts at 0)."""
    return sum(stored_offsets(group=settings.KAFKA_GROUP_ID, source=settings.KAFKA_TOPIC).values())


def test_consume_drains_topic_and_counts_every_partner_exactly(kafka_settings):
    create_tree()
    values, truth, day = produce_day(events=40_000, users=5000)
    run = consume(kafka_settings, "--batch-size", "2000")
    assert run.returncode == 0, run.stderr[-2000:]
    assert reported_count(run.stdout) == len(values) - truth.bad
    flush(include_open=True)
    rows = realtime_by_code(day)
    for code in truth.pv:
        assert (rows[code].pv, rows[code].pv_self) == (truth.pv[code], truth.pv_self[code]), code
        assert rows[code].uv == hll_estimate_of(truth.users[code]), code
    assert len(truth.users["A"]) > 4900  # the root sees (nearly) the whole 5,000-user pool
    reasons = dict(DeadLetter.objects.values_list("reason").annotate(n=Count("id")))
    assert sum(reasons.values()) == truth.bad, str(sorted(reasons.items()))
    assert archived_event_count() == len(values) - truth.bad


@pytest.mark.parametrize("fault", ["after_archive:2", "after_redis:4", "after_commit:3"])
def test_consumer_killed_mid_stream_counts_every_event_once_after_restart(kafka_settings, fault):
    create_tree()
    values, truth, day = produce_day(events=6000, users=300, seed=9)
    crashed = consume(kafka_settings, "--batch-size", "250", fault=fault)
    assert crashed.returncode == -signal.SIGKILL
    restarted = consume(kafka_settings, "--batch-size", "250")
    assert restarted.returncode == 0, restarted.stderr[-2000:]
    flush(include_open=True)
    rows = realtime_by_code(day)
    assert {code: rows[code].pv for code in truth.pv} == dict(truth.pv)
    assert archived_event_count() == len(values) - truth.bad
    assert DeadLetter.objects.count() == truth.bad


def start_consume(settings, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "consume", *args],
        cwd=ROOT,
        env=subprocess_env(settings),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until(condition, *, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.05)


def stop_with_sigterm(process: subprocess.Popen) -> tuple[str, float]:
    """SIGTERM the process; return its stdout and how many seconds it took to exit 0."""
    process.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    try:
        out, err = process.communicate(timeout=STOP_SECONDS + 20)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    took = time.monotonic() - signalled
    assert process.returncode == 0, err[-2000:]
    assert took < STOP_SECONDS, f"consume took {took:.1f} s to stop after SIGTERM"
    return out, took


def test_sigterm_once_the_topic_is_drained_exits_zero_reporting_every_event_produced(kafka_settings):
    create_tree()
    values, truth, day = produce_day(events=500, users=50, bad_share=0)
    process = start_consume(kafka_settings, "--batch-size", "100")
    wait_until(lambda: counted_in_redis(kafka_settings) == len(values), seconds=90, what="500 events")
    out, _ = stop_with_sigterm(process)
    assert reported_count(out) == len(values) == 500
    assert archived_event_count() == 500
    flush(include_open=True)
    rows = realtime_by_code(day)
    assert {code: rows[code].pv for code in truth.pv} == dict(truth.pv)


def test_sigterm_mid_stream_finishes_the_batch_and_a_restart_counts_the_rest(kafka_settings):
    """What the stopped consumer reports is what it stored with its offsets; nothing is lost or counted twice."""
    create_tree()
    values, truth, day = produce_day(events=20_000, users=500, seed=3, bad_share=0)
    process = start_consume(kafka_settings, "--batch-size", "100")
    wait_until(lambda: counted_in_redis(kafka_settings) > 0, seconds=90, what="a first batch")
    out, _ = stop_with_sigterm(process)
    first = reported_count(out)
    assert 0 < first == counted_in_redis(kafka_settings)
    rest = consume(kafka_settings, "--batch-size", "1000")
    assert rest.returncode == 0, rest.stderr[-2000:]
    assert first + reported_count(rest.stdout) == len(values) == counted_in_redis(kafka_settings)
    assert archived_event_count() == len(values)
    flush(include_open=True)
    rows = realtime_by_code(day)
    assert {code: rows[code].pv for code in truth.pv} == dict(truth.pv)


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
    # The good events reach 10 minutes back from now: near midnight they fall on two business days.
    rows = pv_by_code({local_day(now - dt.timedelta(seconds=600)), local_day(now)})
    # Each of the five targets got 600 good events; A sees A1a, A1 and A2.
    assert {code: rows[code] for code in ["A", "A1", "A1a", "A2", "B", NO_PARTNER]} == {
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
    assert reported_count(run.stdout) == 3000
    assert DeadLetter.objects.count() == len(good) + len(hostile) - 3000
