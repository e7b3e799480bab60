"""Kafka record batches decoded by aiokafka's compiled decoder, under kafka-python's consumer.

kafka-python decodes each record in pure Python: seven varints, a record object, then a 13-field
``ConsumerRecord``. At about 10 µs a record that was a third of the consumer's CPU, and the whole of a bare
kafka-python poll loop. aiokafka ships the same decoding in C (0.6 µs a record on this machine). kafka-python
stays the client: group membership, fetching, positions and commits are untouched. Only the step that turns a
fetched partition's bytes into records is swapped, by giving the consumer's fetcher a ``PartitionRecords``
whose record iterator reads the batches with aiokafka (or, when aiokafka's compiled module is missing, with
kafka-python's own batches: the same walk, slower).

The walk also does what neither library does for us:

- **Every codec.** gzip, snappy, lz4 and zstd batches are decompressed by aiokafka (with ``cramjam``) or
  kafka-python (``python-snappy``, ``lz4``, ``zstandard``), all pinned in requirements.txt.
- **An unreadable batch is a gap, not a crash.** A batch neither can decode (a codec nobody knows, corrupt
  bytes, a CRC that does not match) or that would decompress past ``max_decompressed_bytes`` (a compression
  bomb: checked by a bounded streaming decompression before the decoder allocates the whole) is handed on as
  one ``BatchGap`` with the error; ``parse_batch`` makes it a dead letter and the partition moves past it.
- **read_committed.** Records of an aborted transaction are skipped, whether the broker lists the aborted
  transactions in its fetch response (Kafka) or not (tansu lists none): the fetched bytes are also read ahead
  for each producer's next transaction marker. A transactional batch whose marker is not in this fetch is not
  handed out yet; the next fetch starts at it. When the fetch starts at such a batch (a transaction longer than
  one fetch), its bytes are held, the position moves on, and the next fetch of the partition is read after
  them, until a marker decides the transaction (nothing past it is handed out meanwhile, as Kafka serves
  nothing past the last stable offset). Control batches and skipped batches are handed on as gaps without an
  error, so the offset stored with the counters moves past them.

The swap relies on two kafka-python internals: ``Fetcher.PartitionRecords`` (looked up on the fetcher for
every fetched partition) and the raw bytes of its ``MemoryRecords``. Both are pinned with kafka-python in
requirements.txt; when either is missing the consumer keeps kafka-python's own decoding and says so in the log.
"""

import enum
import io
import logging
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.fetcher import Fetcher
from kafka.protocol.consumer import IsolationLevel
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatch

from stats.pipeline.batch_gaps import BatchGap, GapRecord

logger = logging.getLogger(__name__)

try:
    from aiokafka.record._crecords.memory_records import MemoryRecords as CompiledMemoryRecords
except ImportError:  # no wheel for this platform: kafka-python's batches are walked instead
    CompiledMemoryRecords = None

# A batch that decompresses to more than this is refused as a compression bomb. A producer's batch is at most
# its ``batch.size`` (1 MB by default) compressed, and events are at most 64 KB each: JSON compresses some
# 5-20 times, so 64 MiB leaves room for any real batch and keeps a bomb's cost to what the consumer can carry.
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
# How much of an unreadable batch's bytes its dead letter keeps.
MAX_RAW_KEPT = 1024 * 1024
# How much of an undecided transaction is held waiting for its marker. A producer's transaction lasts at most
# its timeout (a minute by default); one longer than this is counted as committed, with a warning, rather
# than held in memory without bound.
MAX_HELD_BYTES = 64 * 1024 * 1024
_HEADER_SIZE = DefaultRecordBatch.HEADER_STRUCT.size
_TRANSACTIONAL, _CONTROL = DefaultRecordBatch.TRANSACTIONAL_MASK, DefaultRecordBatch.CONTROL_MASK
_CHUNK = 1024 * 1024


class BatchTooLarge(Exception):
    pass


