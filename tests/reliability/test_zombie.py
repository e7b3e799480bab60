"""A consumer frozen between its poll and its Redis apply, long enough to lose its partitions, must not count
its stale batch when it wakes up (a "zombie"): another consumer has counted those messages meanwhile.

``process_batch`` builds each partition's MULTI/EXEC on a pipeline that WATCHes the partition's fence key and
checks that the offset stored in Redis is not past the batch's first offset; a woken zombie finds it moved on
and drops its share of the batch (stats/pipeline/ingest.py, ``_apply_partition``).
"""

import logging
import signal
import time

import pytest

from tests.conftest import KAFKA_SESSION_TIMEOUT_MS
from tests.factories import create_tree
from tests.reliability.flow import assert_counted_exactly, counted_in_redis, produce, todays_traffic
from tests.reliability.procs import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.real_clock]
log = logging.getLogger("reliability")


def test_a_consumer_frozen_past_its_session_does_not_count_its_stale_batch(kafka_settings, children):
    create_tree()
    values, truth, day = todays_traffic(events=3000, users=500, seed=91, bad_share=0)
    produce(kafka_settings.KAFKA_BOOTSTRAP_SERVERS, kafka_settings.KAFKA_TOPIC, values)
    session = KAFKA_SESSION_TIMEOUT_MS / 1000
    # A holds each polled batch 3 s before processing it: the moment to freeze it.
    a = children.start("consume", "--batch-size", "500", "--exit-when-idle", "5", CPS_FAULT_SLEEP="polled:3")
    wait_until(lambda: "partitions assigned: [0" in a.stderr(), seconds=120, what="A to join")
    time.sleep(1)
    a.process.send_signal(signal.SIGSTOP)
    try:
        b = children.start("consume", "--batch-size", "500", "--exit-when-idle", "5")
        assert b.wait(120) == 0, b.stderr()[-3000:]
        assert counted_in_redis(kafka_settings) == len(values)
        log.info(
            "zombie: A frozen with a polled batch; B took over after %.0f s and drained the topic", session
        )
    finally:
        a.process.send_signal(signal.SIGCONT)
    assert a.wait(120) == 0, a.stderr()[-3000:]
    assert_counted_exactly(truth, day=day, produced=len(values))
