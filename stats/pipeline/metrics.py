"""What the consumer records for the metrics endpoint: events counted and how long batches take.

The consumer is a process of its own, so nothing here lives in process memory: every figure is a Redis hash
(keys in ``stats.keys``, "Pipeline metrics") that the web process reads at scrape time
(``stats.read.pipeline_status``). Events counted are queued on the partition's MULTI/EXEC pipeline, beside the
counters and the offset, so they are exactly once as the counters are; dead letters are counted the same way
(``stats.pipeline.dead_letter_counts``). A batch's duration is known only once it is done, so the histogram
is written after it in a round trip of its own: a crash in between loses one sample, never a count.
"""

import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django_redis import get_redis_connection
from redis.exceptions import RedisError

from stats import keys
from stats.pipeline.partitions import summed_hashes

if TYPE_CHECKING:
    from stats.pipeline.batch import CountedEvent
    from stats.pipeline.registry import CounterWrites

logger = logging.getLogger(__name__)

# Upper bounds in seconds of the batch-duration histogram: fine around what a full batch takes, coarse up to a
# minute (a batch that waits out an outage).
BATCH_SECONDS_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
SUM, COUNT = "sum", "count"


def bucket_field(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(bound)


def record_counted(writes: "CounterWrites", counted: Sequence["CountedEvent"], *, sign: int = 1) -> None:
    """Queue the count of ``counted`` with the partition's counters (``sign=-1``: take events that left the
    share back out of a count already queued)."""
    if not counted:
        return
    pipe, key = writes.fenced, keys.metrics_counted(writes.partition)
    counts = Counter((event.type, message.source) for message, event in counted)
    for (kind, source), n in counts.items():
        pipe.hincrby(key, keys.metrics_counted_field(kind, source), sign * n)
    pipe.expire(key, keys.LONG_TTL)


def record_batch_duration(seconds: float) -> None:
    """Add one batch that took ``seconds`` to the histogram."""
    bound = next((b for b in BATCH_SECONDS_BUCKETS if seconds <= b), math.inf)
    key = keys.metrics_batch_seconds()
    pipe = get_redis_connection("default").pipeline(transaction=True)
    pipe.hincrby(key, bucket_field(bound), 1)
    pipe.hincrbyfloat(key, SUM, seconds)
    pipe.hincrby(key, COUNT, 1)
    pipe.expire(key, keys.LONG_TTL)
    try:
        pipe.execute()
    except RedisError as exc:  # the batch is counted already: a lost sample must not make it run again
        logger.warning("could not record the batch duration (%s)", exc)


# A member entry older than this is a consumer that stopped reporting (killed): it is not shown.
MEMBER_FRESH_SECONDS = 60.0


def record_membership(*, group: str, member: str, held_none_since: float | None, now: float) -> None:
    """Report that consumer ``member`` has held no partition since ``held_none_since`` (None: it holds some)."""
    since = "-" if held_none_since is None else repr(held_none_since)
    client = get_redis_connection("default")
    try:
        pipe = client.pipeline(transaction=True)
        pipe.hset(keys.metrics_members(group), member, f"{since}|{now!r}")
        pipe.expire(keys.metrics_members(group), keys.DAY)
        pipe.execute()
    except RedisError as exc:  # a report, not a count: the next one catches up
        logger.warning("could not report this consumer's partitions (%s)", exc)


def forget_member(*, group: str, member: str) -> None:
    try:
        get_redis_connection("default").hdel(keys.metrics_members(group), member)
    except RedisError as exc:
        logger.warning("could not remove this consumer's report (%s)", exc)


def seconds_without_partitions(*, group: str, now: float) -> dict[str, float]:
    """Return, per consumer reporting lately, how long it has held no partition (0 while it holds some)."""
    raw = get_redis_connection("default").hgetall(keys.metrics_members(group))
    members = {}
    for member, value in raw.items():
        since, reported = value.decode().split("|")
        if now - float(reported) <= MEMBER_FRESH_SECONDS:
            members[member.decode()] = 0.0 if since == "-" else max(now - float(since), 0.0)
    return members


def counted_events() -> dict[tuple[str, str], int]:
    """Return events counted so far by ``(type, source)``, over every partition."""
    summed = summed_hashes(get_redis_connection("default"), keys.metrics_counted)
    return {keys.parse_metrics_counted_field(field): n for field, n in summed.items()}


@dataclass(frozen=True)
class BatchHistogram:
    buckets: list[
        tuple[str, int]
    ]  # cumulative: (upper bound, batches that took at most that long), "+Inf" last
    sum: float
    count: int


def batch_histogram() -> BatchHistogram:
    """Return the batch-duration histogram with cumulative buckets, as Prometheus expects it."""
    raw = {
        k.decode(): v
        for k, v in get_redis_connection("default").hgetall(keys.metrics_batch_seconds()).items()
    }
    cumulative, buckets = 0, []
    for bound in (*BATCH_SECONDS_BUCKETS, math.inf):
        cumulative += int(raw.get(bucket_field(bound), 0))
        buckets.append((bucket_field(bound), cumulative))
    return BatchHistogram(buckets=buckets, sum=float(raw.get(SUM, 0)), count=int(raw.get(COUNT, 0)))
