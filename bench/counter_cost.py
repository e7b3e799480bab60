"""What the consumer's counters cost Redis per event, each script and command apart: what chooses each step of
the Redis cost work (issue 35) and shows it before and after.

Replays a file of ``manage.py simulate`` events through every registered counter
(``stats.pipeline.registry.queue_counters``, or the ones ``--counter`` names), in batches cut as the consumer
cuts them (one partition's share per MULTI/EXEC, offsets rising), against the Redis of ``REDIS_URL``: use a
private server, since ``INFO cpu`` is the whole server's. Prints Redis CPU per event (``used_cpu_user`` +
``used_cpu_sys`` around the replay) and ``INFO commandstats`` per event::

    .venv/bin/python manage.py simulate --events 300000 --users 100000 --rate 3600 --seed 7 --to file:EV
    REDIS_URL=redis://127.0.0.1:6391/0 DATABASE_URL=... .venv/bin/python bench/counter_cost.py EV --batch 9500

``INFO cpu`` moves by 10-30 % between identical runs on a shared machine, more than most single steps change.
``--callgrind PID`` counts the instructions Redis executes instead, the same to 0.1 % run after run: start the
server under valgrind with instrumentation off, and the replay turns it on for the measured part only (it is
about 50 times slower; give the client a long ``socket_timeout``)::

    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=/tmp/cg.%p.out \
        redis-server --port 6392 --save '' --appendonly no --hll-sparse-max-bytes 1000 &
    REDIS_URL='redis://127.0.0.1:6392/0?socket_timeout=900' ... bench/counter_cost.py EV --after EARLIER \
        --batch 19000 --callgrind "$(pgrep -f 'callgrind.*6392')"

``callgrind_annotate`` on the file it names shows where they go. Instructions compare two versions of a script;
they are not time: the attribution views' big hashes run at a third of the counters' instructions per µs
(cache misses), so ``INFO cpu`` is still the figure in µs.

``--recorder "partner views"`` also runs conversions' attribution views on each share (``--counter none`` for
them alone). Counters' hashes grow, and Redis keeps a small hash as a listpack searched from its start, so a
replay after a longer ``--after`` file (3,000,000 events, a quarter of an hour at 3,600/s) measures a consumer
that has run for a while: see ``bench/redis_cost.md``.
"""

import argparse
import datetime as dt
import glob
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cpsproject.settings")

import django  # noqa: E402

django.setup()

from common import parsed_events, redis_cpu_seconds  # noqa: E402
from django_redis import get_redis_connection  # noqa: E402

from stats.counters.rankings import top_partners  # noqa: E402
from stats.counters.rankings import windows as ranking_windows  # noqa: E402
from stats.pipeline import registry  # noqa: E402
from stats.pipeline.events import Event  # noqa: E402
from stats.pipeline.partitions import queue_register  # noqa: E402
from stats.pipeline.registry import CounterWrites  # noqa: E402


def _replay(
    client,
    events: list[Event],
    *,
    batch: int,
    partitions: int,
    counters: set[str] | None,
    recorders: set[str],
) -> None:
    if counters:  # only the named counters: the others' specs set aside for the replay
        kept = {name: spec for name, spec in registry._counters.items() if name in counters}
        registry._counters.clear()
        registry._counters.update(kept)
    # The named recorders run on each share before its counters' MULTI/EXEC, as in the pipeline.
    recording = {name: spec for name, spec in registry._recorders.items() if name in recorders}
    # The replay's moment is its last event's, not the clock's: the rankings' windows are read from it, and a
    # replay run an hour after its file was simulated counted fewer slots in them.
    now = max(event.ts for event in events) + dt.timedelta(seconds=1)
    read = dict.fromkeys(range(partitions), 0)
    for number, start in enumerate(range(0, len(events), batch)):
        share = events[start : start + batch]
        partition = number % partitions
        pipe = client.pipeline(transaction=True)
        writes = CounterWrites(
            partition,
            fenced=pipe,
            idempotent=pipe,
            first_offset=read[partition],
            next_offset=read[partition] + len(share),
        )
        read[partition] += len(share)
        for spec in recording.values():
            typed = [event for event in share if event.type == spec.event_type]
            for event in typed:
                event.partition = partition  # as parse_batch notes it
            spec.record(typed, batch=None)
        registry.queue_counters(writes, share, now=now)
        queue_register(pipe, partition)  # as the pipeline does: the reads walk the registered partitions
        pipe.execute()