def _inflated_size_within(codec: int, data: bytes, bound: int) -> None:
    """Decompress ``data`` a chunk at a time, keeping nothing; raise ``BatchTooLarge`` past ``bound`` bytes.

    Each chunk is dropped as soon as it is counted, so a bomb costs one chunk of memory, not its full size.
    """
    total = 0
    if codec == DefaultRecordBatch.CODEC_GZIP:
        pending = data
        while pending and total <= bound:
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            total += len(inflater.decompress(pending, _CHUNK))
            while not inflater.eof and total <= bound:
                # zlib may hold output back with no input left: asking again with none releases it.
                chunk = inflater.decompress(inflater.unconsumed_tail, _CHUNK)
                if not chunk and not inflater.unconsumed_tail:
                    break  # a truncated stream: the decoder reports it
                total += len(chunk)
            pending = inflater.unused_data  # a gzip stream may hold several members
    elif codec == DefaultRecordBatch.CODEC_SNAPPY:
        total = _snappy_size(data)
    elif codec == DefaultRecordBatch.CODEC_LZ4:
        import lz4.frame

        inflater = lz4.frame.LZ4FrameDecompressor()
        total = len(inflater.decompress(data, max_length=_CHUNK))
        while not inflater.eof and not inflater.needs_input and total <= bound:
            total += len(inflater.decompress(b"", max_length=_CHUNK))
    elif codec == DefaultRecordBatch.CODEC_ZSTD:
        import zstandard

        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True) as reader:
            while (chunk := reader.read(_CHUNK)) and total <= bound:
                total += len(chunk)
    if total > bound:
        raise BatchTooLarge(f"decompresses past {bound} bytes")


def _varint(data: bytes, pos: int) -> int:
    value = shift = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        pos += 1
        shift += 7
        if shift > 35:
            raise ValueError("snappy length varint too long")


def _snappy_size(data: bytes) -> int:
    """The size snappy data says it decompresses to (each block starts with it; the decoder checks it)."""
    if data[:8] != b"\x82SNAPPY\x00":  # a raw snappy block
        return _varint(data, 0)
    total, pos = 0, 16  # xerial framing: a 16-byte header, then (length, block) pairs
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos)
        total += _varint(data, pos + 4)
        pos += 4 + length
    return total


@dataclass(frozen=True)
class HeldTransaction:
    """The fetched bytes of a partition from a transaction whose marker no fetch has brought yet."""

    start: int  # the offset of its first batch
    end: int  # where the next fetch starts, after the bytes held
    raw: bytes


def _complete_batches(raw: bytes) -> tuple[int, int | None]:
    """The length of ``raw``'s whole batches (a fetch may end in part of one) and the offset after them."""
    header = DefaultRecordBatch.HEADER_STRUCT
    pos, next_offset = 0, None
    while pos + header.size <= len(raw):
        base_offset, length, _epoch, magic, _crc, _attributes, last_delta, *_ = header.unpack_from(raw, pos)
        size = DefaultRecordBatch.AFTER_LEN_OFFSET + length
        if pos + size > len(raw) or magic != 2:  # the next fetch reads it (whole, or in its own format)
            break
        pos, next_offset = pos + size, base_offset + last_delta + 1
    return pos, next_offset


class _Step(enum.Enum):
    COUNT = "count"
    PASS = "pass"
    STOP = "stop"


