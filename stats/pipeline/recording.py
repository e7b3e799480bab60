"""The recorders' step of a batch: features that keep their events in the database (orders) write them there.

Each recorder (``registry.register_recorder``) gets the batch's events of its type, all partitions, in ``ts``
order, and every event of the batch by type (an order is attributed by the page views before it). It writes in
one transaction with unique event ids, so a batch read again records nothing twice. What it refuses becomes a
dead letter with its reason; what fails it on its own (found by bisecting) an ``unstorable`` one. Either leaves
the batch and is taken back from the archive, so that the archive holds what was counted.
"""

from collections.abc import Callable, Sequence
from operator import attrgetter

from stats.pipeline import counting, set_aside, storing
from stats.pipeline.archive import get_archive
from stats.pipeline.batch import CountedEvent, ParsedBatch
from stats.pipeline.isolation import isolate_failures, retry_while_unavailable
from stats.pipeline.registry import Event, record_events, recorded_types

_ts = attrgetter("ts")


def _by_type(events: Sequence[Event]) -> dict[str, list[Event]]:
    by_type: dict[str, list[Event]] = {}
    for event in sorted(events, key=_ts):
        by_type.setdefault(event.type, []).append(event)
    return by_type


def _record(
    parsed: ParsedBatch,
) -> tuple[list[tuple[CountedEvent, str, str]], list[tuple[CountedEvent, BaseException]]]:
    """Run the recorders; return their refusals and the events that failed them on their own."""
    everything = parsed.all_events()
    counted_of = {id(c.event): c for c in everything}
    batch = _by_type([c.event for c in everything])
    types = recorded_types()
    refusals: list[tuple[CountedEvent, str, str]] = []

    def record(some: Sequence[CountedEvent]) -> None:
        refused = record_events({**batch, **_by_type([c.event for c in some])})
        refusals.extend((counted_of[id(r.event)], r.reason, r.detail) for r in refused)

    failures = isolate_failures([c for c in everything if c.event.type in types], record)
    return refusals, failures


def record(parsed: ParsedBatch, *, should_stop: Callable[[], bool]) -> None:
    """Record the batch's events of every registered recorder; set aside and store what they refused."""
    if not recorded_types() or not any(c.event.type in recorded_types() for c in parsed.all_events()):
        return
    refusals, failures = retry_while_unavailable(
        lambda: _record(parsed), what="recorders", should_stop=should_stop
    )
    if not refusals and not failures:
        return
    before = len(parsed.dead_letters)
    set_aside.refuse(parsed, refusals)
    set_aside.set_aside(parsed, failures, "recording")
    counting.take_out_of_counters(parsed, [c for c, _, _ in refusals] + [c for c, _ in failures])
    taken_back = [c.event.event_id for c, _, _ in refusals] + [c.event.event_id for c, _ in failures]
    new_letters = parsed.dead_letters[before:]

    def take_back() -> None:
        get_archive().discard(taken_back)
        storing.store_dead_letters(new_letters)

    retry_while_unavailable(take_back, what="recorders' dead letters", should_stop=should_stop)
