"""``scripts/demo``'s shell helpers: the redis-server the demo starts is the one it stops."""

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.one_pass("sqlite")  # each test starts a redis-server of its own

ROOT = Path(__file__).resolve().parents[2]


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_lib(script: str) -> str:
    done = subprocess.run(
        ["bash", "-c", f"source scripts/lib.sh; {script}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def stop_leftover(port: int) -> None:
    """Stop the redis-server a failed test left on ``port``, by its pid file; remove its log."""
    with contextlib.suppress(FileNotFoundError, ProcessLookupError, ValueError):
        pid = int((ROOT / ".run" / f"redis-{port}.pid").read_text())
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):  # redis-server reopens its log for every line, its last ones included
            os.kill(pid, 0)
            time.sleep(0.1)
    (ROOT / ".run" / f"redis-{port}.log").unlink(missing_ok=True)


def test_the_redis_server_the_demo_started_is_stopped_with_it():
    port = unused_port()
    try:
        out = run_lib(
            f'ensure_redis {port} >/dev/null; echo "started=$STARTED_REDIS"; '
            f'port_open {port} && echo up; stop_redis "$STARTED_REDIS"; port_open {port} || echo down'
        )
    finally:
        stop_leftover(port)
    assert out.splitlines() == [f"started={ROOT}/.run/redis-{port}.pid", "up", "down"]


def test_a_redis_server_that_was_already_listening_is_left_running():
    port = unused_port()
    run_lib(f"ensure_redis {port} >/dev/null")  # someone else's, as far as the next call can tell
    try:
        out = run_lib(
            f'ensure_redis {port}; echo "started=$STARTED_REDIS"; stop_redis "$STARTED_REDIS"; '
            f"port_open {port} && echo up"
        )
        assert out.splitlines() == ["started=", "up"]
    finally:
        stop_leftover(port)
