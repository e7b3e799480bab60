"""Scale-out: three ``consume`` processes on a six-partition topic, against one Redis and against a
three-master Redis Cluster, in the same run (bench/README.md, "Scaling out").

    .venv/bin/python bench/scaleout.py [--quick] [--events N] [--json PATH]

Each target gets a fresh topic of ``--events`` messages (``manage.py simulate --to kafka``, live traffic at
3,600 events/s up to now) and a ``redis-server`` of this run's own, so the CPU read is the product's alone:
a private single Redis, then a cluster of three masters without replicas (replication would charge the
masters for work the single Redis does not do). The rate is the slope of the group's committed offsets
between 20 % and 90 % of the topic, from the moment all three consumers hold partitions; each node's CPU
(``INFO cpu``, user + system) and commands (``INFO stats``) are read over the same window. For the cluster
the row gives each master's share of both.

Exit status 0 when every figure was measured, 1 when a run failed (its row says why).
"""

import argparse
import dataclasses
import json
import logging
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import (  # noqa: E402
    BenchError,
    CommittedOffsets,
    Environment,
    Row,
    failed_rows,
    format_table,
    free_port,
    holds_partitions,
    redis_reference_us,
    steady_window,
)

from stats.devtools.redis_cluster import LocalCluster, redis_server_bin  # noqa: E402

log = logging.getLogger("bench.scaleout")

CONSUMERS = 3
PARTITIONS = 6
RATE = 3600  # timestamps rise at this many events/s and end now, as the consume benchmark's


@dataclasses.dataclass(frozen=True)
class Sizes:
    events: int
    users: int
    batch: int
    partners: int
    idle_exit: float


FULL = Sizes(events=1_000_000, users=100_000, batch=32_000, partners=1000, idle_exit=3)
QUICK = Sizes(events=12_000, users=2000, batch=500, partners=30, idle_exit=1)


@dataclasses.dataclass
class Measured:
    rate: float
    events: int  # events in the steady window
    cpu: dict[int, float]  # port → CPU seconds in the window
    commands: dict[int, int]  # port → commands processed in the window


def _node_counters(ports: list[int]) -> tuple[dict[int, float], dict[int, int]]:
    import redis

    cpu, commands = {}, {}
    for port in ports:
        client = redis.Redis(port=port, socket_timeout=5)
        info = client.info("cpu")
        cpu[port] = float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
        commands[port] = int(client.info("stats")["total_commands_processed"])
        client.close()
    return cpu, commands


def consume_on(env: Environment, sizes: Sizes, *, url: str, cluster: bool, ports: list[int]) -> Measured:
    """Fill a fresh six-partition topic, drain it with three ``consume`` processes counting on ``url``."""
    from write_side import produce

    topic, _ = produce(env, events=sizes.events, users=sizes.users, rate=RATE, partitions=PARTITIONS)
    group = f"scaleout-{uuid.uuid4().hex[:8]}"
    child_env = env.child_env(
        KAFKA_TOPIC=topic,
        KAFKA_GROUP_ID=group,
        CPS_REDIS_PREFIX=env.prefix(f"scaleout-{uuid.uuid4().hex[:4]}"),
        REDIS_URL=url,
        REDIS_CLUSTER="1" if cluster else "0",
        LOG_LEVEL="INFO",
    )
    command = [
        sys.executable,
        str(Path(__file__).resolve().parent.parent / "manage.py"),
        "consume",
        "--batch-size",
        str(sizes.batch),
        "--exit-when-idle",
        str(sizes.idle_exit),
    ]
    consumers = [env.spawn(f"consume-{n}", command, env=child_env) for n in range(CONSUMERS)]
    committed = CommittedOffsets(env.bootstrap, topic=topic, group=group, partitions=PARTITIONS)

    samples: list[tuple[float, int]] = [(time.monotonic(), 0)]
    counters = [_node_counters(ports)]
    joined: int | None = None  # the first sample taken with every consumer holding partitions
    deadline = time.monotonic() + 120 + sizes.events / 1000
    next_log = time.monotonic() + 10
    try:
        while any(child.process.poll() is None for child in consumers):
            if joined is None and all(
                holds_partitions(child.log_path.read_text(errors="replace")) for child in consumers
            ):
                joined = len(samples)
            done = committed()
            if done is not None:
                samples.append((time.monotonic(), done))
                counters.append(_node_counters(ports))
            if time.monotonic() > next_log:
                log.info("consume: %s/%s events committed", f"{samples[-1][1]:,}", f"{sizes.events:,}")
                next_log += 10
            if time.monotonic() > deadline:
                raise BenchError(f"three consumers did not drain {sizes.events} events in time")
            time.sleep(0.25)
    finally:
        committed.close()
        for child in consumers:
            child.stop()
    failed = [child for child in consumers if child.process.returncode != 0]
    if failed:
        log.error("%s failed:\n%s", failed[0].name, failed[0].tail())
        # The last line names the exception: the row's note has room for it alone.
        raise BenchError(
            f"{failed[0].name} exited {failed[0].process.returncode}: {failed[0].tail(1).strip()}"
        )
    if samples[-1][1] < sizes.events:
        raise BenchError(f"the consumers exited with {samples[-1][1]} of {sizes.events} offsets committed")
    first, last = steady_window(samples, sizes.events, whole_group_from=joined)
    (cpu0, commands0), (cpu1, commands1) = counters[first], counters[last]
    events = samples[last][1] - samples[first][1]
    return Measured(
        rate=events / (samples[last][0] - samples[first][0]),
        events=events,
        cpu={port: cpu1[port] - cpu0[port] for port in ports},
        commands={port: commands1[port] - commands0[port] for port in ports},
    )


