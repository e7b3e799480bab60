"""Run every benchmark on real services and print one table (see bench/README.md).

    .venv/bin/python bench/run.py [--quick] [--json PATH] [--only GROUP,...] [--set SIZE=N] [--profile DIR]

Exit status 0 when every figure was measured (whether or not it meets its target), 1 when one failed.
"""

import argparse
import dataclasses
import datetime as dt
import importlib.util
import json
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import BenchError, Environment, Row, failed_rows, format_table  # noqa: E402

log = logging.getLogger("bench")

# Every figure, in table order, with its unit and the group that measures it.
FIGURES = [
    ("consume via broker", "events/s", "consume"),
    ("consume with 5% orders", "events/s", "orders"),
    ("Redis bytes per remembered buyer", "bytes", "orders"),
    ("consume, uncompressed topic", "events/s", "codecs"),
    ("consume, gzip topic", "events/s", "codecs"),
    ("consume, snappy topic", "events/s", "codecs"),
    ("consume, lz4 topic", "events/s", "codecs"),
    ("consume, zstd topic", "events/s", "codecs"),
    ("consume: archive stage", "events/s", "stages"),
    ("consume: counting stage", "events/s", "stages"),
    ("pipeline vs design doc 1", "events/s", "design"),
    ("consume peak RSS", "MB", "consume"),
    ("Redis CPU per event", "µs", "consume"),
    ("Redis CPU, reference HINCRBYs", "per event", "consume"),
    ("flush dirty buckets", "s", "flush"),
    ("reconcile a day", "s", "reconcile"),
    ("API p95 at 100 req/s", "ms", "api"),
    ("conversions API p95 at 100 req/s", "ms", "api"),
    ("API throughput, 20 clients", "requests/s", "api"),
    ("UV range p95", "ms", "uv"),
    ("logins active range", "ms", "logins"),
]
GROUPS = list(dict.fromkeys(group for _, _, group in FIGURES))


@dataclasses.dataclass(frozen=True)
class Sizes:
    partners: int
    consume_events: int  # messages produced and consumed through the broker (1% malformed)
    users: int  # openid pool of the simulated traffic
    batch: int  # consume --batch-size, and the in-process batch size
    idle_exit: float  # consume --exit-when-idle
    consume_processes: int  # consume --processes: members of the group, as production runs it
    # Timestamps of the consume topic rise at this many events per second and end now (live traffic): 10x the
    # design documents' peak of 360/s. 0: random moments of today (a replay of the day in any order).
    consume_rate: float
    codec_events: int  # messages per codec topic, produced by librdkafka (codecs: bench/write_side.py CODECS)
    stage_events: int
    pipeline_events: int
    doc1_events: int  # at most this many events through the design document's pattern…
    doc1_seconds: float  # …or for this long
    flush_buckets: int  # dirty buckets per partner
    flush_baseline_seconds: float  # the row-by-row baseline stops after this long and is extrapolated
    api_days: int
    api_clients: int
    api_requests: int
    api_portals: int  # partners whose portal tokens the clients use
    api_rate: float  # requests per second of the open-loop measurement…
    api_open_seconds: float  # …for this long
    uv_days: int
    uv_calls: int
    login_ids: int
    login_active: int
    login_days: int
    login_runs: int


FULL = Sizes(
    partners=1000,
    consume_events=1_010_000,
    users=100_000,
    batch=32_000,
    idle_exit=3,
    consume_processes=3,  # a member per partition of the bench's topics
    consume_rate=3600,
    codec_events=500_000,
    stage_events=100_000,
    pipeline_events=100_000,
    doc1_events=20_000,
    doc1_seconds=15,
    flush_buckets=100,
    flush_baseline_seconds=20,
    api_days=365,
    api_clients=20,
    api_requests=2000,
    api_portals=100,
    api_rate=100,
    api_open_seconds=20,
    uv_days=90,
    uv_calls=100,
    login_ids=10_000_000,
    login_active=1_000_000,
    login_days=30,
    login_runs=5,
)
QUICK = Sizes(
    partners=30,
    consume_events=4000,
    users=2000,
    batch=500,
    idle_exit=1,
    consume_processes=1,  # the quick run checks that every figure is reported, not how fast
    consume_rate=3600,
    codec_events=300,
    stage_events=2000,
    pipeline_events=2000,
    doc1_events=200,
    doc1_seconds=2,
    flush_buckets=20,
    flush_baseline_seconds=2,
    api_days=30,
    api_clients=20,
    api_requests=100,
    api_portals=10,
    api_rate=100,
    api_open_seconds=1,
    uv_days=90,
    uv_calls=10,
    login_ids=100_000,
    login_active=10_000,
    login_days=30,
    login_runs=3,
)


