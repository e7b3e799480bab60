"""Counting one parsed batch exactly once: the counters' commands, the stores, the apply to Redis with offsets.

``process_batch`` (``batch.parse_batch`` then ``count_batch``) is what tests call directly; the consumer calls
the two halves itself. Exactly-once: each Kafka partition's counter updates and its next offset go to Redis in
one MULTI/EXEC; on (re)start the consumer seeks to the offsets stored there, so a batch is either fully counted
and skipped, or not counted and read again. The archive and the dead-letter table (``storing``) are
idempotent, so a re-read is harmless.
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
from stats.pipeline import metrics, offsets
from stats.pipeline.archive import get_archive
from stats.pipeline.batch import CountedEvent, Message, ParsedBatch, Partition, PartnerDirectory, parse_batch
from stats.pipeline.events import Reason
from stats.pipeline.isolation import isolate_failures, retry_while_unavailable
from stats.pipeline.offsets import stored_offsets  # noqa: F401  (callers import it from here)
from stats.pipeline.partitions import queue_new_version, queue_register
from stats.pipeline.registry import CounterWrites, Event, queue_counters
from stats.pipeline.storing import archive_in_background, archive_refusals, store_dead_letters

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


def _queue_counters(writes: CounterWrites, events: Sequence[Event], now: dt.datetime) -> None:
    """Queue what every registered counter takes from one partition's events."""
    faults.fail_for(events, point="count")
    queue_counters(writes, events, now=now)


def _set_aside(parsed: ParsedBatch, failures: list[tuple[CountedEvent, BaseException]], stage: str) -> None:
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


class RecordedCommands:
    """Pipeline commands queued in memory, then queued on a real pipeline as often as one is built.

    Counters only queue commands and read no reply, so a partition's counters need no Redis to be built: the
    consumer builds a batch's while the batch before waits for Redis, and an apply retried after an outage or
    a moved fence queues the same commands again instead of counting the batch again. Scripts come as
    ``execute_command("EVAL", …)`` (``cpsproject.common.lua.LuaScript``), like any other command.
    """

    def __init__(self) -> None:
        self._calls: list[tuple[str, tuple, dict]] = []

    def __getattr__(self, name: str):
        def queue(*args, **kwargs):
            self._calls.append((name, tuple(_exact(arg) for arg in args), kwargs))
            return self

        return queue

    def __bool__(self) -> bool:
        return bool(self._calls)

    def queue_on(self, pipe) -> None:
        for name, args, kwargs in self._calls:
            getattr(pipe, name)(*args, **kwargs)


def _exact(arg):
    """``arg``, with a bytes argument copied to a buffer of its own size.

    orjson returns its output in the buffer it grew while writing: a 24 KB document held ~1 MB (tracemalloc).
    Sent at once that did not matter; held while the batch waits its turn it made a batch's recorded counters
    22.5 MB instead of 4.
    """
    return bytes(memoryview(arg)) if type(arg) is bytes else arg


def _recorded_writes(partition: Partition) -> CounterWrites:
    writes = CounterWrites(partition.number, fenced=RecordedCommands(), idempotent=RecordedCommands())
    # Before the offset moves: whoever reads the partition's counters finds it listed.
    queue_register(writes.idempotent, partition.number)
    return writes


def unfenced_writes(pipe, partition: int = 0) -> CounterWrites:
    """Counter writes straight onto the pipeline ``pipe``, with no offset to move them with: for tools that fill
    Redis without a Kafka source (the bench, tests racing a flush). The partition's new version goes first on
    the pipeline, which is no transaction: a reader that runs in the middle of it may keep what it read until
    the next write."""
    queue_register(pipe, partition)
    queue_new_version(pipe, partition)
    return CounterWrites(partition, fenced=pipe, idempotent=pipe)


def _record_counters(parsed: ParsedBatch, partition: Partition) -> CounterWrites:
    writes = _recorded_writes(partition)
    counted = parsed.events[partition]
    _queue_counters(writes, [c.event for c in counted], parsed.now)
    metrics.record_counted(writes, counted)  # events counted, exactly once with the counters
    return writes


def _build_partition_counters(parsed: ParsedBatch, partition: Partition) -> None:
    """Record the partition's counter commands; events the counter code refuses on their own are set aside."""
    try:
        parsed.counters[partition] = _record_counters(parsed, partition)
        return
    except Exception:
        pass
    # Rare path: find the events that fail on their own, recording into throwaway commands.
    refused = isolate_failures(
        parsed.events[partition],
        lambda some: _queue_counters(_recorded_writes(partition), [c.event for c in some], parsed.now),
    )
    _set_aside(parsed, refused, "counting")
    parsed.counters[partition] = _record_counters(parsed, partition)


def build_counters(parsed: ParsedBatch) -> None:
    """Record each partition's counter commands: CPU only, no Redis (``count_batch`` does it when not done)."""
    for partition in parsed.next_offsets:
        if partition not in parsed.counters:
            _build_partition_counters(parsed, partition)


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
    4. Per partition, one MULTI/EXEC: counters, dead-letter counts and the next offset
       (``offsets.apply_with_offset``).

    A service that is unreachable is waited for (``should_stop`` ends the wait); an event that a stage
    refuses on its own is found by bisecting the batch.
    """
    client = get_redis_connection("default")
    result = BatchResult()
    # step 1
    stale = retry_while_unavailable(
        lambda: offsets.stale_partitions(client, group=group, first_offsets=parsed.first_offsets),
        what="Redis offset check",
        should_stop=should_stop,
    )
    for partition, stored in stale.items():
        _drop_stale(parsed, result, partition, stored)

    # step 2
    if archive_concurrently and parsed.archiving is None:
        archive_in_background(parsed, should_stop=should_stop)
    # While the worker inserts (its driver releases the GIL), unless the consumer built them already.
    build_counters(parsed)
    if parsed.archiving is None:
        refused = archive_refusals(parsed.all_events(), should_stop)
    else:
        refused = parsed.archiving.result()
        # An event the counters refused after the worker started is archived nowhere: take back what the
        # worker stored of it. (A stale partition's events stay: the consumer that owns it now archives the
        # same rows.)
        if taken_back := parsed.set_aside_by_counting:
            retry_while_unavailable(
                lambda: get_archive().discard(taken_back), what="archive", should_stop=should_stop
            )
        # What the counters set aside is out of the batch already.
        refused = [
            (counted, exc)
            for counted, exc in refused
            if counted in parsed.events.get(Partition(counted.message.source, counted.message.partition), ())
        ]

    # step 3
    _set_aside(parsed, refused, "archive")
    for partition in {Partition(c.message.source, c.message.partition) for c, _ in refused}:
        _build_partition_counters(parsed, partition)
    retry_while_unavailable(
        lambda: store_dead_letters(parsed.dead_letters), what="dead letters", should_stop=should_stop
    )
    faults.reach("after_archive")

    # step 4
    for partition, next_offset in list(parsed.next_offsets.items()):
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
            _drop_stale(parsed, result, partition, stored)
            continue
        result.counted += len(parsed.events.get(partition, []))
        result.dead.update(dead)
        result.next_offsets[partition] = next_offset
        faults.reach("after_redis")
    if result.dead:
        logger.warning("batch: %s", result.summary())
    metrics.record_batch_duration(time.monotonic() - parsed.started)
    return result


def _drop_stale(parsed: ParsedBatch, result: BatchResult, partition: Partition, stored: int) -> None:
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
    result.stale[partition] = stored
