"""A batch's path, step after step from one place: parse, archive and build the counters, set aside what a
stage refused and store the dead letters, then apply each partition's counters with its offset.

``process_batch`` (``parse_batch`` then ``count_batch``) is what tests and tools call; the consumer calls the
two halves itself, to parse the next batch while this one is counted. Each step lives in its own module, and
none calls back into another:

==========================  ==========================================================
``batch.parse_batch``       messages -> events per partition, dead letters, offsets
``counting``                the counters' commands, recorded in memory (no Redis)
``storing``                 the raw-event archive and the dead-letter table
``set_aside``               what a stage refused, and partitions another consumer owns
``recording``               what features keep in the database (orders), in one transaction
``offsets``                 each partition's MULTI/EXEC: counters, dead-letter counts, offset
==========================  ==========================================================

Exactly-once: each Kafka partition's counter updates and its next offset go to Redis in one MULTI/EXEC; on
(re)start the consumer seeks to the offsets stored there, so a batch is either fully counted and skipped, or
not counted and read again. The archive, the dead-letter table and the recorders' tables are idempotent, so a
re-read is harmless.
"""

import datetime as dt
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from django_redis import get_redis_connection

from cpsproject.common import faults
from stats.pipeline import counting, metrics, offsets, recording, set_aside, storing
from stats.pipeline.batch import CountedEvent, Message, ParsedBatch, Partition, PartnerDirectory, parse_batch
from stats.pipeline.counting import build_counters, unfenced_writes
from stats.pipeline.isolation import retry_while_unavailable
from stats.pipeline.offsets import stored_offsets
from stats.pipeline.registry import RedisClient

# The pipeline's front door: what tools and tests take from here, wherever it lives.
__all__ = [
    "BatchResult",
    "Message",
    "PartnerDirectory",
    "build_counters",
    "count_batch",
    "parse_batch",
    "process_batch",
    "stored_offsets",
    "unfenced_writes",
]

logger = logging.getLogger(__name__)


@dataclass
class BatchResult:
    counted: int = 0
    dead: Counter[str] = field(default_factory=Counter)
    # partitions whose share was not counted, because Redis holds a later offset for them: where to read on
    stale: dict[Partition, int] = field(default_factory=dict)
    # the next offset stored with the counters, per partition counted
    next_offsets: dict[Partition, int] = field(default_factory=dict)
    drained: str | None = None  # the topic ``consume --exit-when-idle`` found counted to its end offsets

    def add(self, other: "BatchResult") -> None:
        self.counted += other.counted
        self.dead.update(other.dead)
        self.stale.update(other.stale)
        self.next_offsets.update(other.next_offsets)

    def summary(self) -> str:
        dead = ", ".join(f"{reason} {n}" for reason, n in sorted(self.dead.items())) or "none"
        drained = (
            f"; topic {self.drained} drained: every partition counted to its end offset"
            if self.drained
            else ""
        )
        return f"counted {self.counted} events; dead letters: {dead}{drained}"


def process_batch(
    messages: Sequence[Message],
    *,
    group: str,
    directory: PartnerDirectory | None = None,
    now: dt.datetime | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    archive_concurrently: bool = False,
) -> BatchResult:
    """Count ``messages`` exactly once; store what cannot be counted as dead letters. Return the tally.

    ``parse_batch`` then ``count_batch``; the consumer calls the two itself, to parse the next batch while
    this one is counted.
    """
    parsed = parse_batch(messages, directory=directory, now=now, should_stop=should_stop)
    return count_batch(
        parsed, group=group, should_stop=should_stop, archive_concurrently=archive_concurrently
    )


