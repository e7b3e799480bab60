"""How the pipeline is doing, read from durable state: what the metrics endpoint, ``health`` and the admin
dashboard show.

Nothing here reads process memory: the consumer, the django-q2 workers and the web server are separate
processes, so every figure comes from where they leave it: Redis (offsets, counts written with the counters,
job runs), Kafka (end offsets) and SQL (dead letters, drift).
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
from stats import keys
from stats.models import DeadLetter, ReconcileDrift
from stats.pipeline import metrics
from stats.pipeline.ingest import stored_offsets

logger = logging.getLogger(__name__)

# Kafka calls made at scrape or health-check time give up after this long (an unreachable broker costs ~2 s).
KAFKA_TIMEOUT_MS = 1500


@dataclass(frozen=True)
class PartitionLag:
    partition: int
    stored_offset: int | None  # the next offset the consumers will read, as stored with the counters
    end_offset: int
    lag: int  # messages in the partition not counted yet


@dataclass(frozen=True)
class Drift:
    date: dt.date
    pv_drift: int  # exact minus realtime, summed over the day's partner rows
    uv_drift: int


class KafkaUnavailable(Exception):
    """The broker could not be asked for the topic's end offsets."""


def read_consumer_lag() -> list[PartitionLag]:
    """Return the lag of every partition of the topic; raise ``KafkaUnavailable`` if Kafka does not answer."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    topic, group = settings.KAFKA_TOPIC, settings.KAFKA_GROUP_ID
    try:
        # No group_id: this consumer only asks for offsets, it must not join (and rebalance) the real group.
        consumer = KafkaConsumer(
            bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS,
            enable_auto_commit=False,
            request_timeout_ms=KAFKA_TIMEOUT_MS,
            bootstrap_timeout_ms=KAFKA_TIMEOUT_MS,
            client_id="cps-pipeline-status",
            allow_auto_create_topics=False,  # asking about a topic must not create it
        )
    except KafkaError as exc:
        raise KafkaUnavailable(f"Kafka at {settings.KAFKA_BOOTSTRAP_SERVERS} did not answer ({exc})") from exc
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not partitions:
            return []
        ends = consumer.end_offsets(partitions)
        stored = stored_offsets(group=group, source=topic)
        # A partition is read from its stored offset, or from its first message when it has none
        # (auto_offset_reset=earliest) or when retention deleted the messages up to its stored offset.
        begins = consumer.beginning_offsets(partitions)
    except KafkaError as exc:
        raise KafkaUnavailable(f"Kafka did not give the end offsets of {topic} ({exc})") from exc
    finally:
        consumer.close()
    lags = []
    for tp in partitions:
        start = max(stored.get(tp.partition, 0), begins[tp])
        lags.append(
            PartitionLag(
                partition=tp.partition,
                stored_offset=stored.get(tp.partition),
                end_offset=ends[tp],
                lag=max(ends[tp] - start, 0),
            )
        )
    return lags


def consumer_lag() -> list[PartitionLag]:
    """Return the lag of every partition of the topic, or ``[]`` (and a logged warning) if Kafka is out of reach."""
    try:
        return read_consumer_lag()
    except KafkaUnavailable as exc:
        logger.warning("consumer lag unknown: %s", exc)
        return []


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
    raw = get_redis_connection("default").hgetall(keys.dead_letter_counts())
    return {reason.decode(): int(n) for reason, n in sorted(raw.items())}


def last_reconcile_drift() -> Drift | None:
    """Return the drift of the latest reconciled date, summed over its partner rows, or None."""
    latest = ReconcileDrift.objects.aggregate(latest=Max("date"))["latest"]
    if latest is None:
        return None
    sums = ReconcileDrift.objects.filter(date=latest).aggregate(
        pv=Sum(F("exact_pv") - F("realtime_pv")), uv=Sum(F("exact_uv") - F("realtime_uv"))
    )
    return Drift(date=latest, pv_drift=sums["pv"] or 0, uv_drift=sums["uv"] or 0)


def pending_flush_keys() -> int:
    """Return how many PV bucket and UV keys wait in Redis for a flush to move them to SQL."""
    client = get_redis_connection("default")
    day_stamps = [stamp.decode() for stamp in client.zrange(keys.uv_days(), 0, -1)]
    pipe = client.pipeline(transaction=False)
    pipe.zcard(keys.pv_index())
    for day_stamp in day_stamps:
        pipe.scard(keys.uv_index(day_stamp))
    return sum(pipe.execute())
