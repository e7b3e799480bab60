"""Functions django-q2 runs on schedule (see ``stats.schedules``); each returns a one-line summary.

A run that finds its job lock busy is skipped with a logged summary (``run_as_task``): the run holding the lock
does the same work, and the next scheduled run picks up whatever it left.
"""

import logging

from django.conf import settings

from cpsproject.common.jobruns import job_run
from cpsproject.common.locks import LockBusy, run_as_task
from stats.jobs.flush import flush
from stats.jobs.reconcile import default_reconcile_day, reconcile

logger = logging.getLogger(__name__)


@run_as_task
def flush_task() -> str:
    return flush().summary()


@run_as_task
def reconcile_yesterday_task() -> str:
    # Flush first so the drift compares the exact recount with every realtime count of the day. A flush
    # already running is doing that work, so a busy flush lock must not cost the night its reconcile.
    try:
        flush()
    except LockBusy as exc:
        logger.warning("reconcile_yesterday_task: flush skipped before the reconcile (%s)", exc)
    return reconcile(day=default_reconcile_day()).summary()


def maintain_windows_task() -> str:
    from stats.counters.rankings import rotate_all
    from stats.counters.series import clean_series

    with job_run("maintain_windows"):  # no lock to record it: rotation and cleaning are idempotent
        return f"{rotate_all()}; {clean_series()}"


def probe_kafka_task() -> str:
    """Ask Kafka for the topic's end offsets and record them: pages read lag from Redis, never from Kafka."""
    from stats.pipeline.lag import KafkaUnavailable, probe_end_offsets

    if not settings.KAFKA_BOOTSTRAP_SERVERS.strip():
        return "Kafka probe skipped: KAFKA_BOOTSTRAP_SERVERS is empty (this installation uses no Kafka)"
    try:
        ends = probe_end_offsets()
    except KafkaUnavailable as exc:
        logger.warning("Kafka probe: %s", exc)
        return f"Kafka probe failed: {exc}"
    return f"Kafka probe: end offsets of {len(ends)} partitions recorded"