def count_batch(
    parsed: ParsedBatch,
    *,
    group: str,
    should_stop: Callable[[], bool] = lambda: False,
    archive_concurrently: bool = False,
) -> BatchResult:
    """Archive a parsed batch, store its dead letters and apply its counters with each partition's offset.

    1. Drop the partitions whose stored offset is past the batch (another consumer counted them on).
    2. Build the counters' commands and archive the events: from the archive's worker thread, with its own
       database connection, when the consumer started it or ``archive_concurrently`` asks (callers inside a
       transaction of their own, tests, leave it off); the counters refuse an event before it is archived,
       or the worker's copy is taken back.
    3. Events the archive refused on their own become ``unstorable`` dead letters; store the dead letters.
    4. The recorders write their events to the database, idempotently (``recording.record``); what they
       refuse becomes a dead letter, out of the archive and the counters.
    5. Per partition, one MULTI/EXEC: counters, dead-letter counts and the next offset
       (``offsets.apply_with_offset``).

    A service that is unreachable is waited for (``should_stop`` ends the wait); an event that a stage
    refuses on its own is found by bisecting the batch.
    """
    client = get_redis_connection("default")
    result = BatchResult()
    # step 1
    _drop_stale_partitions(client, parsed, result, group=group, should_stop=should_stop)
    # step 2
    refused = _archive_and_build_counters(parsed, should_stop=should_stop, concurrently=archive_concurrently)
    # step 3
    _set_aside_and_store_dead_letters(parsed, refused, should_stop=should_stop)
    # step 4
    recording.record(parsed, should_stop=should_stop)
    faults.reach("after_recording")
    # step 5
    for partition in list(parsed.next_offsets):
        _apply_partition(client, parsed, result, partition, group=group, should_stop=should_stop)
    if result.dead:
        logger.warning("batch: %s", result.summary())
    metrics.record_batch_duration(time.monotonic() - parsed.started)
    return result


def _drop_stale_partitions(
    client: RedisClient,
    parsed: ParsedBatch,
    result: BatchResult,
    *,
    group: str,
    should_stop: Callable[[], bool],
) -> None:
    """Step 1. Checked before anything is stored, so that a batch known to be stale is neither archived nor
    dead-lettered here; step 5 checks again under WATCH, which is what keeps a batch from counting twice."""
    stale = retry_while_unavailable(
        lambda: offsets.stale_partitions(client, group=group, first_offsets=parsed.first_offsets),
        what="Redis offset check",
        should_stop=should_stop,
    )
    for partition, stored in stale.items():
        set_aside.drop_stale(parsed, partition, stored)
        result.stale[partition] = stored


def _archive_and_build_counters(
    parsed: ParsedBatch, *, should_stop: Callable[[], bool], concurrently: bool
) -> list[tuple[CountedEvent, BaseException]]:
    """Step 2: return the events the archive refused on their own."""
    if concurrently and parsed.archiving is None:
        storing.archive_in_background(parsed, should_stop=should_stop)
    # While the worker inserts (its driver releases the GIL), unless the consumer built them already.
    counting.build_counters(parsed)
    return storing.archive(parsed, should_stop=should_stop)


def _set_aside_and_store_dead_letters(
    parsed: ParsedBatch, refused: list[tuple[CountedEvent, BaseException]], *, should_stop: Callable[[], bool]
) -> None:
    """Step 3."""
    set_aside.set_aside(parsed, refused, "archive")
    counting.take_out_of_counters(parsed, [c for c, _ in refused])
    retry_while_unavailable(
        lambda: storing.store_dead_letters(parsed.dead_letters), what="dead letters", should_stop=should_stop
    )
    faults.reach("after_archive")


def _apply_partition(
    client: RedisClient,
    parsed: ParsedBatch,
    result: BatchResult,
    partition: Partition,
    *,
    group: str,
    should_stop: Callable[[], bool],
) -> None:
    """Step 5, for one partition: its counters and dead-letter counts with its next offset, or left to the
    consumer that stored an offset past the batch."""
    next_offset = parsed.next_offsets[partition]
    dead = parsed.dead_counts(partition)
    stored = retry_while_unavailable(
        partial(
            offsets.apply_with_offset,
            client,
            group=group,
            partition=partition,
            first_offset=parsed.first_offsets[partition],
            next_offset=next_offset,
            writes=parsed.counters[partition],
            dead=dead,
        ),
        what=f"Redis apply of {partition}",
        should_stop=should_stop,
    )
    if stored is not None and stored != next_offset:  # equal: applied before the connection dropped
        set_aside.drop_stale(parsed, partition, stored)
        result.stale[partition] = stored
        return
    result.counted += len(parsed.events.get(partition, []))
    result.dead.update(dead)
    result.next_offsets[partition] = next_offset
    faults.reach("after_redis")
