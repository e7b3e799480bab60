"""The consumer's poll: a partition's batch is as large as the batch size allows, not as one fetch happens to be;
a rebalance in the middle of a batch never hands out a record twice."""

import time
import uuid

import pytest
from django_redis import get_redis_connection
from kafka import KafkaProducer

from stats.pipeline.group import MergingPoll, Polled, open_consumer
from stats.pipeline.offsets import store_if_absent

pytestmark = [pytest.mark.kafka, pytest.mark.django_db]

RECORDS = 3000
BATCH = 1000
# About 250 of the records below: a fetch brings a quarter of a batch.
FETCH_BYTES = 32 * 1024


def produce_to_one_partition(bootstrap: str, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, batch_size=16 * 1024)
    for n in range(RECORDS):
        producer.send(topic, b'{"n": %d, "pad": "%s"}' % (n, b"x" * 100), partition=0)
    producer.flush()
    producer.close()


def poll_everything(poll, *, expected: int) -> tuple[list[int], list[int]]:
    """Poll until every offset below ``expected`` came; return the size of each non-empty poll and every offset
    read. Within a poll, a partition's offsets rise (the batch's first and next offset frame what it counts)."""
    sizes: list[int] = []
    offsets: list[int] = []
    deadline = time.monotonic() + 60
    while len(set(offsets)) < expected and time.monotonic() < deadline:
        polled: Polled = poll()
        for records in polled.values():
            batch = [record.offset for record in records]
            assert batch == sorted(set(batch)), f"a batch goes back or repeats: {batch[:3]}…{batch[-3:]}"
            offsets += batch
        if polled:
            sizes.append(sum(len(records) for records in polled.values()))
    return sizes, offsets


def joined_consumer(kafka_settings, group: str | None = None):
    """A consumer of the empty topic that holds its partitions: the records produced after come fetch by
    fetch, not piled up while the group was joined."""
    consumer, listener = open_consumer(
        group=group or f"g-{uuid.uuid4().hex[:10]}",
        topic=kafka_settings.KAFKA_TOPIC,
        batch_size=BATCH,
        before_revoke=lambda seconds: True,
        partition_fetch_bytes=FETCH_BYTES,
    )
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        assert not consumer.poll(timeout_ms=200)
    return consumer, listener


def test_a_partition_with_a_backlog_fills_its_batch_from_several_fetches(kafka_settings):
    consumer, listener = joined_consumer(kafka_settings)
    produce_to_one_partition(kafka_settings.KAFKA_BOOTSTRAP_SERVERS, kafka_settings.KAFKA_TOPIC)
    try:
        polls = MergingPoll(consumer, listener, batch_size=BATCH)
        sizes, offsets = poll_everything(lambda: polls.poll(timeout_ms=500), expected=RECORDS)
    finally:
        consumer.close()
    assert offsets == list(range(RECORDS))
    # 3,000 records in batches of 1,000; a plain poll brings one fetch, about 250.
    assert sizes == [1000, 1000, 1000]


@pytest.mark.parametrize("stored", [False, True], ids=["goes-on", "seeks-back-to-stored-offset"])
def test_a_rebalance_during_a_top_up_loses_nothing_and_repeats_nothing_in_a_batch(kafka_settings, stored):
    """Without an offset stored in Redis the partition goes on where it was, and what was polled stays: every
    record comes once. With one, the assignment seeks back to it: what was polled before is read again, in a
    later batch (which the offset stored with the counters tells apart), never in the same one."""
    group = f"g-{uuid.uuid4().hex[:10]}"
    if stored:
        store_if_absent(
            get_redis_connection("default"),
            group=group,
            source=kafka_settings.KAFKA_TOPIC,
            partition=0,
            offset=0,
        )
    consumer, listener = joined_consumer(kafka_settings, group)
    produce_to_one_partition(kafka_settings.KAFKA_BOOTSTRAP_SERVERS, kafka_settings.KAFKA_TOPIC)

    class RebalancingOnce(MergingPoll):
        """Asks the group for a rebalance once, between the first poll of a batch and its top-up, and waits in the
        top-up long enough for the whole rejoin (the broker answers a join after half the session timeout)."""

        asked = False
        TOP_UP_WAIT_MS = 20_000

        def _behind(self, polled: Polled) -> bool:
            if not self.asked:
                self.asked = True
                # What a member joining or leaving does to this one: its next poll rejoins the group, and the
                # assignment moves its partitions back to their stored (here: first) offsets.
                self.consumer._coordinator.rejoin_needed = True
            return super()._behind(polled)

    try:
        polls = RebalancingOnce(consumer, listener, batch_size=BATCH)
        sizes, offsets = poll_everything(lambda: polls.poll(timeout_ms=500), expected=RECORDS)
    finally:
        consumer.close()
    assert polls.asked, sizes
    assert sorted(set(offsets)) == list(range(RECORDS))
    if not stored:
        assert offsets == list(range(RECORDS))
