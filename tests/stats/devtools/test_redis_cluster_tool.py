"""``python -m stats.devtools.redis_cluster``, the tool scripts/test starts its cluster with."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from stats.devtools.redis_cluster import free_first_port

pytestmark = pytest.mark.one_pass("sqlite")


def cluster_tool(command: str, directory: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "stats.devtools.redis_cluster", command, "--dir", str(directory), *options],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_start_on_a_port_someone_holds_says_so_in_one_line_and_starts_nothing(tmp_path):
    first = free_first_port(3)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", first + 1))
        holder.listen()
        done = cluster_tool("start", tmp_path, "--port", str(first), "--replicas", "0")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"could not start the Redis Cluster: port {first + 1} is taken (another Redis: a test cluster of another "
        "checkout?); stop it, or start this cluster on other ports (scripts/test: CPS_TEST_CLUSTER_PORT)"
    )
    assert not list(tmp_path.glob("redis-*.log"))  # no node was started


def test_a_port_a_stopped_cluster_left_in_time_wait_is_free_to_start_on(tmp_path):
    """CI once failed here: the suite's own cluster, stopped seconds before, left bus connections in TIME_WAIT."""
    first = free_first_port(3)
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", first + 1))
        listener.listen()
        with socket.create_connection(("127.0.0.1", first + 1)) as client:
            accepted, _ = listener.accept()
            accepted.close()  # the side that closes first keeps the port in TIME_WAIT
            client.recv(1)
    # What the TIME_WAIT does to a bind without SO_REUSEADDR, the check CI failed on.
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", first + 1))

    started = cluster_tool("start", tmp_path, "--port", str(first), "--replicas", "0")
    try:
        assert started.returncode == 0, started.stderr
    finally:
        cluster_tool("stop", tmp_path)
