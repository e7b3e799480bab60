"""A transaction longer than one fetch (``max_partition_fetch_bytes``), read by the consumer's record decoder.

librdkafka writes 400 transactional records of about 1 KB in batches of 20 (some 20 KB each); a fetch holds
64 KB, so the transaction spans seven fetches and its marker is in none but the last. The decoder must never
fetch the same bytes again, nor hand out a record before the marker says the transaction committed. tansu lists no aborted transactions in its
fetch responses; Kafka does, and that broker is not available here, so its case is played at the record level:
the real bytes tansu stored, cut into Kafka's 64 KB fetches, each with the aborted transactions Kafka would list.
"""

from collections import namedtuple
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.fetcher import Fetcher
from kafka.protocol.consumer import IsolationLevel
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatch

from stats.pipeline.batch_gaps import BatchGap
from stats.pipeline.group import read_on_from_stored
from stats.pipeline.record_decoding import CompiledPartitionRecords, decode_records_compiled
from tests.stats.pipeline.test_librdkafka import decoder, librdkafka, produce, read_until_idle  # noqa: F401

# Both decoders: aiokafka's compiled one and kafka-python's batches. The broker and the decoder alone: no
# database, no Redis.
pytestmark = [pytest.mark.kafka, pytest.mark.usefixtures("decoder"), pytest.mark.one_pass("sqlite")]

FETCH_BYTES = 64 * 1024
RECORDS, PER_BATCH, RECORD_BYTES = 400, 20, 1000
# 3 plain records, the transaction's 400 and its marker, 2 plain records.
END_OFFSET = 3 + RECORDS + 1 + 2

AbortedTransaction = namedtuple("AbortedTransaction", "producer_id first_offset")


def transaction_values() -> list[bytes]:
    return [b"tx-%03d-" % n + b"x" * (RECORD_BYTES - 7) for n in range(RECORDS)]


def produce_long_transaction(bootstrap: str, topic: str, *, commit: bool) -> None:
    """3 plain records, one transaction of 400 in batches of 20 (committed or aborted), 2 plain records."""
    produce(librdkafka(bootstrap), topic, [b"before-%d" % n for n in range(3)], partition=0)
    producer: Producer = librdkafka(
        bootstrap, **{"transactional.id": f"long-{topic}", "batch.num.messages": PER_BATCH}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in transaction_values():
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)
    produce(librdkafka(bootstrap), topic, [b"after-%d" % n for n in range(2)], partition=0)


def expected_values(*, commit: bool) -> list[bytes]:
    middle = transaction_values() if commit else []
    return [b"before-0", b"before-1", b"before-2", *middle, b"after-0", b"after-1"]


def long_transaction_consumer(bootstrap: str, tp: TopicPartition) -> KafkaConsumer:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed",
        # tansu caps a whole fetch (fetch_max_bytes), not each partition's share of it.
        max_partition_fetch_bytes=FETCH_BYTES,
        fetch_max_bytes=FETCH_BYTES,
    )
    decode_records_compiled(consumer)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    return consumer


def event_values(read: list) -> list[bytes]:
    return [r.value for r in read if not isinstance(r.value, BatchGap)]


@pytest.mark.parametrize("commit", [True, False], ids=["committed", "aborted"])
def test_tansu_a_transaction_longer_than_one_fetch_is_counted_exactly(
    kafka_bootstrap, kafka_topic, caplog, commit
):
    """tansu lists no aborted transaction: the decoder holds the transaction's bytes fetch after fetch until
    its marker says what it was, and hands out all of it or none."""
    produce_long_transaction(kafka_bootstrap, kafka_topic, commit=commit)
    tp = TopicPartition(kafka_topic, 0)
    consumer = long_transaction_consumer(kafka_bootstrap, tp)
    try:
        read = read_until_idle(consumer, idle=3.0)
        position = consumer.position(tp)
    finally:
        consumer.close()
    assert position == END_OFFSET
    assert event_values(read) == expected_values(commit=commit)
    assert "counted as committed" not in caplog.text


def test_tansu_a_transaction_longer_than_the_held_bound_is_counted_as_committed(
    kafka_bootstrap, kafka_topic, caplog, monkeypatch
):
    """Past ``max_held_bytes`` the decoder stops holding: the stated limit, logged, and the partition goes on."""
    monkeypatch.setattr(CompiledPartitionRecords, "max_held_bytes", 2 * FETCH_BYTES)
    produce_long_transaction(kafka_bootstrap, kafka_topic, commit=False)
    tp = TopicPartition(kafka_topic, 0)
    consumer = long_transaction_consumer(kafka_bootstrap, tp)
    try:
        read = read_until_idle(consumer, idle=3.0)
        position = consumer.position(tp)
    finally:
        consumer.close()
    values = event_values(read)
    assert position == END_OFFSET
    assert f"is longer than {2 * FETCH_BYTES} bytes; counted as committed" in caplog.text
    # What was held when the bound was passed is counted; what the fetch holding the marker read is not.
    counted = len(values) - 5
    assert 2 * FETCH_BYTES // (RECORD_BYTES + 100) < counted < RECORDS
    assert values == [
        *expected_values(commit=False)[:3],
        *transaction_values()[:counted],
        b"after-0",
        b"after-1",
    ]


