"""A Redis lock (SET NX EX with a token) so two flushes, reconciles or syncs never overlap."""

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django_redis import get_redis_connection

from stats import keys
from stats.conf import stats_setting

# Delete the lock only if it is still ours: an expired lock may have been taken by someone else since.
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


class LockBusy(Exception):
    pass


@contextmanager
def redis_lock(name: str, *, seconds: int | None = None) -> Iterator[None]:
    client = get_redis_connection("default")
    token = uuid.uuid4().hex
    if not client.set(keys.lock(name), token, nx=True, ex=seconds or stats_setting("LOCK_SECONDS")):
        raise LockBusy(f"another {name} is running (lock {keys.lock(name)} is held)")
    try:
        yield
    finally:
        client.eval(_RELEASE, 1, keys.lock(name), token)
