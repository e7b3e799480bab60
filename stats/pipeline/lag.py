"""The topic's end offsets, as last seen, so that reading consumer lag never waits on Kafka.

Two writers record into ``keys.kafka_end_offsets(topic)``: every consumer, after each poll, from the high
watermarks of the fetch responses it already has (no extra request); and ``probe_end_offsets``, a live request
to Kafka made by ``manage.py health`` and the minute job ``stats.probe_kafka`` (it keeps the figures fresh while
no consumer runs). The dashboard and ``/metrics`` only read what was recorded, with when it was seen: an
unreachable broker costs them nothing, and a stale figure shows its age.
"""

import datetime as dt
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone
from django_redis import get_redis_connection
from redis.exceptions import RedisError

from cpsproject.common.timeutil import epoch, from_epoch
from stats import keys

logger = logging.getLogger(__name__)

# A live request gives up after this long (an unreachable broker would otherwise cost ~2 s or more).
PROBE_TIMEOUT_MS = 1500
PROBE_ERROR, PROBE_AT = "error", "at"


@dataclass(frozen=True)
class EndOffset:
    offset: int  # the next offset Kafka will write to the partition
    begin: int | None  # its first offset still held (retention), when a probe saw it; None from a consumer
    seen_at: dt.datetime


@dataclass(frozen=True)
class Probe:
    at: dt.datetime
    error: str  # "" when Kafka answered


class KafkaUnavailable(Exception):
    """The broker could not be asked for the topic's end offsets."""


def record_end_offsets(
    topic: str, ends: dict[int, int], *, begins: dict[int, int] | None = None, now: dt.datetime | None = None
) -> None:
    """Record the end offset (and first offset, if known) of each partition of ``topic`` as seen ``now``."""
    if not ends:
        return
    stamp = int(epoch(now or timezone.now()))
    begins = begins or {}
    fields = {str(p): f"{end} {begins.get(p, '-')} {stamp}" for p, end in ends.items()}
    key = keys.kafka_end_offsets(topic)
    pipe = get_redis_connection("default").pipeline(transaction=True)
    pipe.hset(key, mapping=fields)
    pipe.expire(key, keys.LONG_TTL)
    try:
        pipe.execute()
    except RedisError as exc:  # a figure for monitoring: never worth failing a batch or a probe over
        # Debug only: whatever needs Redis next (the batch, health's checks) reports the outage itself.
        logger.debug("end offsets of %s not recorded (%s)", topic, exc)


def recorded_end_offsets(topic: str) -> dict[int, EndOffset]:
    """Return the end offset of each partition of ``topic`` as last recorded, by partition."""
    raw = get_redis_connection("default").hgetall(keys.kafka_end_offsets(topic))
    found = {}
    for partition, value in raw.items():
        end, begin, stamp = value.decode().split()
        found[int(partition)] = EndOffset(
            offset=int(end), begin=None if begin == "-" else int(begin), seen_at=from_epoch(int(stamp))
        )
    return dict(sorted(found.items()))


def last_probe() -> Probe | None:
    """Return when the last live probe ran and what went wrong, or None if none is on record."""
    raw = get_redis_connection("default").hgetall(keys.kafka_probe())
    if PROBE_AT.encode() not in raw:
        return None
    return Probe(
        at=from_epoch(int(raw[PROBE_AT.encode()])), error=raw.get(PROBE_ERROR.encode(), b"").decode()
    )


@contextmanager
def quiet_kafka_logs() -> Iterator[None]:
    """Keep kafka-python's per-attempt connection errors out of the log while a probe runs.

    An unreachable broker makes kafka-python log an ERROR for every connection attempt (a dozen per probe);
    the probe reports the outcome in one line of its own. Probes run in web, job and command processes, never
    in the consumer, whose kafka-python warnings stay as they are.
    """
    kafka_logger = logging.getLogger("kafka")
    level = kafka_logger.level
    kafka_logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        kafka_logger.setLevel(level)


def probe_end_offsets(*, now: dt.datetime | None = None) -> dict[int, EndOffset]:
    """Ask Kafka for the end and first offsets of the topic's partitions, record them and return them.

    Raise ``KafkaUnavailable`` if Kafka does not answer within ``PROBE_TIMEOUT_MS``; the failure is recorded.
    """
    now = now or timezone.now()
    try:
        with quiet_kafka_logs():
            ends, begins = _ask_kafka(settings.KAFKA_TOPIC)
    except KafkaUnavailable as exc:
        _record_probe(now=now, error=str(exc))
        raise
    record_end_offsets(settings.KAFKA_TOPIC, ends, begins=begins, now=now)
    _record_probe(now=now, error="")
    return {p: EndOffset(offset=end, begin=begins[p], seen_at=now) for p, end in sorted(ends.items())}


def _ask_kafka(topic: str) -> tuple[dict[int, int], dict[int, int]]:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    try:
        # No group_id: this consumer only asks for offsets, it must not join (and rebalance) the real group.
        consumer = KafkaConsumer(
            bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS,
            enable_auto_commit=False,
            request_timeout_ms=PROBE_TIMEOUT_MS,
            bootstrap_timeout_ms=PROBE_TIMEOUT_MS,
            client_id="cps-lag-probe",
            allow_auto_create_topics=False,  # asking about a topic must not create it
        )
    except KafkaError as exc:
        raise KafkaUnavailable(f"Kafka at {settings.KAFKA_BOOTSTRAP_SERVERS} did not answer ({exc})") from exc
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not partitions:
            return {}, {}
        ends = consumer.end_offsets(partitions)
        begins = consumer.beginning_offsets(partitions)
    except KafkaError as exc:
        raise KafkaUnavailable(f"Kafka did not give the end offsets of {topic} ({exc})") from exc
    finally:
        consumer.close()
    return {tp.partition: ends[tp] for tp in partitions}, {tp.partition: begins[tp] for tp in partitions}


def _record_probe(*, now: dt.datetime, error: str) -> None:
    key = keys.kafka_probe()
    pipe = get_redis_connection("default").pipeline(transaction=True)
    pipe.hset(key, mapping={PROBE_AT: int(epoch(now)), PROBE_ERROR: error})
    pipe.expire(key, keys.LONG_TTL)
    try:
        pipe.execute()
    except RedisError as exc:
        logger.debug("Kafka probe result not recorded (%s)", exc)
