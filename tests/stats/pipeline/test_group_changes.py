"""``consume`` through group changes: members killed mid-stream or mid-join, and a member that never leaves.

``--exit-when-idle`` must exit only once every partition of the topic is counted to its end offset, whoever
holds it, and no wait may be unbounded or unlogged. Real processes, the real broker, Redis and database.
"""

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django_redis import get_redis_connection
from kafka import KafkaConsumer, TopicPartition

from stats.jobs.flush import flush
from stats.pipeline.ingest import stored_offsets
from stats.pipeline.offsets import store_if_absent
from stats.read import pipeline_status
from tests.conftest import KAFKA_SESSION_TIMEOUT_MS, ROOT, subprocess_env
from tests.factories import create_tree
from tests.stats.pipeline.test_consumer import (
    STOP_SECONDS,
    counted_in_redis,
    produce_day,
    realtime_by_code,
    reported_count,
    wait_until,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.real_clock]


def start(settings, tmp_path: Path, name: str, *args: str, **env: str) -> tuple[subprocess.Popen, Path]:
    """Start ``consume`` with its output in files (a pipe nobody reads could block it); return it and its log."""
    log = tmp_path / f"{name}.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "consume", "--batch-size", "100", *args],
            cwd=ROOT,
            env=subprocess_env(settings, **env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return process, log


def summary(out: str) -> str:
    """The line ``consume`` prints last: what it counted, and whether it found the topic drained."""
    return out.splitlines()[-1]


def finished(process: subprocess.Popen, log: Path, *, seconds: float) -> str:
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"consume still running after {seconds} s: ...{log.read_text()[-3000:]}")
    return log.read_text()


def test_exit_when_idle_after_members_die_mid_stream_and_mid_join_counts_every_event(
    kafka_settings, tmp_path
):
    """The issue's sequence, small: drain; a member killed mid-stream; one killed before its assignment; then
    ``--exit-when-idle`` waits for the dead members' partitions and counts every event."""
    create_tree()
    first, truth1, day = produce_day(events=2400, users=200, seed=1, bad_share=0)
    process, log = start(kafka_settings, tmp_path, "drain", "--exit-when-idle", "2")
    assert "drained" in summary(finished(process, log, seconds=90))
    assert counted_in_redis(kafka_settings) == 2400

    second, truth2, _ = produce_day(events=1500, users=200, seed=2, bad_share=0)
    # Slowed, so that it is still counting when it dies.
    killed, log = start(kafka_settings, tmp_path, "killed", CPS_FAULT_SLEEP="after_archive:0.3")
    wait_until(lambda: counted_in_redis(kafka_settings) > 2400, seconds=60, what="the second member to count")
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert 2400 < counted_in_redis(kafka_settings) < 3900

    third, truth3, _ = produce_day(events=1500, users=200, seed=3, bad_share=0)
    joining, log = start(kafka_settings, tmp_path, "killed-joining")
    # Killed once it has asked to join (tansu answers after half a session), before it is assigned anything:
    # the group keeps it as a member until its session expires.
    wait_until(lambda: "partitions revoked" in log.read_text(), seconds=30, what="the third member's join")
    time.sleep(0.5)
    joining.send_signal(signal.SIGKILL)
    joining.wait()

    before = counted_in_redis(kafka_settings)
    last, log = start(kafka_settings, tmp_path, "last", "--exit-when-idle", "2")
    out = finished(last, log, seconds=120)
    assert last.returncode == 0, out[-3000:]
    # It waited for the dead member's partitions (their session had to expire) instead of leaving them unread.
    assert re.search(r"topic \S+ is not drained: partition \d+ \d+/\d+", out), out[-3000:]
    assert "drained: every partition counted to its end offset" in summary(out)
    assert counted_in_redis(kafka_settings) == 5400
    assert reported_count(summary(out)) == 5400 - before
    flush(include_open=True)
    rows = realtime_by_code(day)
    for code in truth1.pv:
        assert rows[code].pv == truth1.pv[code] + truth2.pv[code] + truth3.pv[code], code