def _callgrind(pid: str, *command: str) -> None:
    subprocess.run(["callgrind_control", *command, pid], check=True, capture_output=True)


def _callgrind_total(pid: str) -> tuple[int, str]:
    """Dump the server's counts; return their total and the file they went to."""
    before = set(glob.glob(f"/tmp/cg.{pid}.out*"))
    _callgrind(pid, "--dump")
    while not (dumped := set(glob.glob(f"/tmp/cg.{pid}.out*")) - before):
        time.sleep(0.2)
    profile = dumped.pop()
    annotated = subprocess.run(["callgrind_annotate", profile], capture_output=True, text=True, check=True)
    total = next(line for line in annotated.stdout.splitlines() if "PROGRAM TOTALS" in line)
    return int(total.split()[0].replace(",", "")), profile


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("events", type=Path)
    parser.add_argument("--batch", type=int, default=9500, help="events per partition's apply")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--counter", action="append", help="replay only this registered counter (repeatable)")
    parser.add_argument(
        "--recorder",
        action="append",
        help='also run this registered recorder on each share, e.g. "partner views" (conversions\' attribution '
        "views; repeatable)",
    )
    parser.add_argument(
        "--after",
        type=Path,
        help="replay this file first, unmeasured: the counters' keys then exist, as under a consumer that has run "
        "for a while (the events file should continue it in time)",
    )
    parser.add_argument(
        "--read-rankings",
        type=int,
        default=0,
        metavar="N",
        help="after the replay, time N reads of each ranking window and scope (what the dashboard makes)",
    )
    parser.add_argument(
        "--callgrind",
        metavar="PID",
        help="the Redis of REDIS_URL runs under valgrind's callgrind (this process id): count its instructions",
    )
    args = parser.parse_args()
    events = parsed_events(args.events)
    client = get_redis_connection("default")
    client.flushdb()
    counters, recorders = set(args.counter or ()), set(args.recorder or ())
    unknown = recorders - set(registry._recorders)
    if unknown:
        parser.error(
            f"no recorder named {', '.join(sorted(unknown))}; registered: {', '.join(registry._recorders)}"
        )
    replay = {
        "batch": args.batch,
        "partitions": args.partitions,
        "counters": counters,
        "recorders": recorders,
    }
    if args.after:
        _replay(client, parsed_events(args.after), **replay)
    client.config_resetstat()
    if args.callgrind:
        _callgrind(args.callgrind, "-z")  # what the server did before (the --after replay) is not counted
        _callgrind(args.callgrind, "--instr=on")
    before, began = redis_cpu_seconds(client), time.process_time()
    _replay(client, events, **replay)
    spent, python = redis_cpu_seconds(client) - before, time.process_time() - began
    n = len(events)
    print(
        f"{n:,} events in batches of {args.batch}: Redis {spent / n * 1e6:.2f} µs/event; "
        f"replay (build, pack, wait) {python / n * 1e6:.2f} µs/event"
    )
    if args.callgrind:
        _callgrind(args.callgrind, "--instr=off")
        instructions, profile = _callgrind_total(args.callgrind)
        print(f"Redis executed {instructions:,} instructions: {instructions / n:,.0f} an event ({profile})")
    for name, stats in sorted(client.info("commandstats").items()):
        if name not in ("cmdstat_info", "cmdstat_config", "cmdstat_flushdb"):
            calls, usec = stats["calls"], stats["usec"]
            print(f"  {name[8:]:10s} {calls:>9,} calls, {calls / n:6.3f}/event, {usec / n:6.2f} µs/event")
    if args.read_rankings:
        _time_ranking_reads(client, args.read_rankings, now=max(event.ts for event in events))
    return 0


def _time_ranking_reads(client, reads: int, *, now: dt.datetime) -> None:
    """p50 and p95 of a whole ranking read (every partner of the window, top 10), with the Redis CPU per read."""
    for window in ranking_windows():
        for scope in ("tree", "self"):
            times, before = [], redis_cpu_seconds(client)
            for _ in range(reads):
                began = time.perf_counter()
                top_partners(window=window, scope=scope, limit=10, now=now)
                times.append((time.perf_counter() - began) * 1000)
            redis_ms = (redis_cpu_seconds(client) - before) / reads * 1000
            times.sort()
            p50, p95 = times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.95))]
            print(
                f"  ranking {window:>3s} {scope:4s}: p50 {p50:6.2f} ms, p95 {p95:6.2f} ms, Redis {redis_ms:.2f} ms a read"
            )


if __name__ == "__main__":
    raise SystemExit(main())