def _configure_logging() -> None:
    """Progress on stderr through ``logging`` (Django's settings configure the root logger; ours stays apart)."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False


def _figures_of(group: str) -> list[tuple[str, str]]:
    return [(figure, unit) for figure, unit, g in FIGURES if g == group]


def run(sizes: Sizes, groups: list[str], *, quick: bool, profile: Path | None) -> list[Row]:
    rows: list[Row] = []

    def measure(group: str, function, *args, **kwargs):
        if group not in groups:
            return None
        started = time.monotonic()
        log.info("== %s", group)
        try:
            result = function(*args, **kwargs)
        except Exception as exc:
            log.exception("benchmark %s failed", group)
            env.keep_logs = True
            rows.extend(failed_rows(_figures_of(group), exc))
            return None
        found, extra = result if isinstance(result, tuple) else (result, None)
        rows.extend(found)
        log.info("== %s done in %.0f s", group, time.monotonic() - started)
        return extra

    with Environment(quick=quick) as env:
        env.manage("import_partners", str(env.write_partner_csv(sizes.partners)), timeout=300)
        import common  # Django in this process, on the run's database (after migrate)
        import read_side
        import write_side

        _configure_logging()
        log.info(
            "database %s, Redis prefix %s*, %d partners",
            common.database_vendor(),
            env.prefix_base,
            sizes.partners,
        )
        day = measure("consume", write_side.consume_rows, env, sizes, profile=profile) or common.today()
        measure("orders", write_side.orders_rows, env, sizes, profile=profile)
        measure("codecs", write_side.codec_rows, env, sizes)
        history = None
        if {"api", "uv"} & set(groups):
            try:
                history = read_side.seed_history(sizes)
            except Exception as exc:
                log.exception("seeding the API history failed")
                env.keep_logs = True
                for group in ("api", "uv"):
                    if group in groups:
                        rows.extend(failed_rows(_figures_of(group), exc))
        if history:
            measure("api", read_side.api_rows, env, sizes, start=history[0], end=history[1], profile=profile)
            measure("uv", read_side.uv_rows, env, sizes)
        # Reconcile refuses a day that has not ended: it recounts the day before the consumed one, whose raw
        # events reconcile_rows archives first.
        measure("reconcile", write_side.reconcile_rows, env, sizes, day=day - dt.timedelta(days=1))
        measure("stages", write_side.stage_rows, env, sizes)
        measure("design", write_side.design_doc_rows, env, sizes)
        measure("flush", write_side.flush_rows, env, sizes)
        measure("logins", read_side.login_rows, env, sizes)
    order = {figure: n for n, (figure, _, _) in enumerate(FIGURES)}
    return sorted(rows, key=lambda row: order.get(row.figure, len(order)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: checks the benchmarks run, times nothing"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the rows as a JSON list")
    parser.add_argument("--only", metavar="GROUPS", help=f"comma-separated subset of: {', '.join(GROUPS)}")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="run the consume process under pyinstrument; reports go to DIR",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SIZE=N",
        help="override one size of the chosen set, e.g. --set consume_events=100000 (see Sizes in run.py)",
    )
    args = parser.parse_args(argv)
    groups = GROUPS if not args.only else [g.strip() for g in args.only.split(",") if g.strip()]
    unknown = set(groups) - set(GROUPS)
    if unknown:
        parser.error(f"unknown groups {sorted(unknown)}; choose from {', '.join(GROUPS)}")
    if args.profile:
        if importlib.util.find_spec("pyinstrument") is None:  # a tool for measuring only: not in requirements
            parser.error("--profile needs pyinstrument: .venv/bin/pip install pyinstrument")
        args.profile.mkdir(parents=True, exist_ok=True)
        args.profile = args.profile.resolve()
    _configure_logging()
    sizes = QUICK if args.quick else FULL
    for assignment in args.set:
        name, _, raw = assignment.partition("=")
        field = {f.name: f for f in dataclasses.fields(Sizes)}.get(name)
        if field is None or not raw:
            parser.error(
                f"--set {assignment}: expected SIZE=N with SIZE one of {', '.join(Sizes.__annotations__)}"
            )
        sizes = dataclasses.replace(
            sizes, **{name: (float if field.type == "float" or field.type is float else int)(raw)}
        )
    started = time.monotonic()
    load_before = os.getloadavg()
    try:
        rows = run(sizes, groups, quick=args.quick, profile=args.profile)
    except BenchError as exc:
        log.error("%s", exc)
        return 2
    print(format_table(rows))
    load = (
        " / ".join(f"{a:.1f}" for a in load_before) + " → " + " / ".join(f"{a:.1f}" for a in os.getloadavg())
    )
    print(
        f"\n{'quick' if args.quick else 'full'} run: {time.monotonic() - started:.0f} s; load average (1/5/15 min) {load}"
    )
    if args.json:
        args.json.write_text(json.dumps([row.as_json() for row in rows], indent=2, ensure_ascii=False) + "\n")
    return 0 if all(row.value is not None for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
