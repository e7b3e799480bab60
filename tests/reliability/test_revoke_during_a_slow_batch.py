"""A rebalance while a consumer counts a batch slower than its session timeout.

Before partitions go, a consumer lets the batch in hand finish, so the next owner starts after it. kafka-python
runs that wait on its network loop, heartbeats included: waiting out a batch longer than the session timeout
would cost the member its session in the middle of the rebalance. The wait is bounded by half the session
timeout; a batch that finishes later is harmless (the next owner's batch or this one is refused as stale).
"""

import logging
import re

import pytest

from tests.conftest import KAFKA_SESSION_TIMEOUT_MS
from tests.factories import create_tree
from tests.reliability.flow import assert_counted_exactly, counted_in_redis, produce, todays_traffic
from tests.reliability.procs import patience, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.real_clock]
log = logging.getLogger("reliability")

SESSION_SECONDS = KAFKA_SESSION_TIMEOUT_MS / 1000
SLOW = SESSION_SECONDS + 4  # each of A's first batches sleeps past the session timeout
# Whether A keeps partitions after the rebalance is the group's choice: A may lose its membership while asleep, or
# keep it and be given two of the three partitions. Only A's first batches are slow, so B's wait for A's share
# stays bounded either way (a slow A holding 1,000 events would take 100 s).
SLOW_BATCHES = 5
LISTENER_TOOK = re.compile(r"on_partitions_revoked for group \S+ took ([\d.]+)s")
HOLDS_PARTITIONS = re.compile(r"partitions assigned: \[\d")


def test_a_member_counting_a_batch_longer_than_its_session_keeps_it_through_a_rebalance(
    kafka_settings, children
):
    create_tree()
    values, truth, day = todays_traffic(events=1500, users=300, seed=33, bad_share=0)
    produce(kafka_settings.KAFKA_BOOTSTRAP_SERVERS, kafka_settings.KAFKA_TOPIC, values)
    slow = f"after_archive:{SLOW}:{SLOW_BATCHES}"
    a = children.start("consume", "--batch-size", "100", "--exit-when-idle", "5", CPS_FAULT_SLEEP=slow)
    # B starts as soon as A holds the partitions, not once A has counted: on a slow machine under the suite's load
    # a consume took 20 s to start and 9 more to join, and B then came after A's slow batches (2026-11-27).
    wait_until(
        lambda: HOLDS_PARTITIONS.search(a.stderr()) is not None,
        seconds=patience(0, batch=100),
        what="A to hold the partitions",
    )
    b = children.start("consume", "--batch-size", "100", "--exit-when-idle", "5")
    a_still_slow = SLOW_BATCHES * SLOW
    b_patience = patience(len(values), batch=100, more=a_still_slow + 2 * SESSION_SECONDS)
    assert b.wait(b_patience) == 0, b.stderr()[-3000:]
    assert a.wait(patience(100, batch=100, sleep=SLOW, more=2 * SESSION_SECONDS)) == 0, a.stderr()[-3000:]
    # kafka-python times each listener call and logs those past a second.
    waits = [float(s) for s in LISTENER_TOOK.findall(a.stderr())]
    log.info("slow batch: A's revoke listener took %s s (session timeout %.0f s)", waits, SESSION_SECONDS)
    assert "revoked while a batch is still being counted: waited 3.0 s" in a.stderr()
    assert all(wait < SESSION_SECONDS for wait in waits), a.stderr()[-3000:]
    assert counted_in_redis(kafka_settings) == len(values)
    assert_counted_exactly(truth, day=day, produced=len(values))
