"""A Redis lock so two flushes, reconciles or login syncs do not run at once (redis-py's token-checked Lock).

The lock expires after ``LOCK_SECONDS``, so a job killed while holding it stops blocking the next run within
that time. The jobs it guards are idempotent (absolute upserts, compare-and-delete), so a rare overlap when a
job outlives its lock costs work, not correctness: keep the TTL short rather than long.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django_redis import get_redis_connection
from redis.exceptions import LockError

from cpsproject.common import redis_keys

logger = logging.getLogger(__name__)


class LockBusy(Exception):
    pass


@contextmanager
def redis_lock(name: str) -> Iterator[None]:
    lock = get_redis_connection("default").lock(redis_keys.lock(name), timeout=settings.CPS_LOCK_SECONDS)
    if not lock.acquire(blocking=False):
        raise LockBusy(f"another {name} is running (lock {redis_keys.lock(name)} is held)")
    try:
        yield
    finally:
        try:
            lock.release()
        except LockError:
            logger.warning(
                "%s outlived its %ss lock; another run may have overlapped",
                name,
                settings.CPS_LOCK_SECONDS,
            )