class CompiledPartitionRecords(Fetcher.PartitionRecords):
    """kafka-python's records of one fetched partition, decoded by aiokafka, with gaps for what holds no event.

    The records it yields carry ``offset``, ``timestamp``, ``key``, ``value`` and ``headers``, not the rest of a
    ``ConsumerRecord`` (sizes, checksum, topic and partition, which ``poll`` keys them by anyway); a
    ``GapRecord`` stands for a batch that holds no event to count. Deserializers keep kafka-python's path: the
    consumer uses none.
    """

    fetch_offset: int
    next_fetch_offset: int
    max_decompressed_bytes = MAX_DECOMPRESSED_BYTES
    max_held_bytes = MAX_HELD_BYTES
    compiled = CompiledMemoryRecords is not None
    # Per partition, the transaction waiting for its marker: one dict per consumer (``decode_records_compiled``
    # gives each its own subclass), emptied by ``forget_held_transactions`` when the positions are set anew.
    held: dict[TopicPartition, HeldTransaction] = {}

    def _unpack_records(
        self,
        tp: TopicPartition,
        records: MemoryRecords,
        key_deserializer: Callable | None,
        value_deserializer: Callable | None,
    ) -> Iterator[Any]:
        raw = getattr(records, "_buffer", None)
        if raw is None or key_deserializer is not None or value_deserializer is not None:
            yield from super()._unpack_records(tp, records, key_deserializer, value_deserializer)
            return
        raw = bytes(raw)
        committed = self.isolation_level == IsolationLevel.READ_COMMITTED
        if committed and (held := self.held.pop(tp, None)) is not None and held.end == self.fetch_offset:
            # This fetch continues the bytes held: read them as one. Records before the fetch offset are no
            # longer skipped, as they were never handed out.
            raw, self.fetch_offset = held.raw + raw, held.start
            records = MemoryRecords(raw)
        yield from self._walk(tp, raw, records, _transaction_fates(raw) if committed else None)
        self.drain()

    def _walk(
        self, tp: TopicPartition, raw: bytes, records: MemoryRecords, fates: dict[int, str] | None
    ) -> Iterator[Any]:
        """The fetch's records and gaps, batch by batch; ``fates`` of its transactions when reading committed."""
        compiled = CompiledMemoryRecords(raw) if self.compiled else None
        last_batch = None
        # kafka-python's batches (headers only: they parse lazily) walk the same slices in step with
        # aiokafka's, for the partition leader epoch and the producer ids that aiokafka does not expose.
        while (header := records.next_batch()) is not None:
            batch = compiled.next_batch() if compiled is not None else header
            if batch is None:  # the two readers slice alike; this would be a bug, not bad data
                raise AssertionError(f"aiokafka found no batch at offset {header.base_offset} of {tp}")
            last_batch = header
            if header.magic == 2:
                self.leader_epoch = header.leader_epoch
                step = self._step_for(tp, header, raw, fates)
                if step is _Step.STOP:
                    return
                if (
                    step is _Step.PASS
                ):  # a marker or an aborted batch: its offsets are passed, nothing counted
                    self.next_fetch_offset = header.next_offset
                    yield GapRecord(BatchGap(header.base_offset, header.next_offset, 0))
                    continue
            yield from self._records_of(tp, header, batch)
        # Compaction may have removed a v2 batch's last records; its last offset still says where the next
        # fetch starts, so the same batch is not fetched again.
        if last_batch is not None and last_batch.magic == 2:
            self.next_fetch_offset = last_batch.next_offset

    def _step_for(
        self, tp: TopicPartition, header: DefaultRecordBatch, raw: bytes, fates: dict[int, str] | None
    ) -> "_Step":
        """Whether a v2 batch is counted, passed, or ends this fetch (which then says where the next starts)."""
        if fates is not None and header.has_producer_id():
            self._consume_aborted_transactions_up_to(header.last_offset)
            if header.is_control_batch:
                if self._contains_abort_marker(header):
                    self.aborted_producer_ids.discard(header.producer_id)
            elif header.is_transactional:
                fate, aborted = fates.get(header.base_offset), self._is_batch_aborted(header)
                if fate is None and header.base_offset > self.fetch_offset:
                    # Its marker lies beyond this fetch: the next fetch starts here and reads it.
                    self.next_fetch_offset = header.base_offset
                    return _Step.STOP
                if fate is None and not aborted and self._hold(tp, raw):
                    return _Step.STOP
                if fate == "abort" or aborted:
                    return _Step.PASS
        return _Step.PASS if header.is_control_batch else _Step.COUNT

    def _records_of(self, tp: TopicPartition, header: DefaultRecordBatch, batch: Any) -> Iterator[Any]:
        """The batch's records, or one gap carrying the error if it cannot be decoded."""
        try:
            decoded = self._decode(header, batch)
        except Exception as exc:  # noqa: BLE001 - whatever the codec raises, the batch is unreadable
            logger.error(
                "%s: record batch at offset %d (%d records) cannot be decoded: %s: %s",
                tp,
                header.base_offset,
                header.records_count,
                type(exc).__name__,
                exc,
            )
            self.next_fetch_offset = header.next_offset
            yield GapRecord(
                BatchGap(
                    header.base_offset,
                    header.next_offset,
                    header.records_count,
                    error=f"{type(exc).__name__}: {exc}",
                    raw=bytes(header._buffer[:MAX_RAW_KEPT]),
                )
            )
            return
        for record in decoded:
            # Per record, not per batch: ``take`` may stop between two records of a batch, and the
            # position kafka-python moves to is the one after the last record handed out.
            self.next_fetch_offset = record.offset + 1
            yield record
        self.records_read += len(decoded)
        self.bytes_read += header.size_in_bytes

    def _hold(self, tp: TopicPartition, raw: bytes) -> bool:
        """Hold ``raw``, which starts with a transaction whose marker it lacks, and move the position past it;
        False for a transaction longer than ``max_held_bytes``, which is then counted as committed."""
        length, end = _complete_batches(raw)
        if end is None or length > self.max_held_bytes:
            logger.warning(
                "%s: the transaction at offset %d is longer than %d bytes; counted as committed",
                tp,
                self.fetch_offset,
                self.max_held_bytes,
            )
            return False
        self.held[tp] = HeldTransaction(self.fetch_offset, end, raw[:length])
        self.next_fetch_offset = end
        return True

    def _decode(self, header: DefaultRecordBatch, batch: Any) -> list:
        """The batch's records, all of them or an exception: a batch is never handed out in part."""
        if self.check_crcs and not batch.validate_crc():
            raise ValueError("the batch's CRC does not match its bytes")
        if header.magic == 2 and (codec := header.compression_type) != DefaultRecordBatch.CODEC_NONE:
            if codec > DefaultRecordBatch.CODEC_ZSTD:
                raise ValueError(f"unknown compression codec {codec}")
            _inflated_size_within(codec, bytes(header._buffer[_HEADER_SIZE:]), self.max_decompressed_bytes)
        return list(batch)


