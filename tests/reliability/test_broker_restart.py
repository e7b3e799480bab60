"""The broker is stopped and started again on the same port mid-stream: the consumer reconnects and resumes.

The tansu build the tests use stores topics in memory only (``tansu broker --help``: ``memory://`` or ``s3://``;
its ``sqlite``/``slatedb`` engines are not compiled in, and no S3 server runs here), so a restart loses the
topic. A production Kafka keeps its log across a restart; the test stands for that by producing the identical
log again (the same values, in the same order, to the same partitions) as soon as the broker is back, so every
offset means what it meant before. The consumer faces the dead broker for a few seconds, then is frozen while
the topic is rebuilt, because tansu auto-creates a topic that a client asks about (with its default partition
count), whatever the client's ``allow_auto_topic_creation`` says. "Resume" then means what it means in production: the consumer, told
nothing, reconnects, rejoins the group (whose state the broker also lost) and continues each partition from the
offset stored in Redis with its counters: not from zero (counting twice) and not from the end (losing events).
"""

import logging
import signal
import time
import uuid

import pytest

from tests.factories import create_tree
from tests.reliability.flow import (
    assert_counted_exactly,
    counted_in_redis,
    create_topic,
    produce,
    todays_traffic,
)
from tests.reliability.procs import Children, patience, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.real_clock]
log = logging.getLogger("reliability")

DOWN_SECONDS = 4
SLEEP = 0.2


def test_broker_restarted_mid_stream_the_consumer_reconnects_and_resumes_from_stored_offsets(
    settings, private_broker, tmp_path, sizes
):
    settings.KAFKA_BOOTSTRAP_SERVERS = private_broker.address
    settings.KAFKA_TOPIC = f"t-{uuid.uuid4().hex[:10]}"
    settings.KAFKA_GROUP_ID = f"g-{uuid.uuid4().hex[:10]}"
    from tests.conftest import KAFKA_SESSION_TIMEOUT_MS

    settings.CPS_STATS = {**settings.CPS_STATS, "KAFKA_SESSION_TIMEOUT_MS": KAFKA_SESSION_TIMEOUT_MS}
    create_tree()
    values, truth, day = todays_traffic(events=sizes.restart_events, users=2000, seed=71)
    create_topic(private_broker.address, settings.KAFKA_TOPIC)
    produce(private_broker.address, settings.KAFKA_TOPIC, values)
    children = Children(settings, tmp_path)
    try:
        consumer = children.start("consume", "--batch-size", "300", CPS_FAULT_SLEEP=f"after_archive:{SLEEP}")
        wait_until(
            lambda: counted_in_redis(settings) >= len(values) // 5,
            seconds=patience(len(values) // 5, batch=300, sleep=SLEEP),
            what="a fifth of the stream",
        )
        private_broker.stop()
        at_stop = counted_in_redis(settings)
        # The consumer faces a dead broker for a while: it must keep trying, not crash.
        time.sleep(DOWN_SECONDS)
        assert consumer.alive(), consumer.stderr()[-3000:]
        # Frozen while the topic is rebuilt: its metadata requests would otherwise auto-create the topic
        # (tansu does so whatever the client asks) with the broker's default partition count.
        consumer.process.send_signal(signal.SIGSTOP)
        try:
            private_broker.start()
            create_topic(private_broker.address, settings.KAFKA_TOPIC)
            produce(private_broker.address, settings.KAFKA_TOPIC, values)
        finally:
            consumer.process.send_signal(signal.SIGCONT)
        log.info(
            "broker restart: broker killed after %d of %d messages were counted, started again, log re-produced",
            at_stop,
            len(values),
        )
        assert at_stop < len(values), "the stream ended before the restart: make it longer"
        took = wait_until(
            lambda: counted_in_redis(settings) >= len(values) or not consumer.alive(),
            # Reconnecting with backoff and rejoining come on top of the counting.
            seconds=patience(len(values) - at_stop, batch=300, sleep=SLEEP, more=60),
            what="the consumer to count the rest after the restart",
        )
        assert consumer.alive(), consumer.stderr()[-3000:]
        consumer.process.send_signal(signal.SIGTERM)
        assert consumer.wait(30) == 0, consumer.stderr()[-3000:]
    finally:
        children.close()
    assert counted_in_redis(settings) == len(values)
    log.info("broker restart: the same consumer process reconnected and counted the rest in %.0f s", took)
    assert_counted_exactly(truth, day=day, produced=len(values))
