"""Events from librdkafka (confluent-kafka), the producer most backends use, through the real broker.

Every codec, keys and headers, idempotence, committed and aborted transactions, and record batches no decoder
can read (an unknown codec, corrupt bytes, a compression bomb), read by the consumer's record decoder and
counted by ``manage.py consume``.
"""

import struct
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Producer
from django.db.models import Count
from django.utils import timezone
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

from cpsproject.common.timeutil import local_day
from stats.jobs.flush import flush
from stats.models import DeadLetter
from stats.pipeline import record_decoding
from stats.pipeline.batch_gaps import BatchGap
from stats.pipeline.ingest import stored_offsets
from stats.pipeline.record_decoding import CompiledPartitionRecords, decode_records_compiled
from tests.factories import archived_event_count, create_tree, pv_event
from tests.stats.pipeline.test_consumer import consume, pv_by_code, reported_count

pytestmark = pytest.mark.kafka

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def librdkafka(bootstrap: str, **config) -> Producer:
    # A long linger: many records share one record batch, so each codec really compresses a batch.
    return Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 50, "log.connection.close": False, **config}
    )


def produce(producer: Producer, topic: str, values: list[bytes], *, partition: int) -> None:
    """Send ``values`` with a key and headers each; wait until the broker has every one."""
    failed = []

    def delivered(error, message) -> None:
        if error is not None:
            failed.append(error)

    for n, value in enumerate(values):
        producer.produce(
            topic,
            value=value,
            key=b"key-%d" % n,
            headers=[("trace", b"t-%d" % n), ("empty", None)],
            partition=partition,
            on_delivery=delivered,
        )
    assert producer.flush(30) == 0
    assert failed == []


def produce_transaction(bootstrap: str, topic: str, values: list[bytes], *, partition: int, commit: bool):
    producer = librdkafka(
        bootstrap, **{"transactional.id": f"tx-{topic}-{commit}", "compression.type": "lz4"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value, partition=partition)
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def tampered(build: Callable, *, codec: int | None = None, payload: bytes | None = None) -> Callable:
    """kafka-python's batch builder, changed to write a batch no decoder can read (its CRC still matches)."""
    header = DefaultRecordBatchBuilder.HEADER_STRUCT.size

    def hostile_build(self) -> bytearray:
        batch = bytearray(build(self))
        if payload is not None:
            batch[header:] = payload
        if codec is not None:
            (attributes,) = struct.unpack_from(">h", batch, DefaultRecordBatchBuilder.ATTRIBUTES_OFFSET)
            struct.pack_into(
                ">h", batch, DefaultRecordBatchBuilder.ATTRIBUTES_OFFSET, (attributes & ~7) | codec
            )
        struct.pack_into(">i", batch, 8, len(batch) - DefaultRecordBatchBuilder.AFTER_LEN_OFFSET)
        crc = calc_crc32c(memoryview(batch)[DefaultRecordBatchBuilder.ATTRIBUTES_OFFSET :])
        struct.pack_into(">I", batch, DefaultRecordBatchBuilder.CRC_OFFSET, crc)
        return batch

    return hostile_build


def produce_unreadable(bootstrap: str, topic: str, values: list[bytes], *, partition: int, **how) -> None:
    """Send ``values`` as one record batch that ``tampered(**how)`` makes unreadable (gzip unless ``codec``)."""
    how.setdefault("codec", DefaultRecordBatchBuilder.CODEC_GZIP)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DefaultRecordBatchBuilder, "build", tampered(DefaultRecordBatchBuilder.build, **how))
        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", linger_ms=200)
        for value in values:
            producer.send(topic, value, partition=partition)
        producer.flush()
        producer.close()


