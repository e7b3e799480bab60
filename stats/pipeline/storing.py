"""Where a batch's messages are kept besides the counters: the raw-event archive and the dead-letter table.

Both are idempotent (the archive shows each ``event_id`` once, dead letters are unique per Kafka coordinates),
so a batch read again after a crash stores nothing twice. Each store bisects a refused batch down to the
entries refused on their own (``isolation.isolate_failures``) and waits out an unreachable database.
"""

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache

from django.db import transaction

from cpsproject.common import faults
from stats.models import DeadLetter
from stats.pipeline.archive import get_archive
from stats.pipeline.batch import CountedEvent, ParsedBatch, Partition
from stats.pipeline.isolation import isolate_failures, retry_while_unavailable

logger = logging.getLogger(__name__)


def _archive(counted: Sequence[CountedEvent]) -> None:
    events = [c.event for c in counted]
    faults.fail_for(events, point="archive")
    with transaction.atomic():
        get_archive().store(events)


def archive_refusals(
    counted: list[CountedEvent], should_stop: Callable[[], bool]
) -> list[tuple[CountedEvent, BaseException]]:
    """Store ``counted`` in the archive; return the ones it refused on their own, with the error."""
    return retry_while_unavailable(
        lambda: isolate_failures(counted, _archive), what="archive", should_stop=should_stop
    )


@cache
def _archive_worker() -> ThreadPoolExecutor:
    # One long-lived thread: its database connection is opened once and kept, like the main thread's.
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="archive")


def archive_in_background(parsed: ParsedBatch, *, should_stop: Callable[[], bool] = lambda: False) -> None:
    """Start storing the batch's events from the archive's worker thread; ``count_batch`` waits for it.

    Batches are archived one after another in the order they are handed over, so a consumer can hand over
    the next batch while the one before is still being counted: the archive is idempotent and is committed
    before the counters that cover it, whichever batch it belongs to.
    """
    parsed.archiving = _archive_worker().submit(archive_refusals, parsed.all_events(), should_stop)


def archive(
    parsed: ParsedBatch, *, should_stop: Callable[[], bool]
) -> list[tuple[CountedEvent, BaseException]]:
    """Store the batch's events in the archive, or wait for the worker that ``archive_in_background`` started;
    return the events the archive refused on their own, with the error.

    An event the counters set aside after the worker started is archived nowhere: what the worker stored of
    it is taken back. (A stale partition's events stay: the consumer that owns it now archives the same rows.)
    """
    if parsed.archiving is None:
        return archive_refusals(parsed.all_events(), should_stop)
    refused = parsed.archiving.result()
    if taken_back := parsed.set_aside_by_counting:
        retry_while_unavailable(
            lambda: get_archive().discard(taken_back), what="archive", should_stop=should_stop
        )
    # What the counters set aside is out of the batch already.
    return [
        (counted, exc)
        for counted, exc in refused
        if counted in parsed.events.get(Partition(counted.message.source, counted.message.partition), ())
    ]


def _store_dead_letters(dead_letters: Sequence[DeadLetter]) -> None:
    with transaction.atomic():
        DeadLetter.objects.bulk_create(dead_letters, ignore_conflicts=True, batch_size=500)


def store_dead_letters(dead_letters: list[DeadLetter]) -> None:
    """Store the dead letters; one the database refuses is stored without its raw bytes, or logged."""
    for letter, exc in isolate_failures(dead_letters, _store_dead_letters):
        coordinates = f"{letter.source}[{letter.partition}]@{letter.offset}"
        stripped = DeadLetter(
            source=letter.source[:255],
            partition=letter.partition,
            offset=letter.offset,
            reason=letter.reason,
            detail=f"raw bytes not storable ({type(exc).__name__}: {exc})"[:500],
            raw=b"",
        )
        if isolate_failures([stripped], _store_dead_letters):
            logger.error("dead letter %s (%s) could not be stored: %s", coordinates, letter.reason, exc)