def _transaction_fates(raw: bytes) -> dict[int, str]:
    """Per transactional batch in ``raw`` (by base offset): "commit" or "abort", from its producer's next marker.

    A batch whose marker is not in ``raw`` is left out: its transaction's fate is not known from this fetch.
    Only the batch headers are read (no copy), and the record of a control batch.
    """
    fates: dict[int, str] = {}
    open_batches: dict[int, list[int]] = {}
    header = DefaultRecordBatch.HEADER_STRUCT
    pos, end = 0, len(raw)
    while pos + header.size <= end:
        # Every message format starts with the base offset and the size of the rest; magic is byte 16.
        (base_offset, length, _epoch, magic, _crc, attributes, *_, producer_id, _pe, _seq, _n) = (
            header.unpack_from(raw, pos)
        )
        size = DefaultRecordBatch.AFTER_LEN_OFFSET + length
        if pos + size > end:
            break  # a partial batch at the end of the fetch: the next fetch reads it whole
        if magic == 2 and attributes & _TRANSACTIONAL:
            if attributes & _CONTROL:
                marker = next(iter(DefaultRecordBatch(raw[pos : pos + size])), None)
                fate = "abort" if marker is not None and marker.abort else "commit"
                for first in open_batches.pop(producer_id, ()):
                    fates[first] = fate
            else:
                open_batches.setdefault(producer_id, []).append(base_offset)
        pos += size
    return fates


def decode_records_compiled(consumer: KafkaConsumer) -> bool:
    """Have ``consumer`` decode fetched records with this module; False if aiokafka's decoder is missing.

    Without it the walk (gaps, bounds, transactions) still runs, over kafka-python's slower batches.
    """
    fetcher = getattr(consumer, "_fetcher", None)
    if fetcher is None or not hasattr(fetcher, "PartitionRecords"):
        logger.warning("kafka-python's fetcher has no PartitionRecords; records are decoded by kafka-python")
        return False
    fetcher.PartitionRecords = type("PartitionRecords", (CompiledPartitionRecords,), {"held": {}})
    if CompiledMemoryRecords is None:
        logger.warning(
            "aiokafka's compiled record decoder is unavailable; records are decoded by kafka-python"
        )
        return False
    return True


def forget_held_transactions(
    consumer: KafkaConsumer, partitions: Iterable[TopicPartition] | None = None
) -> None:
    """Drop the bytes held for undecided transactions of ``partitions`` (all by default), whose positions are
    being set anew (a rebalance, a seek): held bytes are only read on by the fetch that continues them."""
    held = getattr(getattr(consumer, "_fetcher", None), "PartitionRecords", CompiledPartitionRecords).held
    if held is CompiledPartitionRecords.held:
        return  # this consumer decodes with kafka-python alone: it holds nothing
    for tp in list(held) if partitions is None else partitions:
        held.pop(tp, None)
