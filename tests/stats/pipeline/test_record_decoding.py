"""The consumer's record decoder (aiokafka's compiled one, under kafka-python) against the real broker."""

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from stats.pipeline.record_decoding import decode_records_compiled

pytestmark = [pytest.mark.kafka, pytest.mark.one_pass("sqlite")]  # the broker and the decoder alone


def produce(bootstrap: str, topic: str, values: list[bytes], *, compression: str | None) -> None:
    # A long linger and a large batch: hundreds of records share one record batch on the broker.
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, compression_type=compression, linger_ms=200, batch_size=256 * 1024
    )
    for value in values:
        producer.send(topic, value, partition=0)
    producer.flush()
    producer.close()


def read_all(consumer: KafkaConsumer, tp: TopicPartition, expected: int) -> list[tuple[int, bytes]]:
    """Poll until ``expected`` records are read; after each poll the position is the next record's offset."""
    read: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while len(read) < expected and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            read += [(record.offset, record.value) for record in records]
            assert consumer.position(tp) == read[-1][0] + 1
    return read


@contextmanager
def compiled_consumer(
    bootstrap: str, tp: TopicPartition, *, max_poll_records: int
) -> Iterator[KafkaConsumer]:
    """A consumer assigned ``tp`` alone, decoding with the compiled decoder (asserted), closed afterwards."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, max_poll_records=max_poll_records
    )
    try:
        assert decode_records_compiled(consumer)
        consumer.assign([tp])
        yield consumer
    finally:
        consumer.close()


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_polls_smaller_than_a_batch_read_every_record_once_in_order(
    kafka_bootstrap, kafka_topic, compression
):
    values = [b'{"n": %d, "pad": "%s"}' % (n, b"x" * (n % 40)) for n in range(600)]
    produce(kafka_bootstrap, kafka_topic, values, compression=compression)
    tp = TopicPartition(kafka_topic, 0)
    # Seven records a poll: most polls stop inside a record batch, and the next one must go on from there.
    with compiled_consumer(kafka_bootstrap, tp, max_poll_records=7) as consumer:
        consumer.seek_to_beginning(tp)
        read = read_all(consumer, tp, len(values))
        assert read == list(enumerate(values))
        assert consumer.position(tp) == 600


def test_a_consumer_seeking_into_the_middle_of_a_batch_starts_at_that_record(kafka_bootstrap, kafka_topic):
    values = [b"value %d" % n for n in range(300)]
    produce(kafka_bootstrap, kafka_topic, values, compression=None)
    tp = TopicPartition(kafka_topic, 0)
    with compiled_consumer(kafka_bootstrap, tp, max_poll_records=50) as consumer:
        consumer.seek(tp, 123)
        read = read_all(consumer, tp, 300 - 123)
        assert read == [(n, b"value %d" % n) for n in range(123, 300)]
