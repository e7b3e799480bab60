"""Fault injection for the crash and isolation tests; unset in production, where each check is one lookup.

``CPS_FAULT_KILL=point:n`` SIGKILLs this process the n-th time it reaches ``point``.
``CPS_FAULT_FAIL_EVENT=point:event_id`` makes the stage ``point`` (``archive`` or ``count``) fail whenever the
events it handles include ``event_id``, as a storage layer refusing that one event would.
"""

import os
import signal
from collections import Counter
from collections.abc import Iterable

_reached: Counter[str] = Counter()


def reach(point: str) -> None:
    spec = os.environ.get("CPS_FAULT_KILL")
    if not spec:
        return
    name, _, count = spec.partition(":")
    if name != point:
        return
    _reached[point] += 1
    if _reached[point] >= int(count or 1):
        os.kill(os.getpid(), signal.SIGKILL)


class FaultInjected(Exception):
    """The error a ``CPS_FAULT_FAIL_EVENT`` fault raises: a data error, not an outage."""


def fail_for(events: Iterable, *, point: str) -> None:
    spec = os.environ.get("CPS_FAULT_FAIL_EVENT")
    if not spec:
        return
    name, _, event_id = spec.partition(":")
    if name == point and any(event.event_id == event_id for event in events):
        raise FaultInjected(f"fault injected at {point} for event {event_id}")
