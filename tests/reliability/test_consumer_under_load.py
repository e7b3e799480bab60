"""``consume --exit-when-idle`` drains a topic and exits in bounded time on a loaded machine with slow batches.

The consumer's cores are loaded with CPU-burning processes (two per core), every batch sleeps past the group's
session timeout (``CPS_FAULT_SLEEP``), and once the consumer is frozen outright (SIGSTOP) for longer than the
session timeout, as a starved process is: its session expires while it holds partitions. It must still count
every event exactly once and exit 0 within a bound computed from the work it was given.
"""

import logging
import signal
import time

import pytest

from tests.conftest import KAFKA_SESSION_TIMEOUT_MS
from tests.factories import create_tree
from tests.reliability.flow import (
    assert_counted_exactly,
    counted_in_redis,
    produce,
    reported_count,
    todays_traffic,
)
from tests.reliability.procs import cpu_burners, loaded_cores, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.real_clock]
log = logging.getLogger("reliability")

IDLE_SECONDS = 10


def test_consume_on_a_loaded_machine_with_batches_slower_than_the_session_exits_in_bounded_time(
    kafka_settings, children, sizes
):
    create_tree()
    values, truth, day = todays_traffic(events=sizes.hang_events, users=1000, seed=21)
    produce(kafka_settings.KAFKA_BOOTSTRAP_SERVERS, kafka_settings.KAFKA_TOPIC, values)
    session = KAFKA_SESSION_TIMEOUT_MS / 1000
    slow, frozen = session + 2, session + 3
    batch = 2000
    batches = -(-len(values) // batch) + 3  # a partition boundary can split a poll
    # Startup and the first join, each batch (slow sleep + 10 s of parsing on a loaded machine), the freeze and
    # the rejoin after it, then the idle time: generous, yet far below the 600 s run this test stands for.
    bound = 60 + batches * (slow + 10) + frozen + 30 + IDLE_SECONDS
    cores = loaded_cores()
    burners = 2 * len(cores)
    with cpu_burners(burners, cpus=cores):
        began = time.monotonic()
        child = children.start(
            "consume",
            "--batch-size",
            str(batch),
            "--exit-when-idle",
            str(IDLE_SECONDS),
            cpus=cores,
            CPS_FAULT_SLEEP=f"after_archive:{slow}",
        )
        wait_until(
            lambda: counted_in_redis(kafka_settings) > 0 or not child.alive(),
            seconds=bound,
            what="a first batch",
        )
        child.process.send_signal(signal.SIGSTOP)
        time.sleep(frozen)
        child.process.send_signal(signal.SIGCONT)
        log.info(
            "under load: consumer frozen %.0f s (session timeout %.0f s) after its first batch",
            frozen,
            session,
        )
        code = child.wait(bound)
        took = time.monotonic() - began
    assert code == 0, child.stderr()[-3000:]
    log.info(
        "under load: %d burners, batches of %d sleeping %.0f s: drained %d events and exited 0 in %.0f s (bound %.0f s)",
        burners,
        batch,
        slow,
        len(values),
        took,
        bound,
    )
    assert took < bound
    assert reported_count(child.stdout()) == len(values) - truth.bad
    assert counted_in_redis(kafka_settings) == len(values)
    assert_counted_exactly(truth, day=day, produced=len(values))
