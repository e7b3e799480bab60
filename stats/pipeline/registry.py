"""What the ingest pipeline walks: the event types it can parse and the counters each batch feeds.

Apps register in ``AppConfig.ready()`` through ``stats.plugins`` (``stats`` its page views, rankings and series;
``loginlog`` its logins), so the pipeline knows no feature by name and no app imports another's insides.
"""

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from redis.client import Pipeline, Redis
from redis.cluster import ClusterPipeline, RedisCluster

from partners.selectors import Lineage
from stats import keys


class Event(Protocol):
    """What the pipeline and the archive read of every event; each type adds its own fields.

    Read-only: an event type may be a frozen dataclass, and its ``type`` a class attribute.
    """

    @property
    def type(self) -> str: ...
    @property
    def event_id(self) -> str: ...
    @property
    def ts(self) -> dt.datetime: ...
    @property
    def seconds(self) -> int: ...  # ts in whole epoch seconds
    @property
    def payload(self) -> str: ...  # the message value as received (valid UTF-8 JSON)


# Made once per event: not frozen, whose field-by-field object.__setattr__ costs more than the rest of it.
@dataclass(slots=True)
class Envelope:
    """The fields every event has, checked before the type's own parser reads the rest of the payload."""

    event_id: str
    ts: dt.datetime
    seconds: int  # ts in whole epoch seconds
    text: str
    lineages: Mapping[str, Lineage]
    reader: Any = None  # the batch's EventReader: options a type's parser may read resolved once per batch


# parse(payload, envelope) -> an event, or raise Rejected.
EventParser = Callable[[dict[str, Any], Envelope], Event]
# queue(writes, events of the counter's type, now=...) queues the Redis commands of one Kafka partition's share
# of a batch on ``writes`` (a ``CounterWrites``). It reads no reply: the commands are recorded, and sent when
# the batch is applied.
CounterQueue = Callable[..., None]


class CommandRecorder(Protocol):
    """A redis-py pipeline, or one that only records its commands (scripts too: ``LuaScript.queue``)."""

    def execute_command(self, *args: Any, **options: Any) -> Any: ...

    def __getattr__(self, name: str) -> Any: ...


# A Redis client: one server's, or a Redis Cluster's (``REDIS_CLUSTER=1``).
RedisClient: TypeAlias = Redis | RedisCluster
# Where commands are queued: a redis-py pipeline, or one that only records them.
CommandQueue: TypeAlias = CommandRecorder | Pipeline | ClusterPipeline


@dataclass(frozen=True, slots=True)
class CounterWrites:
    """Where a counter queues the writes of one Kafka partition's share of a batch.

    ``fenced``: commands applied in the partition's MULTI/EXEC together with its next offset, so they count
    exactly once. Every key they touch carries the partition's hash tag (``stats.keys.partition_tag``): on a
    Redis Cluster a transaction lives in one slot. Increments (not idempotent) go here.

    ``idempotent``: commands applied just before that transaction, in any slots: a batch read again replays
    them, so they must change nothing the second time (PFADD, SETBIT, SADD, ZADD of the same score).
    """

    partition: int
    fenced: CommandRecorder
    idempotent: CommandRecorder
    # The share's first offset and the offset after it, when it was read from Kafka (None for tools and for the
    # trial runs that bisect a batch): a counter that keeps state in memory from batch to batch tells by them
    # whether a batch follows the one before it or is read again.
    first_offset: int | None = None
    next_offset: int | None = None

    @property
    def tag(self) -> str:
        """The partition's hash tag, which every key written to ``fenced`` carries."""
        return keys.partition_tag(self.partition)


@dataclass(frozen=True)
class CounterSpec:
    name: str
    event_type: str
    queue: CounterQueue


@dataclass(frozen=True, slots=True)
class Refusal:
    """An event a recorder would not record: it becomes a dead letter with ``reason`` and ``detail``."""

    event: Event
    reason: str
    detail: str


# record(events of the recorder's type in ts order, *, batch=every event of the batch by type, in ts order)
# -> the events it refused. It writes to the database idempotently (unique event ids, one transaction), so
# a batch read again after a crash records nothing twice and refuses the same events.
Recorder = Callable[..., Sequence[Refusal]]


@dataclass(frozen=True)
class RecorderSpec:
    name: str
    event_type: str
    record: Recorder


_parsers: dict[str, EventParser] = {}
_counters: dict[str, CounterSpec] = {}
_recorders: dict[str, RecorderSpec] = {}
# upgrade(client) -> keys moved: moves an app's keys written by an earlier version to its current layout
_layout_upgrades: dict[str, Callable[[Any], int]] = {}


def register_event_type(name: str, parse: EventParser) -> None:
    _parsers[name] = parse


def register_counter(name: str, *, event_type: str, queue: CounterQueue) -> None:
    """Register (or replace: ``ready()`` may run twice) the counter ``name`` fed with events of ``event_type``."""
    _counters[name] = CounterSpec(name, event_type, queue)


def register_recorder(name: str, *, event_type: str, record: Recorder) -> None:
    """Register (or replace) the recorder ``name``, which writes the events of ``event_type`` to the database
    after the archive and before the counters (``stats.pipeline.recording``)."""
    _recorders[name] = RecorderSpec(name, event_type, record)


def register_layout_upgrade(name: str, upgrade: Callable[[Any], int]) -> None:
    """Register the function that moves app ``name``'s Redis keys of an earlier layout (run by
    ``stats.jobs.layout.upgrade_layout`` before anything counts or flushes)."""
    _layout_upgrades[name] = upgrade


def layout_upgrades() -> dict[str, Callable[[Any], int]]:
    return dict(_layout_upgrades)


def event_parser(name: str) -> EventParser | None:
    return _parsers.get(name)


def event_types() -> list[str]:
    return sorted(_parsers)


def queue_counters(writes: CounterWrites, events: Sequence[Event], *, now: dt.datetime) -> None:
    """Queue what every registered counter takes from one partition's ``events`` on ``writes``."""
    by_type: dict[str, list[Event]] = {}
    for event in events:
        by_type.setdefault(event.type, []).append(event)
    for spec in _counters.values():
        spec.queue(writes, by_type.get(spec.event_type, []), now=now)


def counted_types() -> set[str]:
    return {spec.event_type for spec in _counters.values()}


def recorded_types() -> set[str]:
    return {spec.event_type for spec in _recorders.values()}


def record_events(by_type: Mapping[str, Sequence[Event]]) -> list[Refusal]:
    """Hand each registered recorder its type's events (when there are any); return what they refused."""
    refused: list[Refusal] = []
    for spec in _recorders.values():
        if events := by_type.get(spec.event_type):
            refused.extend(spec.record(events, batch=by_type))
    return refused
