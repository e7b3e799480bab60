"""Real processes for the fault suite: ``manage.py`` children, CPU burners, a private ``redis-server``.

Every process started here is killed in a ``finally``; every wait has a deadline. Output goes to files, never
to pipes, so a chatty child cannot block on a full pipe while the test waits for it.
"""

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT, free_port, subprocess_env

log = logging.getLogger("reliability")


# What a batch may cost a consumer of this suite at worst, on a 2-core machine other work keeps busy: a second
# for its round trips (fetch, archive, Redis, commit) and a millisecond an event for parsing and counting, on
# top of any sleep the scenario injects. A quiet machine does it four to ten times faster.
BATCH_SECONDS = 1.0
EVENT_SECONDS = 0.001
# Starting ``manage.py``, joining the group (the broker answers a join after half a session) and a rebalance.
START_SECONDS = 60.0


def counting_seconds(events: int, *, batch: int, sleep: float = 0.0) -> float:
    """Return the longest a consumer may take to count ``events`` in batches of ``batch``, each sleeping ``sleep``."""
    batches = -(-max(events, 0) // batch)
    return batches * (sleep + BATCH_SECONDS + batch * EVENT_SECONDS)


def patience(events: int, *, batch: int, sleep: float = 0.0, more: float = 0.0) -> float:
    """Return how long to wait for a consumer to count ``events``: it grows with them, so a long run waits longer.

    ``more`` adds what the scenario itself takes beyond starting and counting (session timeouts, an idle limit).
    """
    return START_SECONDS + counting_seconds(events, batch=batch, sleep=sleep) + more


def wait_until(condition: Callable[[], bool], *, seconds: float, what: str, every: float = 0.1) -> float:
    """Wait for ``condition``; return the seconds it took, or fail naming ``what``."""
    began = time.monotonic()
    deadline = began + seconds
    while not condition():
        assert time.monotonic() < deadline, f"waited {seconds:.0f} s for {what}"
        time.sleep(every)
    return time.monotonic() - began


@dataclass(eq=False)
class Child:
    """A ``manage.py`` child process with its output in files."""

    name: str
    process: subprocess.Popen
    out: Path
    err: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait(self, seconds: float) -> int:
        try:
            return self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired as exc:
            self.kill()
            tail = self.stderr()[-3000:]
            raise AssertionError(f"{self.name} still running after {seconds:.0f} s; stderr:\n{tail}") from exc

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
            self.process.wait(timeout=10)

    def terminate(self, seconds: float = 30) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.wait(seconds)


class Children:
    """Start ``manage.py`` commands for one test; ``close`` kills whatever is still running."""

    def __init__(self, settings, directory: Path):
        self.settings, self.directory, self.started = settings, directory, []
        self._n = 0

    def start(self, *args: str, cpus: set[int] | None = None, **env: str) -> Child:
        """Start ``manage.py *args``; ``cpus`` confines it (and the threads it starts) to those cores."""
        self._n += 1
        name = f"{args[0]}-{self._n}"
        out, err = self.directory / f"{name}.out", self.directory / f"{name}.err"
        with out.open("w") as stdout, err.open("w") as stderr:
            process = subprocess.Popen(
                [sys.executable, "manage.py", *args],
                cwd=ROOT,
                env=subprocess_env(self.settings, **env),
                stdout=stdout,
                stderr=stderr,
                preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
            )
        child = Child(name, process, out, err)
        self.started.append(child)
        return child

    def run(self, *args: str, seconds: float = 300, **env: str) -> Child:
        child = self.start(*args, **env)
        child.wait(seconds)
        return child

    def close(self) -> None:
        for child in self.started:
            child.kill()


@contextlib.contextmanager
def cpu_burners(count: int, *, cpus: set[int]) -> Iterator[list[subprocess.Popen]]:
    """Keep ``count`` processes spinning on the cores ``cpus`` (a loaded machine) until the block ends.

    The load is confined to the cores the process under test is confined to: it starves just as it would on a
    machine loaded everywhere, while the tests that run beside it (pytest-xdist) keep the other cores.
    """
    burners = [
        subprocess.Popen(
            [sys.executable, "-c", "while True: pass"], preexec_fn=lambda: os.sched_setaffinity(0, cpus)
        )
        for _ in range(count)
    ]
    log.info("started %d CPU-burning processes on cores %s", count, sorted(cpus))
    try:
        yield burners
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait(timeout=10)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


class PrivateRedis:
    """A ``redis-server`` of our own, without persistence, on a free port: restartable, empty after restart."""

    def __init__(self, directory: Path):
        self.binary = shutil.which("redis-server")
        assert self.binary, "redis-server is not installed (apt-get install redis-server)"
        self.port, self.directory, self.process = free_port(), directory, None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            cwd=self.directory,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(lambda: _listening(self.port), seconds=15, what=f"redis-server on port {self.port}")
        log.info("private redis-server up on port %d (no persistence)", self.port)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        log.info("private redis-server on port %d killed", self.port)


def dead_port() -> int:
    """A loopback port nothing listens on."""
    port = free_port()
    assert not _listening(port)
    return port


def loaded_cores() -> set[int]:
    """The cores a loaded-machine test confines its process and its burners to: one, the last we may use."""
    return {max(os.sched_getaffinity(0))}
