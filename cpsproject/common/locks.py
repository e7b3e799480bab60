"""Job locks: one flush, reconcile or login sync at a time, kept for as long as the job runs.

``job_lock(name)`` takes a redis-py Lock on ``redis_keys.lock(name)`` (``SET NX PX`` with a random token) that
lives ``CPS_LOCK_SECONDS`` and is renewed by a daemon heartbeat thread every third of that time. A job that runs
longer than the TTL (a ``reconcile`` of a busy day) therefore keeps its lock, while a job whose process dies
stops renewing it and frees the lock within the TTL.

A lock can still be lost while its job runs: the process paused for longer than the TTL (a frozen VM, a swap
storm, Redis out of reach of the heartbeat), a failover that dropped the key, someone deleting it by hand. The
guarded jobs rely on the lock to keep a second writer out (``upsert_rows`` matches NULL keys itself), so each
calls ``ensure_held()`` right before every write step, or opens its SQL transaction with ``atomic()``. Both
renew the lock and raise ``LockLost`` once it is no longer ours: the job stops before it writes instead of
writing beside another run.

A job that leaves its ``job_lock`` block without an exception is recorded as that job's last success, with its
duration (``cpsproject.common.jobruns``), whether django-q2 or a management command ran it. A lock taken inside
another job's lock (reconcile holds the ``flush`` lock while it writes) guards that job's write: it is not a run
of its own and records nothing.

``run_as_task`` turns a busy lock into a logged skip for django-q2 tasks; ``command_errors`` turns a busy or a
lost lock into a one-line ``CommandError`` for management commands.
"""

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec

from django.conf import settings
from django.core.management.base import CommandError
from django.db import transaction
from django_redis import get_redis_connection
from redis.exceptions import LockNotOwnedError, RedisError
from redis.lock import Lock

from cpsproject.common import redis_keys
from cpsproject.common.jobruns import record_success

logger = logging.getLogger(__name__)

P = ParamSpec("P")

# The job locks this thread holds, outermost first: only the outermost one is a job run.
_held = threading.local()


class LockBusy(Exception):
    """Another run holds the job's lock."""

    def __init__(self, name: str, key: str) -> None:
        super().__init__(f"another {name} is running (lock {key} is held)")
        self.name, self.key = name, key


class LockLost(Exception):
    """The job's lock expired or was taken while the job ran; the job stopped before its next write."""

    def __init__(self, name: str, key: str) -> None:
        super().__init__(
            f"{name} lost its lock {key} while running and stopped before its next write; run it again"
        )
        self.name, self.key = name, key


class JobLock:
    """What ``job_lock`` yields: the job calls ``ensure_held()`` (or ``atomic()``) before each write step."""

    def __init__(self, name: str, lock: Lock, seconds: float) -> None:
        self.name, self.key, self.seconds = name, lock.name, seconds
        self._lock = lock
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._heartbeat = threading.Thread(target=self._beat, name=f"lock-heartbeat {name}", daemon=True)

    def ensure_held(self) -> None:
        """Renew the lock for a full TTL; raise ``LockLost`` if it is no longer ours."""
        if not self._lost.is_set():
            try:
                self._lock.reacquire()  # compares our token and resets the TTL in one script call
                return
            except LockNotOwnedError:
                self._lost.set()
                logger.error("%s lost its lock %s; stopping before the next write", self.name, self.key)
        raise LockLost(self.name, self.key)

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """A SQL transaction that opens and commits only while the lock is ours (else ``LockLost``, rolled back)."""
        self.ensure_held()
        with transaction.atomic():
            yield
            self.ensure_held()

    def _beat(self) -> None:
        interval = self.seconds / 3
        while not self._stop.wait(interval):
            try:
                self._lock.reacquire()
            except LockNotOwnedError:
                self._lost.set()
                logger.error("%s lost its lock %s; the job stops before its next write", self.name, self.key)
                return
            except RedisError as exc:  # Redis out of reach: keep trying while the TTL lasts
                logger.warning("could not renew the %s lock %s (%s); retrying", self.name, self.key, exc)

    def _start(self) -> None:
        self._heartbeat.start()

    def _finish(self) -> None:
        self._stop.set()
        self._heartbeat.join()
        if self._lost.is_set():
            return  # the key is someone else's now (or gone): leave it alone
        try:
            self._lock.release()  # deletes the key only if it still holds our token
        except LockNotOwnedError:
            logger.error("%s lost its lock %s after its last write check", self.name, self.key)


@contextmanager
def job_lock(name: str, *, seconds: float | None = None, wait_seconds: float = 0) -> Iterator[JobLock]:
    """Hold the lock ``name`` (TTL ``seconds``, default ``CPS_LOCK_SECONDS``) renewed until the block ends.

    Raise ``LockBusy`` if another run holds it: at once, or once it has held it for ``wait_seconds`` more. A
    block that ends without an exception is recorded as the job's last success.
    """
    seconds = seconds or settings.CPS_LOCK_SECONDS
    key = redis_keys.lock(name)
    # thread_local=False: the heartbeat thread renews with the token the job's thread acquired.
    lock = get_redis_connection("default").lock(key, timeout=seconds, thread_local=False)
    if not lock.acquire(blocking=False):
        if not wait_seconds:
            raise LockBusy(name, key)
        logger.info("%s waits up to %.0f s for its lock %s, held by another run", name, wait_seconds, key)
        if not lock.acquire(blocking=True, blocking_timeout=wait_seconds):
            raise LockBusy(name, key)
    job = JobLock(name, lock, seconds)
    job._start()
    logger.debug("%s holds its lock %s (TTL %ss, renewed every %.1fs)", name, key, seconds, seconds / 3)
    started = time.monotonic()
    outer = getattr(_held, "names", [])
    _held.names = [*outer, name]
    try:
        yield job
    finally:
        _held.names = outer
        job._finish()
    if not outer:
        record_success(name, duration=time.monotonic() - started)


def run_as_task(fn: Callable[P, str]) -> Callable[P, str]:
    """Wrap a django-q2 task so a busy lock is a logged one-line skip, not a failed task.

    A lost lock still fails the task (django-q2 records the error): the job stopped half-way.
    """

    @functools.wraps(fn)
    def task(*args: P.args, **kwargs: P.kwargs) -> str:
        try:
            return fn(*args, **kwargs)
        except LockBusy as exc:
            summary = f"skipped: another {exc.name} is running"
            logger.warning("%s %s (lock %s is held)", fn.__name__, summary, exc.key)
            return summary

    return task


@contextmanager
def command_errors() -> Iterator[None]:
    """Turn a busy or lost lock into a ``CommandError``: one readable line and a non-zero exit."""
    try:
        yield
    except (LockBusy, LockLost) as exc:
        raise CommandError(str(exc)) from exc
