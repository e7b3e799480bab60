"""Fault injection for the crash tests: ``CPS_FAULT_KILL=point:n`` SIGKILLs this process the n-th time it
reaches ``point``. Unset in production, where ``reach`` is one dictionary lookup."""

import os
import signal
from collections import Counter

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
