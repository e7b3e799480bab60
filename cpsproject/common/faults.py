"""Fault injection for the crash, isolation and reliability tests; unset in production, where each check is one lookup.

``CPS_FAULT_KILL=point:n`` SIGKILLs this process the n-th time it reaches ``point``.
``CPS_FAULT_SLEEP=point:seconds[:times]`` sleeps that long every time this process reaches ``point`` (a slow batch),
or only the first ``times`` times.
``CPS_FAULT_FAIL_EVENT=point:event_id`` makes the stage ``point`` (``archive`` or ``count``) fail whenever the
events it handles include ``event_id``, as a storage layer refusing that one event would.
"""

import os
import signal
import time
from collections import Counter
from collections.abc import Iterable

_reached: Counter[str] = Counter()
_slept: Counter[str] = Counter()


def reach(point: str) -> None:
    """Apply the kill or sleep fault set for ``point``, if any."""
    kill = os.environ.get("CPS_FAULT_KILL")
    if kill:
        name, _, count = kill.partition(":")
        if name == point:
            _reached[point] += 1
            if _reached[point] >= int(count or 1):
                os.kill(os.getpid(), signal.SIGKILL)
    pause = os.environ.get("CPS_FAULT_SLEEP")
    if pause:
        name, _, rest = pause.partition(":")
        seconds, _, times = rest.partition(":")
        if name == point:
            _slept[point] += 1
            if not times or _slept[point] <= int(times):
                time.sleep(float(seconds or 1))


class FaultInjected(Exception):
    """The error a ``CPS_FAULT_FAIL_EVENT`` fault raises: a data error, not an outage."""


def fail_for(events: Iterable, *, point: str) -> None:
    spec = os.environ.get("CPS_FAULT_FAIL_EVENT")
    if not spec:
        return
    name, _, event_id = spec.partition(":")
    if name == point and any(event.event_id == event_id for event in events):
        raise FaultInjected(f"fault injected at {point} for event {event_id}")
