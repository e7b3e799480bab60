"""Building a parsed batch's counter commands, per Kafka partition: CPU only, no Redis.

Every registered counter (``stats.pipeline.registry``) queues its commands on a partition's ``CounterWrites``;
here they are recorded in memory (``RecordedCommands``) and queued on the partition's MULTI/EXEC when it is
applied with its offset (``stats.pipeline.offsets``). An event the counter code refuses on its own is found by
bisecting the partition's events and set aside as a dead letter (``stats.pipeline.set_aside``).
"""

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

from cpsproject.common import faults
from stats.pipeline import metrics
from stats.pipeline.batch import CountedEvent, ParsedBatch, Partition
from stats.pipeline.isolation import isolate_failures
from stats.pipeline.partitions import queue_new_version, queue_register
from stats.pipeline.registry import CommandRecorder, CounterWrites, Event, counted_types, queue_counters
from stats.pipeline.set_aside import set_aside


class RecordedCommands:
    """Pipeline commands queued in memory, then queued on a real pipeline as often as one is built.

    Counters only queue commands and read no reply, so a partition's counters need no Redis to be built: the
    consumer builds a batch's while the batch before waits for Redis, and an apply retried after an outage or
    a moved fence queues the same commands again instead of counting the batch again. Scripts come as
    ``execute_command("EVAL", …)`` (``cpsproject.common.lua.LuaScript``), like any other command.
    """

    def __init__(self) -> None:
        self._calls: list[tuple[str, tuple, dict]] = []

    def __getattr__(self, name: str) -> Callable[..., "RecordedCommands"]:
        def queue(*args: Any, **kwargs: Any) -> "RecordedCommands":
            self._calls.append((name, tuple(_exact(arg) for arg in args), kwargs))
            return self

        return queue

    def __bool__(self) -> bool:
        return bool(self._calls)

    def queue_on(self, pipe: CommandRecorder) -> None:
        for name, args, kwargs in self._calls:
            getattr(pipe, name)(*args, **kwargs)


def _exact(arg: Any) -> Any:
    """``arg``, with a bytes argument copied to a buffer of its own size.

    orjson returns its output in the buffer it grew while writing, which can be many times the document: a
    batch's recorded commands wait their turn behind the batch before, so each keeps only its own bytes.
    """
    return bytes(memoryview(arg)) if type(arg) is bytes else arg


def _queue_counters(writes: CounterWrites, events: Sequence[Event], now: dt.datetime) -> None:
    """Queue what every registered counter takes from one partition's events."""
    faults.fail_for(events, point="count")
    queue_counters(writes, events, now=now)


def _recorded_writes(partition: Partition, parsed: ParsedBatch | None = None) -> CounterWrites:
    """``parsed``: the batch whose share these are, for its offsets; None for a trial run (``isolate_failures``)."""
    first, following = (
        (parsed.first_offsets[partition], parsed.next_offsets[partition]) if parsed else (None, None)
    )
    writes = CounterWrites(
        partition.number,
        fenced=RecordedCommands(),
        idempotent=RecordedCommands(),
        first_offset=first,
        next_offset=following,
    )
    # Before the offset moves: whoever reads the partition's counters finds it listed.
    queue_register(writes.idempotent, partition.number)
    return writes


def unfenced_writes(pipe: CommandRecorder, partition: int = 0) -> CounterWrites:
    """Counter writes straight onto the pipeline ``pipe``, with no offset to move them with: for tools that fill
    Redis without a Kafka source (the bench, tests racing a flush). The partition's new version goes first on
    the pipeline, which is no transaction: a reader that runs in the middle of it may keep what it read until
    the next write."""
    queue_register(pipe, partition)
    queue_new_version(pipe, partition)
    return CounterWrites(partition, fenced=pipe, idempotent=pipe)


def _record_counters(parsed: ParsedBatch, partition: Partition) -> CounterWrites:
    writes = _recorded_writes(partition, parsed)
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
    set_aside(parsed, refused, "counting")
    parsed.counters[partition] = _record_counters(parsed, partition)


def build_counters(parsed: ParsedBatch) -> None:
    """Record each partition's counter commands, for the partitions that have none yet."""
    for partition in parsed.next_offsets:
        if partition not in parsed.counters:
            _build_partition_counters(parsed, partition)


def take_out_of_counters(parsed: ParsedBatch, left: Sequence[CountedEvent]) -> None:
    """Take events that left their share after its counters were built out of them: a share that lost an event
    some counter counts is built again; one that lost only events no counter counts (the orders a recorder
    refused) keeps its commands and takes the events out of the events-counted metric, in the same MULTI/EXEC.
    Building a share again cost a fifth of the counting thread when orders flowed (one refusal a batch is
    usual), and forgot the quality counter's memory of the share's views."""
    counted = counted_types()
    by_share: dict[Partition, list[CountedEvent]] = {}
    for event in left:
        by_share.setdefault(Partition(event.message.source, event.message.partition), []).append(event)
    for partition, events in by_share.items():
        if any(c.event.type in counted for c in events):
            _build_partition_counters(parsed, partition)
        else:
            metrics.record_counted(parsed.counters[partition], events, sign=-1)
