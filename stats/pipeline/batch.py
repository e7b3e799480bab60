"""A polled batch and its parsing: the messages, the partitions they came from, events and dead letters.

``parse_batch`` is the CPU-bound half of ``ingest.process_batch``: it reads and writes no counter, so the
consumer parses the next batch while the one before is counted. Every message ends as an event to count, a
dead letter with its reason, or a ``BatchGap`` the partition's offset moves past.
"""

import datetime as dt
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from itertools import groupby
from operator import attrgetter
from typing import NamedTuple, cast

from django.utils import timezone

from partners.selectors import Lineage, partner_lineages
from stats.conf import stats_setting
from stats.models import DeadLetter
from stats.pipeline.batch_gaps import BatchGap
from stats.pipeline.events import EventReader, PageView, Reason, Rejected
from stats.pipeline.isolation import retry_while_unavailable
from stats.pipeline.registry import CounterWrites, Event

logger = logging.getLogger(__name__)


class Message(NamedTuple):
    """One message as read from Kafka (or one line of a replay file); a tuple, made per record cheaply."""

    source: str  # the Kafka topic, or file:PATH
    partition: int
    offset: int
    value: "bytes | BatchGap | None"  # a BatchGap: a record batch that holds no event (batch_gaps)


class Partition(NamedTuple):
    """One partition of a source: a Kafka topic's, or a replay file's only one (0)."""

    source: str
    number: int

    def __str__(self) -> str:
        return f"{self.source}[{self.number}]"


class CountedEvent(NamedTuple):
    """An event to count, with where it was read (its ``Message`` without the value: ``event.payload`` holds it)."""

    message: Message
    event: Event


# Make a Message and a CountedEvent from a tuple in C: the generated ``__new__`` is a Python call, and the
# consumer makes two Messages and a CountedEvent per event.
new_message = partial(tuple.__new__, Message)
new_counted_event = partial(tuple.__new__, CountedEvent)


class PartnerDirectory:
    """Partner lineages cached in the process; reloaded periodically and when an unknown code shows up.

    A code still unknown after a reload is remembered until the next periodic reload, so a stream of events
    naming a partner that does not exist costs one reload, not one per batch.
    """

    def __init__(self) -> None:
        self._lineages: dict[str, Lineage] = {}
        self._loaded_at = float("-inf")
        self._missing: set[str] = set()

    def lineages(self, *, force: bool = False) -> dict[str, Lineage]:
        if force or time.monotonic() - self._loaded_at > stats_setting("PARTNER_CACHE_SECONDS"):
            self._lineages = partner_lineages()
            self._loaded_at = time.monotonic()
            self._missing = set()
        return self._lineages

    def worth_reloading_for(self, code: str) -> bool:
        """Whether a reload may find ``code`` (it was not missing from the last reload)."""
        return code not in self._missing

    def note_missing(self, code: str) -> None:
        self._missing.add(code)


@dataclass
class ParsedBatch:
    """A batch after parsing: per partition, the events to count and the dead letters to store."""

    now: dt.datetime  # the batch's moment: the accepted time span and the counters' windows are read from it
    started: float  # time.monotonic() when parsing began
    events: defaultdict[Partition, list[CountedEvent]] = field(default_factory=lambda: defaultdict(list))
    dead_letters: list[DeadLetter] = field(default_factory=list)
    next_offsets: dict[Partition, int] = field(default_factory=dict)
    first_offsets: dict[Partition, int] = field(default_factory=dict)
    # per partition, its counters' commands (``build_counters``), queued on its MULTI/EXEC when it is applied
    counters: dict[Partition, CounterWrites] = field(default_factory=dict)
    set_aside_by_counting: list[str] = field(default_factory=list)  # event ids
    # the archive's worker storing the events already (``archive_in_background``): its refusals, when done
    archiving: Future | None = None

    def reject(self, message: Message, reason: str, detail: str) -> None:
        self.dead_letters.append(
            DeadLetter(
                source=message.source,
                partition=message.partition,
                offset=message.offset,
                reason=reason,
                detail=detail[:500],
                raw=message.value or b"",
            )
        )

    def pass_gap(self, message: Message) -> None:
        """Move the partition past a record batch that holds no event; an unreadable one becomes a dead letter."""
        gap = cast(BatchGap, message.value)
        partition = Partition(message.source, message.partition)
        self.first_offsets[partition] = min(self.first_offsets[partition], gap.first_offset)
        if gap.error is not None:
            self.reject(
                message._replace(offset=gap.first_offset, value=gap.raw), Reason.UNDECODABLE, gap.describe()
            )

    def dead_counts(self, partition: Partition) -> Counter[str]:
        return Counter(d.reason for d in self.dead_letters if (d.source, d.partition) == partition)

    def all_events(self) -> list[CountedEvent]:
        return [counted for partition in self.events.values() for counted in partition]


