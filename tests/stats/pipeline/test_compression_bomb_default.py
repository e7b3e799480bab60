"""The consumer's own bound on a batch's decompressed size, with no test overriding it."""

import pytest
from kafka import TopicPartition

from stats.pipeline.batch_gaps import BatchGap
from tests.stats.pipeline.test_librdkafka import (
    decoder,  # noqa: F401 - the fixture, used by pytestmark
    decoding_consumer,
    gzip_bomb,
    librdkafka,
    produce,
    produce_unreadable,
    read_until_idle,
)

# Both decoders: aiokafka's compiled one and kafka-python's batches. The broker and the decoder alone: no
# database, no Redis.
pytestmark = [pytest.mark.kafka, pytest.mark.usefixtures("decoder"), pytest.mark.one_pass("sqlite")]


def test_a_batch_past_64_mib_is_refused_by_the_default_bound_and_reading_goes_on(
    kafka_bootstrap, kafka_topic
):
    produce(librdkafka(kafka_bootstrap), kafka_topic, [b"before"], partition=0)
    bomb = gzip_bomb(65 * 1024 * 1024)  # 65 MiB of zeros in some 65 KB: just past the default 64 MiB
    produce_unreadable(kafka_bootstrap, kafka_topic, [b"b"] * 3, partition=0, payload=bomb)
    produce(librdkafka(kafka_bootstrap), kafka_topic, [b"after"], partition=0)
    tp = TopicPartition(kafka_topic, 0)
    with decoding_consumer(kafka_bootstrap, tp) as consumer:
        read = read_until_idle(consumer)
        assert consumer.position(tp) == 5
    assert [r.value for r in read if not isinstance(r.value, BatchGap)] == [b"before", b"after"]
    gaps = [r.value for r in read if isinstance(r.value, BatchGap)]
    assert [(g.first_offset, g.next_offset, g.record_count) for g in gaps] == [(1, 4, 3)]
    assert gaps[0].error == "BatchTooLarge: decompresses past 67108864 bytes"  # 64 MiB
