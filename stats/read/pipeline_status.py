"""How the pipeline is doing, read from durable state: what the metrics endpoint, ``health`` and the admin
dashboard show.

Nothing here reads process memory: the consumer, the django-q2 workers and the web server are separate
processes, so every figure comes from where they leave it: Redis (offsets, counts written with the counters,
job runs, Kafka end offsets as last seen) and SQL (dead letters, drift). Only ``probe_consumer_lag`` asks Kafka.
"""

import datetime as dt
import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, F, Max, Sum
from django_redis import get_redis_connection

from cpsproject.common import jobruns
from cpsproject.common.timeutil import day_bounds
from stats.counters import pageviews, uniques
from stats.models import DeadLetter, ReconcileDrift
from stats.pipeline import dead_letter_counts, lag, metrics
from stats.pipeline.offsets import stored_offsets
from stats.read.selectors import outermost_rows

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionLag:
    partition: int
    stored_offset: int | None  # the next offset the consumers will read, as stored with the counters
    end_offset: int | None  # as last seen (None: never seen yet)
    lag: int | None  # messages in the partition not counted yet, as of ``seen_at``
    seen_at: dt.datetime | None  # when the end offset was seen


@dataclass(frozen=True)
class Drift:
    date: dt.date
    pv_drift: int  # exact minus realtime, summed over the day's root partners and the no-partner traffic
    uv_drift: int


KafkaUnavailable = lag.KafkaUnavailable


def _lags(ends: dict[int, lag.EndOffset]) -> list[PartitionLag]:
    stored = stored_offsets(group=settings.KAFKA_GROUP_ID, source=settings.KAFKA_TOPIC)
    rows = []
    for partition in sorted(set(ends) | set(stored)):
        end = ends.get(partition)
        if end is None:
            rows.append(PartitionLag(partition, stored.get(partition), None, None, None))
            continue
        # A partition is read from its stored offset, or from its first message when it has none
        # (auto_offset_reset=earliest) or when retention deleted the messages up to its stored offset.
        start = max(stored.get(partition, 0), end.begin or 0)
        rows.append(
            PartitionLag(
                partition, stored.get(partition), end.offset, max(end.offset - start, 0), end.seen_at
            )
        )
    return rows


def probe_consumer_lag() -> list[PartitionLag]:
    """Ask Kafka now (bounded, see ``stats.pipeline.lag``) and return the lag of every partition of the topic.

    Raise ``KafkaUnavailable`` if Kafka does not answer. For ``manage.py health`` and the probe job, never for
    a page: those read ``consumer_lag``.
    """
    return _lags(lag.probe_end_offsets())


def consumer_lag() -> list[PartitionLag]:
    """Return the lag of every partition from the end offsets last recorded in Redis; never waits on Kafka."""
    return _lags(lag.recorded_end_offsets(settings.KAFKA_TOPIC))


def last_kafka_probe() -> lag.Probe | None:
    """Return when the last live probe of Kafka ran and what went wrong, or None."""
    return lag.last_probe()


def consumers_without_partitions() -> dict[str, float]:
    """Return, per running consumer of the group ("host:pid"), how long it has held no partition (0: it holds)."""
    return metrics.seconds_without_partitions(group=settings.KAFKA_GROUP_ID, now=time.time())


def last_job_success(name: str) -> dt.datetime | None:
    """Return when job ``name`` ("flush", "reconcile", "sync_logins", …) last succeeded, or None."""
    return jobruns.last_success(name)


def last_job_duration(name: str) -> float | None:
    """Return how many seconds job ``name``'s last successful run took, or None."""
    return jobruns.last_duration(name)


def dead_letters_by_reason(*, day: dt.date) -> dict[str, int]:
    """Return the dead letters received during business day ``day``, by reason."""
    start, end = day_bounds(day)
    rows = (
        DeadLetter.objects.filter(received_at__gte=start, received_at__lt=end)
        .values("reason")
        .annotate(n=Count("id"))
        .order_by("reason")
    )
    return {row["reason"]: row["n"] for row in rows}


def dead_letters_counted() -> dict[str, int]:
    """Return every dead letter counted by the consumers so far, by reason (exactly once, from Redis)."""
    return dead_letter_counts.counted(get_redis_connection("default"))


def last_reconcile_drift() -> Drift | None:
    """Return the drift of the latest reconciled date, summed over its root partners' rows, or None."""
    latest = ReconcileDrift.objects.aggregate(latest=Max("date"))["latest"]
    if latest is None:
        return None
    # Each row's figures cover the partner's subtree: the roots (and the traffic with no partner) hold every
    # event once, where a sum over all rows counts an event once per level.
    sums = outermost_rows(ReconcileDrift.objects.filter(date=latest)).aggregate(
        pv=Sum(F("exact_pv") - F("realtime_pv")), uv=Sum(F("exact_uv") - F("realtime_uv"))
    )
    return Drift(date=latest, pv_drift=sums["pv"] or 0, uv_drift=sums["uv"] or 0)


def pending_flush_keys() -> int:
    """Return how many PV bucket and UV keys wait in Redis for a flush to move them to SQL."""
    client = get_redis_connection("default")
    return pageviews.pending_count(client) + uniques.pending_count(client)