def stored_bytes(bootstrap: str, tp: TopicPartition) -> bytes:
    """The partition's record batches as the broker stored them, in one fetch."""
    fetched: list[bytes] = []

    class Capture(Fetcher.PartitionRecords):
        def __init__(self, fetch_offset, tp, records, *args, **kwargs):
            fetched.append(bytes(records._buffer))
            super().__init__(fetch_offset, tp, records, *args, **kwargs)

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, max_partition_fetch_bytes=8 * 1024 * 1024
    )
    try:
        consumer._fetcher.PartitionRecords = Capture
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        read_until_idle(consumer)
    finally:
        consumer.close()
    raw = max(fetched, key=len)
    assert len(raw) > 6 * FETCH_BYTES  # the transaction is several fetches long
    return raw


def batch_starts(raw: bytes) -> Iterator[tuple[int, DefaultRecordBatch]]:
    """Each batch in ``raw`` with its position."""
    pos = 0
    while pos < len(raw):
        size = DefaultRecordBatch.AFTER_LEN_OFFSET + int.from_bytes(raw[pos + 8 : pos + 12], "big")
        yield pos, DefaultRecordBatch(raw[pos : pos + size])
        pos += size


def kafka_fetches(raw: bytes, tp: TopicPartition, *, aborted: AbortedTransaction | None) -> list:
    """Fetch ``raw`` as Kafka would, 64 KB at a time from the batch holding the position, until the end.

    Each fetch lists the aborted transaction if it began at or before the fetch's last offset and its marker is
    at or after the fetch offset. At most one fetch a batch, or the test fails (the decoder would spin).
    """
    batches = list(batch_starts(raw))
    marker = next(b.base_offset for _, b in batches if b.is_control_batch)
    read: list = []
    offset = 0
    for _ in range(len(batches) + 1):
        if offset >= batches[-1][1].next_offset:
            return read
        start = next(pos for pos, b in batches if b.next_offset > offset)
        chunk = raw[start : start + FETCH_BYTES]
        whole = [b for pos, b in batches if start <= pos and pos + len(b._buffer) <= start + len(chunk)]
        last_offset = whole[-1].last_offset
        listed = [aborted] if aborted and aborted.first_offset <= last_offset and marker >= offset else []
        records = CompiledPartitionRecords(
            offset,
            tp,
            MemoryRecords(chunk),
            isolation_level=IsolationLevel.READ_COMMITTED,
            aborted_transactions=listed,
        )
        for record in records.record_iterator:
            read.append(record)
        assert records.next_fetch_offset > offset, f"the fetch at offset {offset} read nothing"
        offset = records.next_fetch_offset
    raise AssertionError(f"more fetches than batches: stuck at offset {offset}")


@pytest.mark.parametrize("commit", [True, False], ids=["committed", "aborted"])
def test_kafka_a_transaction_longer_than_one_fetch_is_counted_exactly(kafka_bootstrap, kafka_topic, commit):
    produce_long_transaction(kafka_bootstrap, kafka_topic, commit=commit)
    tp = TopicPartition(kafka_topic, 0)
    raw = stored_bytes(kafka_bootstrap, tp)
    producer_id = next(b.producer_id for _, b in batch_starts(raw) if b.is_transactional)
    aborted = None if commit else AbortedTransaction(producer_id, 3)
    read = kafka_fetches(raw, tp, aborted=aborted)
    assert [r.value for r in read if not isinstance(r.value, BatchGap)] == expected_values(commit=commit)
    gaps = [r.value for r in read if isinstance(r.value, BatchGap)]
    assert all(g.error is None for g in gaps)
    assert max(g.next_offset for g in gaps) == 3 + RECORDS + 1  # the marker passed


def test_a_seek_while_a_transaction_is_held_reads_from_the_new_position(kafka_bootstrap, kafka_topic):
    """A stale batch moves its partition back to the stored offset (``read_on_from_stored``); bytes held from
    the old position must not be read on after it, even where the new position is where they ended.

    tansu serves nothing past an open transaction, and a poll reads fetch after fetch until the marker, so the
    two fetches are played at the record level, through the consumer's own decoder.
    """
    produce_long_transaction(kafka_bootstrap, kafka_topic, commit=True)
    tp = TopicPartition(kafka_topic, 0)
    raw = stored_bytes(kafka_bootstrap, tp)
    starts = {b.base_offset: pos for pos, b in batch_starts(raw)}
    consumer = long_transaction_consumer(kafka_bootstrap, tp)
    try:
        partition_records = consumer._fetcher.PartitionRecords

        def fetch(offset: int, size: int) -> tuple[list, int]:
            chunk = raw[starts[offset] : starts[offset] + size]
            records = partition_records(
                offset, tp, MemoryRecords(chunk), isolation_level=IsolationLevel.READ_COMMITTED
            )
            return list(records.record_iterator), records.next_fetch_offset

        read, held_until = fetch(3, FETCH_BYTES)  # nothing handed out: the transaction's first bytes held
        assert read == [] and 3 < held_until < 3 + RECORDS
        read_on_from_stored(consumer, {(kafka_topic, 0): held_until})
        read, _ = fetch(held_until, len(raw))  # the rest, with the marker
    finally:
        consumer.close()
    assert read and read[0].offset == held_until