def gzip_bomb(size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = bytes(1024 * 1024)
    return b"".join(packer.compress(chunk) for _ in range(size // len(chunk))) + packer.flush()


@contextmanager
def decoding_consumer(bootstrap: str, tp: TopicPartition) -> Iterator[KafkaConsumer]:
    """A consumer of ``tp`` alone with the product's decoder and isolation, from the partition's start."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level="read_committed"
    )
    try:
        decode_records_compiled(consumer)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        yield consumer
    finally:
        consumer.close()


def read_until_idle(consumer: KafkaConsumer, *, idle: float = 2.0) -> list:
    read: list = []
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < idle:
        for records in consumer.poll(timeout_ms=200).values():
            read += records
            quiet_since = time.monotonic()
    return read


@pytest.fixture(params=["compiled", "kafka-python"])
def decoder(request, monkeypatch) -> str:
    """Both decoders: aiokafka's compiled one, and kafka-python's own batches (used when it is missing)."""
    if request.param == "kafka-python":
        monkeypatch.setattr(CompiledPartitionRecords, "compiled", False)
    return request.param


@pytest.fixture
def codecs_seen(monkeypatch) -> list[int]:
    """The compression codec of every record batch the decoder decodes (so a test knows it read compressed ones)."""
    seen: list[int] = []
    decode = CompiledPartitionRecords._decode

    def spy(self, header, batch):
        seen.append(header.compression_type)
        return decode(self, header, batch)

    monkeypatch.setattr(CompiledPartitionRecords, "_decode", spy)
    return seen


@pytest.mark.one_pass("sqlite")  # the broker and the decoder: no database, no Redis
def test_librdkafka_batches_of_every_codec_decode_with_their_keys_and_headers(
    kafka_bootstrap, kafka_topic, decoder, codecs_seen
):
    expected = []
    for codec in CODECS:
        values = [
            b'{"codec": "%s", "n": %d, "pad": "%s"}' % (codec.encode(), n, b"x" * (n % 50))
            for n in range(150)
        ]
        produce(librdkafka(kafka_bootstrap, **{"compression.type": codec}), kafka_topic, values, partition=0)
        expected += [
            (b"key-%d" % n, value, [("trace", b"t-%d" % n), ("empty", None)])
            for n, value in enumerate(values)
        ]
    tp = TopicPartition(kafka_topic, 0)
    with decoding_consumer(kafka_bootstrap, tp) as consumer:
        read = read_until_idle(consumer)
    assert [(r.key, r.value, list(r.headers)) for r in read] == expected
    assert [r.offset for r in read] == list(range(750))
    assert set(codecs_seen) == {0, 1, 2, 3, 4}  # none, gzip, snappy, lz4, zstd


@pytest.mark.one_pass("sqlite")  # the broker and the decoder: no database, no Redis
def test_unreadable_batches_are_handed_on_as_gaps_with_their_coordinates_and_reading_goes_on(
    kafka_bootstrap, kafka_topic, decoder, monkeypatch
):
    monkeypatch.setattr(CompiledPartitionRecords, "max_decompressed_bytes", 8 * 1024 * 1024)
    produce(librdkafka(kafka_bootstrap), kafka_topic, [b"before-%d" % n for n in range(4)], partition=0)
    corrupt = b"\x1f\x8b\x08\x00not deflate at all" * 4
    produce_unreadable(kafka_bootstrap, kafka_topic, [b"c"] * 5, partition=0, payload=corrupt)
    bomb = gzip_bomb(9 * 1024 * 1024)  # 9 MiB of zeros in 9 KB: past the 8 MiB bound
    produce_unreadable(kafka_bootstrap, kafka_topic, [b"b"] * 3, partition=0, payload=bomb)
    produce(librdkafka(kafka_bootstrap), kafka_topic, [b"after-%d" % n for n in range(2)], partition=0)
    tp = TopicPartition(kafka_topic, 0)
    with decoding_consumer(kafka_bootstrap, tp) as consumer:
        read = read_until_idle(consumer)
        assert consumer.position(tp) == 14
    values = [r.value for r in read if not isinstance(r.value, BatchGap)]
    gaps = [r.value for r in read if isinstance(r.value, BatchGap)]
    assert values == [b"before-0", b"before-1", b"before-2", b"before-3", b"after-0", b"after-1"]
    assert [(g.first_offset, g.next_offset, g.record_count) for g in gaps] == [(4, 9, 5), (9, 12, 3)]
    assert "Error -3 while decompressing" in gaps[0].error
    assert gaps[1].error == "BatchTooLarge: decompresses past 8388608 bytes"
    assert gaps[1].raw.endswith(bomb)  # the dead letter keeps the batch as fetched


@pytest.mark.one_pass("sqlite")  # the broker and the decoder: no database, no Redis
def test_the_bomb_check_keeps_one_chunk_of_memory_not_the_whole(kafka_bootstrap):
    """The bound is checked by streaming: 80 MiB of zeros in each codec is refused, whatever the codec."""
    import cramjam

    data = bytes(80 * 1024 * 1024)
    packed = {
        1: gzip_bomb(len(data)),
        2: b"\x82SNAPPY\x00"
        + bytes(8)
        + b"".join(
            struct.pack(">i", len(block)) + block
            for block in (
                bytes(cramjam.snappy.compress_raw(data[n : n + 32768])) for n in range(0, len(data), 32768)
            )
        ),
        3: bytes(cramjam.lz4.compress(data)),
        4: bytes(cramjam.zstd.compress(data)),
    }
    for codec, compressed in packed.items():
        with pytest.raises(record_decoding.BatchTooLarge):
            record_decoding._inflated_size_within(codec, compressed, 64 * 1024 * 1024)
        record_decoding._inflated_size_within(
            codec, compressed, 80 * 1024 * 1024
        )  # exactly at the bound: fine


@pytest.mark.one_pass("sqlite")  # the broker and the decoder: no database, no Redis
def test_read_committed_skips_an_aborted_transaction_and_hands_on_the_markers(
    kafka_bootstrap, kafka_topic, decoder
):
    """tansu lists no aborted transaction in its fetch responses: the decoder reads the markers itself."""
    produce_transaction(
        kafka_bootstrap, kafka_topic, [b"c1-%d" % n for n in range(3)], partition=0, commit=True
    )
    produce_transaction(
        kafka_bootstrap, kafka_topic, [b"ab-%d" % n for n in range(4)], partition=0, commit=False
    )
    produce(librdkafka(kafka_bootstrap), kafka_topic, [b"plain"], partition=0)
    produce_transaction(
        kafka_bootstrap, kafka_topic, [b"c2-%d" % n for n in range(2)], partition=0, commit=True
    )
    tp = TopicPartition(kafka_topic, 0)
    with decoding_consumer(kafka_bootstrap, tp) as consumer:
        read = read_until_idle(consumer)
        # 3 + marker, 4 + marker, 1, 2 + marker: the position passes the last marker.
        assert consumer.position(tp) == 13
    assert [r.value for r in read if not isinstance(r.value, BatchGap)] == [
        b"c1-0",
        b"c1-1",
        b"c1-2",
        b"plain",
        b"c2-0",
        b"c2-1",
    ]
    gaps = [r.value for r in read if isinstance(r.value, BatchGap)]
    assert all(g.error is None for g in gaps)
    assert max(g.next_offset for g in gaps) == 13


@pytest.mark.django_db(transaction=True)
@pytest.mark.real_clock
def test_consume_counts_every_committed_event_of_a_librdkafka_producer_once_and_no_aborted_one(
    kafka_settings,
):
    """Each codec, idempotence, keys, headers, a committed and an aborted transaction, an unreadable batch."""
    create_tree()
    bootstrap, topic = kafka_settings.KAFKA_BOOTSTRAP_SERVERS, kafka_settings.KAFKA_TOPIC
    now = timezone.now()
    partners = ["A1a", "A2", "B", None]
    made = iter(range(10**6))
    expected: Counter[str] = Counter()

    def events(n: int, *, counted: bool = True) -> list[bytes]:
        chosen = [partners[next(made) % 4] for _ in range(n)]
        if counted:
            expected.update(chosen)
        return [pv_event(now, partner, f"u{n}") for n, partner in enumerate(chosen)]

    for index, codec in enumerate(CODECS):  # 120 events a codec, on partitions 0, 1, 2, 0, 1
        producer = librdkafka(bootstrap, **{"compression.type": codec, "enable.idempotence": True})
        produce(producer, topic, events(120), partition=index % 3)
    produce_transaction(bootstrap, topic, events(40), partition=2, commit=True)
    produce_transaction(bootstrap, topic, events(30, counted=False), partition=2, commit=False)
    unreadable = events(5, counted=False)
    produce_unreadable(bootstrap, topic, unreadable, partition=1, payload=b"\x1f\x8b\x08\x00junk" * 3)
    produce(librdkafka(bootstrap), topic, events(8), partition=1)

    run = consume(kafka_settings, "--batch-size", "100")
    assert run.returncode == 0, run.stderr[-3000:]
    assert reported_count(run.stdout) == 600 + 40 + 8
    flush(include_open=True)
    rows = pv_by_code({local_day(now)})
    assert {code: rows.get(code, 0) for code in ["A", "A1", "A1a", "A2", "B"]} == {
        "A": expected["A1a"] + expected["A2"],
        "A1": expected["A1a"],
        "A1a": expected["A1a"],
        "A2": expected["A2"],
        "B": expected["B"],
    }
    assert sum(expected.values()) == archived_event_count() == 648
    assert dict(DeadLetter.objects.values_list("reason").annotate(n=Count("id"))) == {"undecodable": 1}
    letter = DeadLetter.objects.get()
    assert (letter.source, letter.partition, letter.offset) == (topic, 1, 240)  # after 120 gzip and 120 zstd
    assert letter.detail.startswith("record batch at offsets 240-244 (5 records) could not be decoded: ")
    # Every partition counted to its end, past the transaction markers: 120 + 120 (none, lz4); 120 + 120 + 5
    # + 8 (gzip, zstd, the unreadable batch); 120 + 40 + marker + 30 + marker (snappy, two transactions).
    assert stored_offsets(group=kafka_settings.KAFKA_GROUP_ID, source=topic) == {0: 240, 1: 253, 2: 192}