def _reloaded(
    directory: PartnerDirectory, *, now: dt.datetime, should_stop: Callable[[], bool]
) -> tuple[dict[str, Lineage], EventReader]:
    """The partners reloaded, and a reader of the batch's events that knows them."""
    lineages = retry_while_unavailable(
        lambda: directory.lineages(force=True), what="reloading partners", should_stop=should_stop
    )
    return lineages, EventReader(lineages=lineages, now=now)


def _with_partitions(parsed: ParsedBatch) -> ParsedBatch:
    """Note on each page view the Kafka partition it was read from: a feature that keeps state per buyer
    (conversions' attribution) gives each partition's consumer fields of its own, so that it alone writes them."""
    for partition, counted in parsed.events.items():
        for _, event in counted:
            if type(event) is PageView:
                event.partition = partition.number
    return parsed


def parse_batch(
    messages: Sequence[Message],
    *,
    directory: PartnerDirectory | None = None,
    now: dt.datetime | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> ParsedBatch:
    """Parse ``messages``: the CPU-bound half of ``process_batch``, which reads and writes no counter."""
    started = time.monotonic()
    now = now or timezone.now()
    directory = directory or PartnerDirectory()
    parsed = ParsedBatch(now=now, started=started)
    lineages = retry_while_unavailable(directory.lineages, what="loading partners", should_stop=should_stop)
    reader = EventReader(lineages=lineages, now=now)
    refreshed = False
    # A poll returns each partition's records together and in offset order: handle them a partition at a time.
    for (source, number), run in groupby(messages, key=attrgetter("source", "partition")):
        partition = Partition(source, number)
        records = list(run)
        offsets = [message.offset for message in records]
        parsed.first_offsets[partition] = min(parsed.first_offsets.get(partition, offsets[0]), min(offsets))
        parsed.next_offsets[partition] = max(parsed.next_offsets.get(partition, 0), max(offsets) + 1)
        counted = parsed.events[partition]
        for message in records:
            value = message.value
            if type(value) is BatchGap:
                parsed.pass_gap(message)
                continue
            try:
                try:
                    event = reader.read(value)
                except Rejected as rejected:
                    code = rejected.subject
                    if rejected.reason != Reason.UNKNOWN_PARTNER or not directory.worth_reloading_for(code):
                        raise
                    if not refreshed:
                        # The partner may have been created since the cache was loaded: reload once per batch.
                        lineages, reader = _reloaded(directory, now=now, should_stop=should_stop)
                        refreshed = True
                    if code not in lineages:
                        directory.note_missing(code)
                        raise
                    event = reader.read(value)
            except Rejected as rejected:
                parsed.reject(message, rejected.reason, rejected.detail)
                continue
            except Exception as exc:  # a bug in the parser must not stop all counting: keep the message
                logger.exception(
                    "the parser failed on %s[%d]@%d", message.source, message.partition, message.offset
                )
                parsed.reject(message, Reason.PARSE_ERROR, f"{type(exc).__name__}: {exc}")
                continue
            # Without its value: the event's payload is the same bytes decoded, and a batch in flight holds
            # thousands of them (``_set_aside`` encodes the payload again for a dead letter).
            counted.append(
                new_counted_event(
                    (new_message((message.source, message.partition, message.offset, None)), event)
                )
            )
    return _with_partitions(parsed)
