"""``consume`` SIGKILLed at random points while it ingests, restarted each time: nothing lost, nothing twice.

Half the kills come from outside at a random moment (anywhere in the loop: parsing, archiving, the Redis
transaction, the Kafka commit, a rebalance); the other half from a fault point picked at random
(``CPS_FAULT_KILL``), so that the narrow windows between archive, Redis and commit are hit every run.
"""

import logging
import random
import signal
import time

import pytest

from tests.factories import create_tree
from tests.reliability.flow import (
    assert_counted_exactly,
    counted_in_redis,
    produce,
    todays_traffic,
)
from tests.reliability.procs import patience, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.real_clock]
log = logging.getLogger("reliability")

FAULT_POINTS = ["polled", "after_archive", "after_redis", "after_commit"]


def test_consumer_killed_at_random_points_counts_every_event_once(kafka_settings, children, sizes):
    create_tree()
    rng = random.Random(11)
    values, truth, day = todays_traffic(events=sizes.crash_events, users=3000, seed=11)
    produce(kafka_settings.KAFKA_BOOTSTRAP_SERVERS, kafka_settings.KAFKA_TOPIC, values)
    log.info(
        "crashes: %d events produced (%d bad); %d kills planned", len(values), truth.bad, sizes.crash_kills
    )

    kills = 0
    for attempt in range(sizes.crash_kills):
        before = counted_in_redis(kafka_settings)
        if before >= len(values):
            break
        if attempt % 2:
            point = rng.choice(FAULT_POINTS)
            fault = f"{point}:{rng.randint(1, 6)}"
            child = children.start(
                "consume", "--batch-size", "300", "--exit-when-idle", "3", CPS_FAULT_KILL=fault
            )
            # Killed a few batches in, or, if the point is not reached that often, after counting the rest.
            code = child.wait(patience(len(values) - before, batch=300, more=3))
            how = f"fault point {fault}"
            if code != -signal.SIGKILL:
                # The topic ran dry before the point was reached n times: no kill this round.
                log.info("crashes: %s not reached before the topic ran dry (exit %s)", fault, code)
                continue
        else:
            child = children.start("consume", "--batch-size", "300")
            # A random moment one to four batches in. A random time after the first batch let a fast consumer
            # count 10,500 of the 12,000 messages before the first kill, and the topic ran dry before the
            # third.
            target = min(before + 300 * rng.randint(1, 4), len(values))
            wait_until(
                lambda target=target, child=child: (
                    counted_in_redis(kafka_settings) >= target or not child.alive()
                ),
                seconds=patience(target - before, batch=300),
                what="the consumer to count a few batches",
                every=0.005,
            )
            time.sleep(rng.uniform(0, 0.02))  # anywhere inside the batch that follows
            if not child.alive():
                continue
            child.process.send_signal(signal.SIGKILL)
            child.wait(10)
            how = "SIGKILL from outside at a random moment"
        kills += 1
        log.info(
            "crashes: kill %d (%s) after %d of %d messages were counted",
            kills,
            how,
            counted_in_redis(kafka_settings),
            len(values),
        )

    rest = len(values) - counted_in_redis(kafka_settings)
    final = children.run(
        "consume", "--batch-size", "1000", "--exit-when-idle", "3", seconds=patience(rest, batch=1000, more=3)
    )
    assert final.process.returncode == 0, final.stderr()[-3000:]
    assert counted_in_redis(kafka_settings) == len(values)
    assert kills >= min(3, sizes.crash_kills)
    log.info("crashes: %d kills, then a clean run drained the topic", kills)
    assert_counted_exactly(truth, day=day, produced=len(values))