def single_redis(env: Environment, sizes: Sizes) -> tuple[Row, Measured]:
    import redis

    port = free_port()
    server = env.spawn(
        "redis-single",
        [redis_server_bin(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        env={},
    )
    try:
        from harness import wait_for_port

        wait_for_port(port, process=server.process, what="the private redis-server")
        measured = consume_on(env, sizes, url=f"redis://127.0.0.1:{port}/0", cluster=False, ports=[port])
        reference = redis_reference_us(redis.Redis(port=port), prefix=env.prefix("reference"))
    finally:
        server.stop()
    us = measured.cpu[port] * 1e6 / measured.events
    in_reference = f" ({us / reference:.2f} reference HINCRBYs of {reference:.2f} µs)" if reference else ""
    row = Row(
        "scale-out: one Redis",
        measured.rate,
        "events/s",
        note=f"Redis CPU {us:.1f} µs/event{in_reference}, "
        f"{measured.commands[port] / measured.events:.2f} commands/event",
    )
    return row, measured


def three_masters(env: Environment, sizes: Sizes, *, baseline: float | None) -> list[Row]:
    cluster = LocalCluster.on_free_ports(env.work_dir / "redis-cluster", masters=3, replicas=0)
    try:
        cluster.start()
        masters = cluster.master_ports()
        # Named through a node that does not serve slot 0: any node must do.
        url = f"redis://127.0.0.1:{masters[1]}/0"
        measured = consume_on(env, sizes, url=url, cluster=True, ports=masters)
    finally:
        cluster.stop()
    total_cpu, total_commands = sum(measured.cpu.values()), sum(measured.commands.values())
    cpu_shares = [measured.cpu[port] / total_cpu for port in masters]
    command_shares = [measured.commands[port] / total_commands for port in masters]
    us = total_cpu * 1e6 / measured.events
    shown = ", ".join(
        f"{port} {cpu:.0%} CPU / {commands:.0%} commands"
        for port, cpu, commands in zip(masters, cpu_shares, command_shares, strict=True)
    )
    rate = Row(
        "scale-out: 3-master cluster",
        measured.rate,
        "events/s",
        baseline=baseline,
        note=f"Redis CPU {us:.1f} µs/event over the three masters; masters: {shown}",
    )
    busiest = Row(
        "scale-out: busiest master",
        max(cpu_shares) * 100,
        "% of CPU",
        target="≤ 40 % (a third ± 20 %)",
        note="the masters' shares of the Redis CPU the cluster spent in the window",
    )
    busiest.met = all(abs(share - 1 / 3) <= 0.2 / 3 for share in cpu_shares)
    return [rate, busiest]


def run(sizes: Sizes, *, quick: bool) -> list[Row]:
    rows: list[Row] = []
    with Environment(quick=quick) as env:
        env.manage("import_partners", str(env.write_partner_csv(sizes.partners)), timeout=300)
        log.info(
            "== %d consumers, %d partitions, %s events each run", CONSUMERS, PARTITIONS, f"{sizes.events:,}"
        )
        baseline = None
        try:
            row, measured = single_redis(env, sizes)
            rows.append(row)
            baseline = measured.rate
        except Exception as exc:
            log.exception("the single Redis run failed")
            env.keep_logs = True
            rows.extend(failed_rows([("scale-out: one Redis", "events/s")], exc))
        try:
            rows.extend(three_masters(env, sizes, baseline=baseline))
        except Exception as exc:
            log.exception("the cluster run failed")
            env.keep_logs = True
            rows.extend(
                failed_rows(
                    [("scale-out: 3-master cluster", "events/s"), ("scale-out: busiest master", "% of CPU")],
                    exc,
                )
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: checks the runs work, times nothing"
    )
    parser.add_argument(
        "--events", type=int, help="messages per run (default 1,000,000; 12,000 with --quick)"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the rows as a JSON list")
    args = parser.parse_args(argv)
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    for name in ("bench", "stats.devtools.redis_cluster"):
        logging.getLogger(name).handlers[:] = [handler]
        logging.getLogger(name).setLevel(logging.INFO)
        logging.getLogger(name).propagate = False
    sizes = QUICK if args.quick else FULL
    if args.events:
        sizes = dataclasses.replace(sizes, events=args.events)
    started = time.monotonic()
    try:
        rows = run(sizes, quick=args.quick)
    except BenchError as exc:
        log.error("%s", exc)
        return 2
    print(format_table(rows))
    print(f"\n{'quick' if args.quick else 'full'} run: {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps([row.as_json() for row in rows], indent=2, ensure_ascii=False) + "\n")
    return 0 if all(row.value is not None for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
