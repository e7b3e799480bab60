"""What the ingest pipeline walks: the event types it can parse and the counters each batch feeds.

Apps register in ``AppConfig.ready()`` through ``stats.plugins`` (``stats`` its page views, rankings and series;
``loginlog`` its logins), so the pipeline knows no feature by name and no app imports another's insides.
"""

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from partners.selectors import Lineage


class Event(Protocol):
    """What the pipeline and the archive need of every event; each type adds its own fields."""

    type: str
    event_id: str
    ts: dt.datetime
    seconds: int  # ts in whole epoch seconds
    payload: str  # the message value as received (valid UTF-8 JSON)


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
# queue(pipe, events of the counter's type, now=...) queues Redis commands for the partition's MULTI/EXEC. It
# reads no reply: ``pipe`` records the commands, which are queued on the real pipeline when the batch is applied.
CounterQueue = Callable[..., None]


@dataclass(frozen=True)
class CounterSpec:
    name: str
    event_type: str
    queue: CounterQueue


_parsers: dict[str, EventParser] = {}
_counters: dict[str, CounterSpec] = {}


def register_event_type(name: str, parse: EventParser) -> None:
    _parsers[name] = parse


def register_counter(name: str, *, event_type: str, queue: CounterQueue) -> None:
    """Register (or replace: ``ready()`` may run twice) the counter ``name`` fed with events of ``event_type``."""
    _counters[name] = CounterSpec(name, event_type, queue)


def event_parser(name: str) -> EventParser | None:
    return _parsers.get(name)


def event_types() -> list[str]:
    return sorted(_parsers)


def queue_counters(pipe, events: Sequence[Event], *, now: dt.datetime) -> None:
    """Queue what every registered counter takes from ``events`` on ``pipe``."""
    by_type: dict[str, list[Event]] = {}
    for event in events:
        by_type.setdefault(event.type, []).append(event)
    for spec in _counters.values():
        spec.queue(pipe, by_type.get(spec.event_type, []), now=now)
