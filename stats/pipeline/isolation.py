"""Telling a poison pill from an outage, and keeping one from stopping the consumer.

When a batch's write fails, one of two very different things happened. Either a service is unreachable (MySQL,
Redis, MongoDB, the broker): no event is to blame, so the consumer waits and retries, losing nothing. Or one
event holds something a storage layer refuses: retrying would fail forever, so the batch is bisected until the
events that fail on their own are found; they become dead letters and the rest is counted.

As in Spring Kafka's DefaultErrorHandler, the kind of error decides, with one refinement: an error whose type
does not say (a database's OperationalError covers both "server has gone away" and "incorrect string value")
is settled by asking the service whether it answers at all.
"""

import logging
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from django.db import DatabaseError, InterfaceError, OperationalError, close_old_connections, connection
from redis import exceptions as redis_errors

logger = logging.getLogger(__name__)

T = TypeVar("T")

# MySQL/MariaDB client and server codes that mean "not reachable now", not "this row is bad".
_MYSQL_UNAVAILABLE = {1040, 1053, 1205, 1213, 2002, 2003, 2005, 2006, 2013, 2026, 2055, 4031}
_REDIS_UNAVAILABLE = (
    redis_errors.ConnectionError,
    redis_errors.TimeoutError,
    redis_errors.BusyLoadingError,
    redis_errors.ReadOnlyError,
    redis_errors.ClusterDownError,
    redis_errors.TryAgainError,
)


def _mongo_unavailable(exc: BaseException) -> bool:
    try:
        from pymongo.errors import ConnectionFailure, NetworkTimeout, ServerSelectionTimeoutError
    except ImportError:  # pragma: no cover - pymongo is a requirement
        return False
    return isinstance(exc, ConnectionFailure | NetworkTimeout | ServerSelectionTimeoutError)


def _drop_broken_connections() -> None:
    # Inside a transaction (a test's, or a caller's) the connection is not ours to close.
    if not connection.in_atomic_block:
        close_old_connections()


def _database_answers() -> bool:
    try:
        _drop_broken_connections()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except DatabaseError:
        return False


def is_unavailable(exc: BaseException) -> bool:
    """Return True when ``exc`` says a service is unreachable (retry), False when the data is to blame."""
    if isinstance(exc, _REDIS_UNAVAILABLE) or _mongo_unavailable(exc):
        return True
    if isinstance(exc, redis_errors.ResponseError):
        # A full Redis refuses writes with OOM: not the event's fault, and it passes once memory is freed.
        return str(exc).startswith(("OOM", "LOADING", "MASTERDOWN"))
    if isinstance(exc, InterfaceError):
        return True
    if isinstance(exc, OperationalError):
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        if code in _MYSQL_UNAVAILABLE or "database is locked" in str(exc):
            return True
        return not _database_answers()
    return False


def isolate_failures(
    items: Sequence[T], store: Callable[[Sequence[T]], None]
) -> list[tuple[T, BaseException]]:
    """Store ``items``; return the items that fail on their own, with their errors, having stored the rest.

    ``store`` must be idempotent (the good half of a failed call may be stored again). An availability error
    propagates: bisecting an outage would dead-letter good events.
    """
    if not items:
        return []
    try:
        store(items)
        return []
    except Exception as exc:
        if is_unavailable(exc):
            raise
        if len(items) == 1:
            return [(items[0], exc)]
    middle = len(items) // 2
    return isolate_failures(items[:middle], store) + isolate_failures(items[middle:], store)


class Backoff:
    """Retry delays for an unavailable service: 0.5 s doubling up to ``cap`` seconds."""

    def __init__(self, *, first: float = 0.5, cap: float = 30.0):
        self.first, self.cap, self.attempt = first, cap, 0

    def next_delay(self) -> float:
        self.attempt += 1
        return min(self.cap, self.first * 2 ** (self.attempt - 1))


def retry_while_unavailable(
    action: Callable[[], T], *, what: str, should_stop: Callable[[], bool] = lambda: False
) -> T:
    """Run ``action`` until it succeeds, waiting (and logging one line) after each availability error.

    Any other error propagates. ``should_stop`` lets a consumer told to stop give up between attempts; the
    batch is then simply read again by the next consumer, since nothing of it was committed.
    """
    backoff = Backoff()
    while True:
        try:
            return action()
        except Exception as exc:
            if not is_unavailable(exc):
                raise
            delay = backoff.next_delay()
            logger.warning(
                "%s: service unavailable (%s: %s); attempt %d, retrying in %.1f s",
                what,
                type(exc).__name__,
                str(exc)[:200],
                backoff.attempt,
                delay,
            )
            _drop_broken_connections()
            if should_stop():
                raise StopRequested(what) from exc
            time.sleep(delay)


class StopRequested(Exception):
    """The consumer was told to stop while waiting for a service; nothing of the batch was committed."""
