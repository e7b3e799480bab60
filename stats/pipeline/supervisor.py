"""``consume --processes N``: one command running N members of the consumer group, each a child process.

A consumer spends most of its time in Python under one GIL (parsing, building the counters' commands), so one
process uses one core whatever the machine has. A member per core, each holding its share of the partitions,
uses them all: on the bench's 2-core machine one process drained its topic at 0.34-0.36× a bare fetch, three
at 0.61× (bench/README.md). The group does the sharing: each child is an ordinary ``consume`` with the same
options, and the group's rebalances, the fences and the offsets stored with the counters keep counting exact
whichever member holds a partition, as they do for consumers started apart.

The supervisor starts, watches and stops, nothing more. Each child's lines come through with its number in
front. SIGTERM or SIGINT is passed on, and each child finishes its batch in hand. A child that fails (exits
non-zero, or is killed) has the others stopped, and the command fails naming it: a service manager restarts
the whole, where a group left with fewer members would go on with fewer cores unnoticed. A child outlives
no supervisor: it is sent SIGTERM when its parent dies, however the parent dies. With ``--exit-when-idle``
each child exits once the topic is drained, and so does the command.
"""

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import FrameType
from typing import IO, Any, Protocol

from django.conf import settings

logger = logging.getLogger("stats.pipeline.consumer")

_PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies


def _die_with_parent() -> None:
    """Run in each child between fork and exec."""
    # Not on Linux: a supervisor killed outright leaves its children running.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Sink(Protocol):
    """Where a child's lines go: a stream, or a management command's ``stdout``/``stderr``."""

    def write(self, text: str) -> Any: ...
    def flush(self) -> Any: ...


@dataclass(eq=False)
class Member:
    number: int
    process: subprocess.Popen

    def describe(self) -> str:
        return f"consumer {self.number} (pid {self.process.pid})"

    def ending(self) -> str:
        code = self.process.returncode
        if code is not None and code < 0:
            return f"was killed by {signal.Signals(-code).name}"
        return f"exited with code {code}"


def _pass_lines(stream: IO[bytes], sink: Sink, prefix: str) -> None:
    for line in stream:
        sink.write(prefix + line.decode(errors="replace"))
        sink.flush()


class _Supervisor:
    def __init__(self, members: list[Member]) -> None:
        self.members = members
        self.stopping = False

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        logger.info("received %s; stopping the consumers", signal.Signals(signum).name)
        self.stop_members()

    def stop_members(self) -> None:
        self.stopping = True
        for member in self.members:
            if member.process.poll() is None:
                member.process.send_signal(signal.SIGTERM)

    def wait(self) -> Member | None:
        """Wait for every member to exit; return the first that failed, if one did."""
        failed = None
        while True:
            codes = [member.process.poll() for member in self.members]  # each polled, to see each exit
            for member, code in zip(self.members, codes, strict=True):
                # Asked to stop before it installed its handlers (Django still starting), a member dies of the
                # signal itself: it had counted nothing, so that is a stop too.
                stopped = self.stopping and code in (-signal.SIGTERM, -signal.SIGINT)
                if code not in (None, 0) and not stopped and failed is None:
                    failed = member
                    if not self.stopping:
                        logger.error("%s %s; stopping the others", member.describe(), member.ending())
                        self.stop_members()
            if None not in codes:
                return failed
            time.sleep(0.2)


def run_members(count: int, arguments: Sequence[str], *, out: Sink, err: Sink) -> str | None:
    """Run ``count`` children ``manage.py consume *arguments`` until all exit; return None if all exited 0, else
    one line naming the child that failed first."""
    command = [sys.executable, str(settings.BASE_DIR / "manage.py"), "consume", *arguments]
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # Every child is started before any thread is: a fork while other threads run may copy a held lock.
    members = [
        Member(
            number,
            subprocess.Popen(
                command,
                env=environment,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                preexec_fn=_die_with_parent,
            ),
        )
        for number in range(1, count + 1)
    ]
    supervisor = _Supervisor(members)
    previous = {sig: signal.signal(sig, supervisor.on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    passing = [
        threading.Thread(target=_pass_lines, args=(stream, sink, f"[{member.number}] "), daemon=True)
        for member in members
        for stream, sink in ((member.process.stdout, out), (member.process.stderr, err))
    ]
    for thread in passing:
        thread.start()
    logger.info(
        "started %d consumers: %s",
        count,
        ", ".join(f"{member.number} (pid {member.process.pid})" for member in members),
    )
    try:
        failed = supervisor.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for thread in passing:
            thread.join(timeout=5)
    if failed is None:
        return None
    others = [member for member in members if member is not failed]
    return f"{failed.describe()} {failed.ending()}; " + ", ".join(
        f"consumer {member.number} {member.ending()}" for member in others
    )
