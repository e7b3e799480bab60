"""Consumers join, leave (SIGTERM) and die (SIGKILL) mid-stream: counts stay exact, and every partition that
changes hands is resumed from the offset stored in Redis with its counters."""

import ast
import logging
import re
import signal

import pytest

from stats.pipeline.ingest import stored_offsets
from tests.conftest import KAFKA_SESSION_TIMEOUT_MS
from tests.factories import create_tree
from tests.reliability.flow import assert_counted_exactly, counted_in_redis, produce, todays_traffic
from tests.reliability.procs import Child, patience, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.real_clock]
log = logging.getLogger("reliability")

ASSIGNED = re.compile(
    r"^(\S+ \S+) INFO stats.pipeline.consumer: partitions assigned: \[([\d, ]*)\] \(stored offsets (\{[^}]*\})\)",
    re.MULTILINE,
)
# Batches slowed a little so that the stream outlasts three consumers coming and going.
SLEEP = 0.5
SLOW = {"CPS_FAULT_SLEEP": f"after_archive:{SLEEP}"}
BATCH = "200"
SESSION_SECONDS = KAFKA_SESSION_TIMEOUT_MS / 1000
# How long a join may wait on a member that stopped polling: the rebalance timeout a consumer asks for, and
# kafka-python's request timeout on top (``stats.pipeline.consumer.MAX_POLL_INTERVAL_MS``).
JOIN_SECONDS = 65
# A ends the test by exiting once idle. The broker hands a SIGKILLed member's partitions on only after its session
# times out and the group rejoins (tansu answers a join after half a session): if A's own partition drains
# first, a shorter idle limit lets A leave with C's partitions never taken, as a loaded CI machine once showed.
A_IDLE_SECONDS = str(2 * KAFKA_SESSION_TIMEOUT_MS / 1000)


def assignments(child: Child, *, since: int = 0) -> list[tuple[str, set[int], dict[int, int]]]:
    """Each assignment the child logged after character ``since``: when, partitions, stored offsets seen."""
    return [
        (when, {int(p) for p in parts.split(",") if p.strip()}, ast.literal_eval(stored))
        for when, parts, stored in ASSIGNED.findall(child.stderr()[since:])
    ]


def held(child: Child) -> set[int]:
    found = assignments(child)
    return found[-1][1] if found else set()


def taken(survivors: dict[Child, int], partition: int) -> bool:
    """Whether a survivor logged an assignment of ``partition`` after its mark."""
    return any(
        partition in parts
        for child, since in survivors.items()
        for _when, parts, _seen in assignments(child, since=since)
    )


def assert_resumed_from(survivors: dict[Child, int], *, partitions: set[int], stored: dict[int, int]) -> None:
    """The first survivor to take each partition (after its mark) seeks it to the offset stored in Redis."""
    for partition in partitions:
        takers = sorted(
            (when, seen.get(partition, 0), child.name)
            for child, since in survivors.items()
            for when, parts, seen in assignments(child, since=since)
            if partition in parts
        )
        assert takers, f"nobody took partition {partition}: " + " / ".join(
            f"{child.name}: ...{child.stderr()[since:][-1500:]}" for child, since in survivors.items()
        )
        when, seen, name = takers[0]
        assert seen == stored.get(partition, 0), (partition, name, when, seen, stored)
        log.info("rebalance: %s took partition %d at %s from stored offset %d", name, partition, when, seen)


def test_consumers_joining_leaving_and_dying_count_exactly_and_resume_from_stored_offsets(
    kafka_settings, children, sizes
):
    create_tree()
    group, topic = kafka_settings.KAFKA_GROUP_ID, kafka_settings.KAFKA_TOPIC
    values, truth, day = todays_traffic(events=sizes.rebalance_events, users=2000, seed=51)
    produce(kafka_settings.KAFKA_BOOTSTRAP_SERVERS, topic, values)
    log.info("rebalance: %d events produced on 3 partitions", len(values))

    per_partition = len(values) // 3
    a = children.start("consume", "--batch-size", BATCH, "--exit-when-idle", A_IDLE_SECONDS, **SLOW)
    wait_until(lambda: counted_in_redis(kafka_settings) > 0, seconds=120, what="consumer A to count")

    b = children.start("consume", "--batch-size", BATCH, **SLOW)
    wait_until(lambda: held(b) and "batch of" in b.stderr(), seconds=120, what="consumer B to join and count")
    b_parts = held(b)
    a_mark = len(a.stderr())
    assert b.terminate() == 0, b.stderr()[-2000:]
    left_at = stored_offsets(group=group, source=topic)
    log.info("rebalance: B joined, held %s, left on SIGTERM at stored offsets %s", sorted(b_parts), left_at)
    assert counted_in_redis(kafka_settings) < len(values), (
        "the stream ended before the rebalances: slow it down"
    )

    c = children.start("consume", "--batch-size", BATCH, **SLOW)

    def c_is_working() -> bool:
        parts = held(c)
        drained = all(stored_offsets(group=group, source=topic).get(p, 0) >= per_partition for p in parts)
        return bool(parts) and ("batch of" in c.stderr() or drained)

    wait_until(c_is_working, seconds=120, what="consumer C to join and count")
    c_parts = held(c)
    # C may count before A has logged its own share of the same rebalance (A's batches are slowed).
    wait_until(
        lambda: all(taken({a: a_mark, c: 0}, p) for p in b_parts),
        seconds=60,
        what=f"B's partitions {sorted(b_parts)} to be taken by A or C",
    )
    assert_resumed_from({a: a_mark, c: 0}, partitions=b_parts, stored=left_at)
    a_mark = len(a.stderr())
    c.process.send_signal(signal.SIGKILL)
    c.wait(10)
    # C's partitions stand still until the broker expels it: what is stored now is where they must resume.
    died_at = stored_offsets(group=group, source=topic)
    log.info("rebalance: C joined, held %s, SIGKILLed at stored offsets %s", sorted(c_parts), died_at)
    assert counted_in_redis(kafka_settings) < len(values), "the stream ended before C died: slow it down"

    # A counts the rest alone once the broker has expelled C (its session) and the group has rejoined.
    rest = len(values) - counted_in_redis(kafka_settings)
    assert (
        a.wait(
            patience(
                rest,
                batch=int(BATCH),
                sleep=SLEEP,
                more=2 * SESSION_SECONDS + JOIN_SECONDS + float(A_IDLE_SECONDS),
            )
        )
        == 0
    ), a.stderr()[-3000:]
    assert_resumed_from({a: a_mark}, partitions=c_parts, stored=died_at)
    assert counted_in_redis(kafka_settings) == len(values)
    log.info("rebalance: the partitions of B and C resumed from their stored offsets; A drained the topic")
    assert_counted_exactly(truth, day=day, produced=len(values))
