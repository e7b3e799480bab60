"""The ingest pipeline for one polled batch: validate, archive, pre-aggregate, apply to Redis with offsets.

``process_batch`` is what the ``consume`` command calls for every poll, and what tests call directly.
Exactly-once: each Kafka partition's counter updates and its next offset go to Redis in one MULTI/EXEC; on
(re)start the consumer seeks to the offsets stored there, so a batch is either fully counted and skipped, or
not counted and read again. The archive and the dead-letter table are idempotent, so a re-read is harmless.
"""

import datetime as dt
import logging
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.utils import timezone
from django_redis import get_redis_connection

from loginlog.realtime import queue_logins
from partners.selectors import Lineage, partner_lineages
from stats import faults, keys
from stats.archive import get_archive
from stats.conf import stats_setting
from stats.events import Event, Login, PageView, Reason, Rejected, parse_event
from stats.models import DeadLetter
from stats.rankings import queue_rankings
from stats.realtime import queue_page_views
from stats.series import queue_series

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Message:
    """One message as read from Kafka (or one line of a replay file)."""

    source: str  # the Kafka topic, or file:PATH
    partition: int
    offset: int
    value: bytes | None


@dataclass
class BatchResult:
    counted: int = 0
    dead: Counter[str] = field(default_factory=Counter)

    def add(self, other: "BatchResult") -> None:
        self.counted += other.counted
        self.dead.update(other.dead)

    def summary(self) -> str:
        dead = ", ".join(f"{reason} {n}" for reason, n in sorted(self.dead.items())) or "none"
        return f"counted {self.counted} events; dead letters: {dead}"


class PartnerDirectory:
    """Partner lineages cached in the process; reloaded periodically and when an unknown code shows up."""

    def __init__(self) -> None:
        self._lineages: dict[str, Lineage] = {}
        self._loaded_at = float("-inf")

    def lineages(self, *, force: bool = False) -> dict[str, Lineage]:
        if force or time.monotonic() - self._loaded_at > stats_setting("PARTNER_CACHE_SECONDS"):
            self._lineages = partner_lineages()
            self._loaded_at = time.monotonic()
        return self._lineages


def _queue_other_features(pipe, events: list[Event], now: dt.datetime) -> None:
    """Queue what rankings, time series and logins take from the same pre-aggregated batch."""
    views = [e for e in events if isinstance(e, PageView)]
    queue_rankings(pipe, views, now=now)
    queue_series(pipe, views)
    queue_logins(pipe, [e for e in events if isinstance(e, Login)])


def process_batch(
    messages: Sequence[Message],
    *,
    group: str,
    directory: PartnerDirectory | None = None,
    now: dt.datetime | None = None,
) -> BatchResult:
    """Count ``messages`` exactly once; store what cannot be counted as dead letters. Return the tally."""
    now = now or timezone.now()
    directory = directory or PartnerDirectory()
    result = BatchResult()
    lineages = directory.lineages()
    refreshed = False
    events_by_partition: defaultdict[tuple[str, int], list[Event]] = defaultdict(list)
    dead_by_partition: defaultdict[tuple[str, int], Counter[str]] = defaultdict(Counter)
    next_offsets: dict[tuple[str, int], int] = {}
    dead_letters: list[DeadLetter] = []
    for message in messages:
        where = (message.source, message.partition)
        next_offsets[where] = max(next_offsets.get(where, 0), message.offset + 1)
        try:
            try:
                event = parse_event(message.value, lineages=lineages, now=now)
            except Rejected as rejected:
                if rejected.reason != Reason.UNKNOWN_PARTNER or refreshed:
                    raise
                # The partner may have been created since the cache was loaded: reload once per batch.
                lineages, refreshed = directory.lineages(force=True), True
                event = parse_event(message.value, lineages=lineages, now=now)
        except Rejected as rejected:
            dead_by_partition[where][rejected.reason] += 1
            dead_letters.append(
                DeadLetter(
                    source=message.source,
                    partition=message.partition,
                    offset=message.offset,
                    reason=rejected.reason,
                    detail=rejected.detail[:500],
                    raw=message.value or b"",
                )
            )
            continue
        events_by_partition[where].append(event)

    get_archive().store(e for events in events_by_partition.values() for e in events)
    DeadLetter.objects.bulk_create(dead_letters, ignore_conflicts=True, batch_size=500)
    faults.reach("after_archive")

    client = get_redis_connection("default")
    for where, next_offset in next_offsets.items():
        source, partition = where
        events = events_by_partition.get(where, [])
        pipe = client.pipeline(transaction=True)
        queue_page_views(
            pipe, (e for e in events if isinstance(e, PageView)), generation=uuid.uuid4().hex[:12]
        )
        _queue_other_features(pipe, events, now)
        for reason, n in dead_by_partition[where].items():
            pipe.hincrby(keys.dead_letter_counts(), reason, n)
        pipe.hset(keys.offsets(group, source), str(partition), next_offset)
        pipe.execute()
        result.counted += len(events)
        result.dead.update(dead_by_partition[where])
        faults.reach("after_redis")
    if result.dead:
        logger.warning("batch: %s", result.summary())
    return result


def stored_offsets(*, group: str, source: str) -> dict[int, int]:
    """Return the next offset to read per partition, as stored with the counters."""
    raw = get_redis_connection("default").hgetall(keys.offsets(group, source))
    return {int(partition): int(offset) for partition, offset in raw.items()}
