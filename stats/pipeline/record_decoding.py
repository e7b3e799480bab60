"""Kafka record batches decoded by aiokafka's compiled decoder, under kafka-python's consumer.

kafka-python decodes each record in pure Python: seven varints, a record object, then a 13-field
``ConsumerRecord``. At about 10 µs a record that was a third of the consumer's CPU, and the whole of a bare
kafka-python poll loop. aiokafka ships the same decoding in C (0.6 µs a record on this machine). kafka-python
stays the client: group membership, fetching, positions and commits are untouched. Only the step that turns a
fetched partition's bytes into records is swapped, by giving the consumer's fetcher a ``PartitionRecords``
whose record iterator reads the batches with aiokafka.

The swap relies on two kafka-python internals: ``Fetcher.PartitionRecords`` (looked up on the fetcher for
every fetched partition) and the raw bytes of its ``MemoryRecords``. Both are pinned with kafka-python in
requirements.txt; when either is missing, or aiokafka's compiled module is, the consumer keeps kafka-python's
own decoding and says so in the log.
"""

import logging
from collections.abc import Iterator

from kafka import KafkaConsumer
from kafka.consumer.fetcher import Fetcher
from kafka.errors import CorruptRecordError
from kafka.protocol.consumer import IsolationLevel

logger = logging.getLogger(__name__)

try:
    from aiokafka.record._crecords.memory_records import MemoryRecords as CompiledMemoryRecords
except ImportError:  # no wheel for this platform: aiokafka's pure-Python decoder would be no faster
    CompiledMemoryRecords = None


class CompiledPartitionRecords(Fetcher.PartitionRecords):
    """kafka-python's records of one fetched partition, decoded by aiokafka.

    The records it yields carry ``offset``, ``timestamp``, ``key``, ``value`` and ``headers``, not the rest of a
    ``ConsumerRecord`` (sizes, checksum, topic and partition, which ``poll`` keys them by anyway).
    Transactional reads (``read_committed``) and deserializers keep kafka-python's path: the consumer uses
    neither.
    """

    def _unpack_records(self, tp, records, key_deserializer, value_deserializer) -> Iterator:
        raw = getattr(records, "_buffer", None)
        if (
            raw is None
            or key_deserializer is not None
            or value_deserializer is not None
            or self.isolation_level != IsolationLevel.READ_UNCOMMITTED
        ):
            yield from super()._unpack_records(tp, records, key_deserializer, value_deserializer)
            return
        compiled = CompiledMemoryRecords(bytes(raw))
        last_batch = None
        # kafka-python's batches (headers only: they parse lazily) walk the same slices in step with
        # aiokafka's, for the partition leader epoch that aiokafka does not expose.
        while (header := records.next_batch()) is not None:
            batch = compiled.next_batch()
            if batch is None:  # the two readers slice alike; this would be a bug, not bad data
                raise CorruptRecordError(f"aiokafka found no batch at offset {header.base_offset} of {tp}")
            last_batch = header
            if self.check_crcs and not batch.validate_crc():
                raise CorruptRecordError(
                    f"Record batch for partition {tp} at offset {header.base_offset} failed crc check"
                )
            if header.magic == 2:
                self.leader_epoch = header.leader_epoch
                # A control batch marks a transaction's end; it holds no record for the application.
                if header.is_control_batch:
                    self.next_fetch_offset = header.next_offset
                    continue
            read = 0
            for record in batch:
                read += 1
                # Per record, not per batch: ``take`` may stop between two records of a batch, and the
                # position kafka-python moves to is the one after the last record handed out.
                self.next_fetch_offset = record.offset + 1
                yield record
            self.records_read += read
            self.bytes_read += header.size_in_bytes
        # Compaction may have removed a v2 batch's last records; its last offset still says where the next
        # fetch starts, so the same batch is not fetched again.
        if last_batch is not None and last_batch.magic == 2:
            self.next_fetch_offset = last_batch.next_offset
        self.drain()


def decode_records_compiled(consumer: KafkaConsumer) -> bool:
    """Have ``consumer`` decode fetched records with aiokafka's compiled decoder; False if it cannot."""
    fetcher = getattr(consumer, "_fetcher", None)
    if CompiledMemoryRecords is None or not hasattr(fetcher, "PartitionRecords"):
        logger.warning(
            "aiokafka's compiled record decoder is unavailable; records are decoded by kafka-python"
        )
        return False
    fetcher.PartitionRecords = CompiledPartitionRecords
    return True
