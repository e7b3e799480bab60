"""Storage that does not grow without bound: the raw-event archive and dead letters past their retention.

Reconciled days stay reconciled after their raw events go: ``DailyStat`` rows are never touched here.
"""

import datetime as dt
import logging
from dataclasses import dataclass

from django.utils import timezone

from cpsproject.common.jobruns import job_run
from cpsproject.common.timeutil import local_day
from stats.conf import stats_setting
from stats.models import DeadLetter
from stats.pipeline.archive import get_archive

logger = logging.getLogger(__name__)

CHUNK = 5000


def archive_cutoff(today: dt.date) -> dt.date:
    """The first business day whose raw events are kept."""
    return today - dt.timedelta(days=stats_setting("ARCHIVE_RETENTION_DAYS"))


@dataclass
class PurgeResult:
    raw_events: int
    dead_letters: int

    def summary(self) -> str:
        return f"purged {self.raw_events} raw events and {self.dead_letters} dead letters past retention"


def purge_expired(*, now: dt.datetime | None = None) -> PurgeResult:
    """Delete raw events and dead letters past their retention, in chunks; record the run as job "purge"."""
    with job_run("purge"):
        return _purge(now=now or timezone.now())


def _purge(*, now: dt.datetime) -> PurgeResult:
    raw = get_archive().purge_before(archive_cutoff(local_day(now)), chunk=CHUNK)
    letters_cutoff = now - dt.timedelta(days=stats_setting("DEAD_LETTER_RETENTION_DAYS"))
    old_letters = DeadLetter.objects.filter(received_at__lt=letters_cutoff)
    letters = chunks = 0
    while ids := list(old_letters.values_list("pk", flat=True)[:CHUNK]):
        letters += DeadLetter.objects.filter(pk__in=ids).delete()[0]
        chunks += 1
        if chunks % 20 == 0:  # a long purge shows progress
            logger.info("purged %d dead letters so far", letters)
    result = PurgeResult(raw, letters)
    logger.info(result.summary())
    return result


def purge_task() -> str:
    return purge_expired().summary()
