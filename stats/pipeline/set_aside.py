"""Taking events and partitions out of a parsed batch: what a stage refused, and what another consumer owns now.

An event a stage (the counters, the archive) refuses on its own becomes an ``unstorable`` dead letter and
leaves the batch, so that the rest is counted. A partition whose stored offset is past the batch's first
(``stats.pipeline.offsets``) leaves the batch whole: the consumer that counted on from there owns it.
"""

import logging

from stats.pipeline.batch import CountedEvent, ParsedBatch, Partition
from stats.pipeline.events import Reason

logger = logging.getLogger(__name__)


def set_aside(parsed: ParsedBatch, failures: list[tuple[CountedEvent, BaseException]], stage: str) -> None:
    """Turn the events a stage refused on their own into ``unstorable`` dead letters, out of the batch."""
    for (message, event), exc in failures:
        logger.error(
            "%s refused event %r at %s[%d]@%d: %s",
            stage,
            event.event_id,
            message.source,
            message.partition,
            message.offset,
            exc,
        )
        raw = message.value if message.value is not None else event.payload.encode()
        parsed.reject(message._replace(value=raw), Reason.UNSTORABLE, f"{stage}: {type(exc).__name__}: {exc}")
        parsed.events[Partition(message.source, message.partition)].remove(CountedEvent(message, event))
        if stage == "counting" and parsed.archiving is not None:  # else it was never handed to the archive
            parsed.set_aside_by_counting.append(event.event_id)


def refuse(parsed: ParsedBatch, refusals: list[tuple[CountedEvent, str, str]]) -> None:
    """Turn the events a recorder refused into dead letters with its reason and detail, out of the batch."""
    leaving: dict[Partition, set[int]] = {}
    for (message, event), reason, detail in refusals:
        logger.info("recording refused event %r (%s): %s", event.event_id, reason, detail)
        raw = message.value if message.value is not None else event.payload.encode()
        parsed.reject(message._replace(value=raw), reason, detail)
        leaving.setdefault(Partition(message.source, message.partition), set()).add(id(event))
    # One pass over each share: a batch with orders refuses dozens of its thousands of events.
    for partition, gone in leaving.items():
        share = parsed.events[partition]
        share[:] = [counted for counted in share if id(counted.event) not in gone]


def drop_stale(parsed: ParsedBatch, partition: Partition, stored: int) -> None:
    """Leave a stale partition's share of the batch to the consumer that counted on from the stored offset."""
    logger.warning(
        "%s: offset %d is stored, past this batch's first offset %d: another consumer took the partition; "
        "the batch is not counted here",
        partition,
        stored,
        parsed.first_offsets[partition],
    )
    parsed.events.pop(partition, None)
    parsed.counters.pop(partition, None)
    parsed.next_offsets.pop(partition, None)
    parsed.dead_letters = [d for d in parsed.dead_letters if (d.source, d.partition) != partition]
