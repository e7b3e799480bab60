"""When each job last succeeded and how long it took, for the metrics endpoint, ``health`` and the dashboard.

Recorded in Redis (``redis_keys.job_runs``) rather than SQL: every job already needs Redis for its lock, the
record must be written by django-q2 workers and management commands alike (``job_lock`` records it, so both
do), and the shared tools own no model. Losing it (a Redis flush) costs nothing but a health warning until the
job's next run writes it again. The hashes carry a long safety TTL, renewed by each run.
"""

import datetime as dt
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.utils import timezone
from django_redis import get_redis_connection
from redis.exceptions import RedisError

from cpsproject.common import redis_keys
from cpsproject.common.timeutil import epoch, from_epoch

logger = logging.getLogger(__name__)

# A weekly job missed for months must still show when it last ran.
TTL = 400 * 86400
LAST_SUCCESS = "last_success"
LAST_DURATION = "last_duration"


def record_success(name: str, *, duration: float, now: dt.datetime | None = None) -> None:
    """Record that job ``name`` just finished well after ``duration`` seconds."""
    now = now or timezone.now()
    pipe = get_redis_connection("default").pipeline(transaction=True)
    pipe.hset(redis_keys.job_runs(LAST_SUCCESS), name, epoch(now))
    pipe.hset(redis_keys.job_runs(LAST_DURATION), name, f"{duration:.3f}")
    for field in (LAST_SUCCESS, LAST_DURATION):
        pipe.expire(redis_keys.job_runs(field), TTL)
    try:
        pipe.execute()
    except RedisError as exc:  # the job's work is done: a lost record must not fail it
        logger.warning("could not record the success of %s (%s)", name, exc)


@contextmanager
def job_run(name: str) -> Iterator[None]:
    """Time the block and record it as job ``name``'s last success if it raises nothing."""
    started = time.monotonic()
    yield
    record_success(name, duration=time.monotonic() - started)


def last_success(name: str) -> dt.datetime | None:
    """Return when job ``name`` last succeeded, or None if no success is on record."""
    raw = get_redis_connection("default").hget(redis_keys.job_runs(LAST_SUCCESS), name)
    return from_epoch(int(raw)) if raw is not None else None


def last_duration(name: str) -> float | None:
    """Return the seconds job ``name``'s last successful run took, or None."""
    raw = get_redis_connection("default").hget(redis_keys.job_runs(LAST_DURATION), name)
    return float(raw) if raw is not None else None


def all_runs() -> dict[str, tuple[dt.datetime, float | None]]:
    """Return every recorded job's last success and duration, by job name."""
    client = get_redis_connection("default")
    successes = client.hgetall(redis_keys.job_runs(LAST_SUCCESS))
    durations = client.hgetall(redis_keys.job_runs(LAST_DURATION))
    return {
        name.decode(): (from_epoch(int(raw)), float(durations[name]) if name in durations else None)
        for name, raw in successes.items()
    }