def test_a_join_that_cannot_complete_is_logged_bounded_and_stopped_by_sigterm(kafka_settings, tmp_path):
    """A member that holds the group and never polls again: the broker waits on it for every join."""
    create_tree()
    produce_day(events=300, users=30, seed=4, bad_share=0)
    process, log = start(kafka_settings, tmp_path, "drain", "--exit-when-idle", "2")
    assert "drained" in summary(finished(process, log, seconds=90))

    silent = KafkaConsumer(
        kafka_settings.KAFKA_TOPIC,
        bootstrap_servers=kafka_settings.KAFKA_BOOTSTRAP_SERVERS,
        group_id=kafka_settings.KAFKA_GROUP_ID,
        session_timeout_ms=KAFKA_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=1000,
        max_poll_interval_ms=300_000,
        enable_auto_commit=False,
    )
    try:
        # A bound, not a speed: with the suite's load at 18 on two cores the join took over 30 s.
        wait_until(
            lambda: silent.poll(timeout_ms=200) is not None and silent.assignment(), seconds=90, what="join"
        )
        # From here it only heartbeats (kafka-python's own thread): its session never expires.

        # The topic is drained: a consumer whose join cannot complete still finds that out and exits 0.
        drained, log = start(kafka_settings, tmp_path, "idle", "--exit-when-idle", "8")
        out = finished(drained, log, seconds=60)
        assert drained.returncode == 0, out[-3000:]
        assert "drained: every partition counted to its end offset" in summary(out)
        group = kafka_settings.KAFKA_GROUP_ID
        assert len(re.findall(rf"joining group {group} as member \S+ has taken \d+ s", out)) == 1, out[-3000:]

        # With events to count the silent member holds, it waits, says why, and SIGTERM stops it in seconds.
        produce_day(events=100, users=10, seed=5, bad_share=0)
        waiting, log = start(kafka_settings, tmp_path, "waiting", "--exit-when-idle", "2")
        wait_until(lambda: "is not drained" in log.read_text(), seconds=30, what="the waiting line")
        wait_until(lambda: "has taken" in log.read_text(), seconds=30, what="the join warning")
        # health and /metrics see a consumer that has held no partition since it started.
        (unassigned,) = pipeline_status.consumers_without_partitions().values()
        assert unassigned > KAFKA_SESSION_TIMEOUT_MS / 1000
        waiting.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        out = finished(waiting, log, seconds=STOP_SECONDS + 20)
        assert time.monotonic() - signalled < STOP_SECONDS
        assert waiting.returncode == 0, out[-3000:]
        assert reported_count(summary(out)) == 0
        assert "drained" not in summary(out)
        assert sum(stored_offsets(group=group, source=kafka_settings.KAFKA_TOPIC).values()) == 300
        assert pipeline_status.consumers_without_partitions() == {}  # it took its report with it
    finally:
        silent.close(timeout_ms=2000)


DEAD_MEMBER = """
import sys, time
from kafka import KafkaConsumer
member = KafkaConsumer(
    sys.argv[3], bootstrap_servers=sys.argv[1], group_id=sys.argv[2], session_timeout_ms=int(sys.argv[4]),
    heartbeat_interval_ms=1000, enable_auto_commit=False,
)
deadline = time.monotonic() + 60
while not member.assignment() and time.monotonic() < deadline:
    member.poll(timeout_ms=200)
print("assigned" if member.assignment() else "no assignment in 60 s", flush=True)
time.sleep(600)
"""


def test_a_consumer_still_joining_waits_for_records_past_the_broker_end_offsets(kafka_settings, tmp_path):
    """Counted up to where tansu's ListOffsets puts the ends, while a dead member holds every partition:
    ``--exit-when-idle`` waits out the join and counts the rest (it once exited with them uncounted)."""
    create_tree()
    values, _truth, _day = produce_day(events=600, users=50, seed=6, bad_share=0)
    topic, group = kafka_settings.KAFKA_TOPIC, kafka_settings.KAFKA_GROUP_ID
    listed = KafkaConsumer(bootstrap_servers=kafka_settings.KAFKA_BOOTSTRAP_SERVERS)
    try:
        short_ends = listed.end_offsets([TopicPartition(topic, p) for p in range(3)])
    finally:
        listed.close()
    assert sum(short_ends.values()) < len(values)  # the producer's batches hold many records
    redis = get_redis_connection("default")
    for tp, end in short_ends.items():
        store_if_absent(redis, group=group, source=topic, partition=tp.partition, offset=end)
    args = [kafka_settings.KAFKA_BOOTSTRAP_SERVERS, group, topic, str(KAFKA_SESSION_TIMEOUT_MS)]
    dead = subprocess.Popen([sys.executable, "-c", DEAD_MEMBER, *args], stdout=subprocess.PIPE, text=True)
    assert dead.stdout is not None and dead.stdout.readline().strip() == "assigned"
    dead.send_signal(signal.SIGKILL)
    dead.wait()

    last, log = start(kafka_settings, tmp_path, "last", "--exit-when-idle", "2")
    out = finished(last, log, seconds=120)
    assert last.returncode == 0, out[-3000:]
    assert re.search(r"topic \S+ is not drained: partition \d+ \d+/\d+", out), out[-3000:]
    assert reported_count(summary(out)) == len(values) - sum(short_ends.values())
    assert counted_in_redis(kafka_settings) == len(values)
