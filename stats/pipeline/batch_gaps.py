"""Offsets a fetched partition holds that carry no event: control records, aborted transactions, unreadable batches.

The record decoder (``record_decoding``) hands one ``BatchGap`` to the consumer in place of such a record batch,
as the value of a record at the batch's last offset. ``parse_batch`` moves the partition's offset past it, so
the offset stored in Redis reaches the topic's end offset even when the topic ends in a transaction marker, and
an unreadable batch (``error`` set) becomes a dead letter instead of stopping the consumer.
"""

from dataclasses import dataclass
from typing import final


@final  # what is not a BatchGap is a message's bytes: ``type(value) is BatchGap`` tells them apart
@dataclass(frozen=True, slots=True)
class BatchGap:
    first_offset: int  # the record batch's base offset
    next_offset: int  # the offset after the batch's last one
    record_count: int
    error: str | None = None  # None: skipped on purpose (a control batch, an aborted transaction)
    raw: bytes = b""  # an unreadable batch's bytes as fetched (capped), for the dead letter

    def describe(self) -> str:
        return (
            f"record batch at offsets {self.first_offset}-{self.next_offset - 1} "
            f"({self.record_count} records) could not be decoded: {self.error}"
        )


class GapRecord:
    """The record the decoder yields for a gap: at the batch's last offset, the gap as its value."""

    __slots__ = ("offset", "value")
    key = None
    headers: list = []
    timestamp = -1

    def __init__(self, gap: BatchGap):
        self.offset = gap.next_offset - 1
        self.value = gap
