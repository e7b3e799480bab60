"""Benchmarks of the read side: the stats API over HTTP, UV over a range, active users over a range."""

import datetime as dt
import gc
import http.client
import json
import logging
import os
import random
import re
import subprocess
import threading
import time
from pathlib import Path

from harness import (
    PYTHON,
    ROOT,
    BenchError,
    Environment,
    Row,
    Timer,
    median,
    percentile,
    wait_for_port,
)

log = logging.getLogger("bench.read")

WORKERS = 2  # gunicorn worker processes: one per core of the benchmark machine
# More gunicorn options to try a configuration (e.g. "-k gthread --threads 4"); the README's default is none.
GUNICORN_ARGS = os.environ.get("CPS_BENCH_GUNICORN_ARGS", "").split()


def seed_history(sizes) -> tuple[dt.date, dt.date, int]:
    """Reconciled day rows for every partner over the API range, up to yesterday; return (start, end, rows)."""
    import common

    today = common.today()
    start = today - dt.timedelta(days=sizes.api_days - 1)
    log.info("API: writing %d days x %d partners of reconciled history", sizes.api_days - 1, sizes.partners)
    with Timer() as timer:
        rows = common.seed_daily_history(start=start, end=today - dt.timedelta(days=1))
    log.info("API: %s day rows in %.1f s", f"{rows:,}", timer.seconds)
    return start, today, rows


def _portal_sample(sizes) -> list[str]:
    import common

    codes = common.partner_codes()
    rng = random.Random(17)
    sample = [codes[0]] + rng.sample(codes[1:], min(len(codes) - 1, sizes.api_portals - 1))
    return sample


def _server_env(env: Environment) -> dict[str, str]:
    """The API server's environment: production settings, the live prefix (today's counters of the consume run)."""
    static_root = env.work_dir / "static"  # nothing collected: the API serves no static file
    static_root.mkdir(exist_ok=True)
    return env.child_env(CPS_REDIS_PREFIX=env.prefix("live"), CPS_STATIC_ROOT=str(static_root))


def _start_gunicorn(env: Environment) -> int:
    """gunicorn with the product's production settings, as the README runs it; return the port it chose."""
    server_env = _server_env(env)
    server = env.spawn(
        "gunicorn",
        [
            PYTHON,
            "-m",
            "gunicorn",
            "cpsproject.wsgi",
            "-b",
            "127.0.0.1:0",
            "-w",
            str(WORKERS),
            # No control socket (~/.gunicorn/gunicorn.ctl): a test run's gunicorn may run beside this one.
            "--no-control-socket",
            *GUNICORN_ARGS,
        ],
        env=server_env,
    )
    deadline = time.monotonic() + 60
    while True:
        text = server.log_path.read_text(errors="replace")
        found = re.search(r"Listening at: http://127\.0\.0\.1:(\d+)", text)
        if found and text.count("Booting worker") >= WORKERS:
            break
        if server.process.poll() is not None or time.monotonic() > deadline:
            raise BenchError(f"gunicorn did not start:\n{server.tail()}")
        time.sleep(0.1)
    port = int(found.group(1))
    wait_for_port(port, process=server.process, what="gunicorn", timeout=30)
    return port


STATS_PATH = "/api/v1/partners/{code}/stats/?{query}"
CONVERSIONS_PATH = "/api/v1/partners/{code}/conversions/?{query}"
ORDERS_PATH = "/api/v1/orders/?partner={code}&{query}"


class _Client:
    """One keep-alive connection that GETs a partner's page (its stats by default) with its portal token."""

    def __init__(self, port: int, query: str, path: str = STATS_PATH) -> None:
        self.port, self.query, self.path = port, query, path
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def get(self, code: str, token: str) -> str | None:
        """GET once; return None, or what went wrong."""
        try:
            self.connection.request(
                "GET",
                self.path.format(code=code, query=self.query),
                headers={"Authorization": f"Token {token}"},
            )
            response = self.connection.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.reconnect()
            return f"{type(exc).__name__}: {exc}"
        if response.will_close:
            self.reconnect()
        return None if response.status == 200 else f"HTTP {response.status}: {body[:200]!r}"

    def reconnect(self) -> None:
        self.connection.close()
        self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)


def _closed_loop(
    port: int, plan: list[tuple[str, str]], *, clients: int, requests: int, query: str
) -> tuple[list[float], float]:
    """``clients`` threads, each with a keep-alive connection, send ``requests`` GETs in all, each as soon as
    its previous one is answered: what the server does at saturation."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)
    per_client = [requests // clients + (1 if n < requests % clients else 0) for n in range(clients)]

    def client(n: int) -> None:
        rng = random.Random(n)
        connection = _Client(port, query)
        mine = []
        barrier.wait()
        for _ in range(per_client[n]):
            started = time.perf_counter()
            error = connection.get(*rng.choice(plan))
            mine.append(time.perf_counter() - started)
            if error:
                with lock:
                    errors.append(error)
        connection.connection.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(clients)]
    with Timer() as wall:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
    if errors:
        raise BenchError(f"{len(errors)} API requests failed, e.g. {errors[0]}")
    return latencies, wall.seconds


def _open_loop(
    port: int,
    plan: list[tuple[str, str]],
    *,
    rate: float,
    seconds: float,
    query: str,
    path: str = STATS_PATH,
) -> tuple[list[float], float]:
    """Requests at a steady ``rate`` per second for ``seconds``, whatever the answers take (open loop).

    Request i is due at ``i / rate``; its latency counts from then, not from when a connection was free to
    send it, so a slow answer that delays the next sends shows in their latencies (no coordinated omission).
    Return the latencies and the rate actually sent.
    """
    total = max(1, round(rate * seconds))
    senders = 32  # more connections than requests in flight at the rate, unless the server falls behind
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    counter = iter(range(total))
    rng = random.Random(5)
    picks = [rng.choice(plan) for _ in range(total)]
    began = time.perf_counter() + 0.2

    def sender() -> None:
        connection = _Client(port, query, path)
        mine = []
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            due = began + i / rate
            if (wait := due - time.perf_counter()) > 0:
                time.sleep(wait)
            error = connection.get(*picks[i])
            mine.append(time.perf_counter() - due)
            if error:
                with lock:
                    errors.append(error)
        connection.connection.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=sender, daemon=True) for _ in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    if errors:
        raise BenchError(f"{len(errors)} API requests failed, e.g. {errors[0]}")
    return latencies, total / (time.perf_counter() - began)


def _profile_in_process(env: Environment, plan: list[tuple[str, str]], query: str, profile: Path) -> None:
    """CPU per request inside Django and its profile (``api_profile.py``) for each resource the bench reads,
    logged and kept under ``profile`` (``api-<resource>.prof``, ``api-<resource>.txt``)."""
    plan_path = env.work_dir / "api-plan.json"
    plan_path.write_text(json.dumps(plan))
    for resource in ("stats", "conversions", "orders"):
        done = subprocess.run(
            [
                PYTHON,
                str(Path(__file__).with_name("api_profile.py")),
                "--plan",
                str(plan_path),
                "--query",
                query,
            ]
            + ["--resource", resource, "--requests", "300", "--out", str(profile / f"api-{resource}.prof")],
            cwd=ROOT,
            env=_server_env(env),
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode:
            raise BenchError(f"api_profile.py --resource {resource} failed:\n{done.stderr[-2000:]}")
        (profile / f"api-{resource}.txt").write_text(done.stdout)
        log.info(
            "API in-process: %s (profile: %s)", done.stdout.splitlines()[0], profile / f"api-{resource}.txt"
        )


def api_rows(
    env: Environment, sizes, *, start: dt.date, end: dt.date, profile: Path | None = None
) -> list[Row]:
    import common

    codes = _portal_sample(sizes)
    tokens = common.portal_tokens(codes)
    plan = [(code, tokens[code]) for code in codes]
    port = _start_gunicorn(env)
    query = f"start={start.isoformat()}&end={end.isoformat()}"
    days = (end - start).days + 1
    setup = (
        f"GET partners/{{code}}/stats/ over {days} days, {len(plan)} portal tokens of {sizes.partners:,} "
        f"partners; gunicorn -w {WORKERS} {' '.join(GUNICORN_ARGS) or '(sync workers)'}, production settings"
    )
    # Every token once: the first request of a partner fills its final-days cache from SQL,
    # and a worker's first requests import and connect; the figures are of the steady state after that.
    log.info("API: warming up gunicorn (%d workers): every token, then 4 clients", WORKERS)
    warm = _Client(port, query)
    for code, token in plan:
        if error := warm.get(code, token):
            raise BenchError(f"the warm-up request of {code} failed: {error}")
    _closed_loop(port, plan, clients=4, requests=4 * len(plan), query=query)

    log.info("API: %.0f requests/s for %.0f s (open loop)", sizes.api_rate, sizes.api_open_seconds)
    steady, sent = _open_loop(port, plan, rate=sizes.api_rate, seconds=sizes.api_open_seconds, query=query)
    p50, p95 = median(steady) * 1000, percentile(steady, 0.95) * 1000
    log.info("API: open loop p50 %.1f ms, p95 %.1f ms at %.0f requests/s", p50, p95, sent)
    open_row = Row(
        "API p95 at 100 req/s",
        p95,
        "ms",
        target="< 25 ms",
        note=f"{setup}; {len(steady)} requests at a steady {sent:.0f}/s (open loop, latency from each "
        f"request's due time); p50 {p50:.1f} ms",
    )
    open_row.met = p95 < 25
    conversions_row = _conversions_row(port, plan, sizes, query=query, days=days, stats_p95=p95)

    log.info("API: %d requests from %d closed-loop clients", sizes.api_requests, sizes.api_clients)
    latencies, wall = _closed_loop(
        port, plan, clients=sizes.api_clients, requests=sizes.api_requests, query=query
    )
    throughput = len(latencies) / wall
    log.info(
        "API: saturation %.0f requests/s, p50 %.1f ms, p95 %.1f ms",
        throughput,
        median(latencies) * 1000,
        percentile(latencies, 0.95) * 1000,
    )
    saturation = Row(
        "API throughput, 20 clients",
        throughput,
        "requests/s",
        target=">= 500 requests/s",
        note=f"{setup}; {sizes.api_clients} closed-loop clients with keep-alive connections, {len(latencies)} "
        f"requests; p50 {median(latencies) * 1000:.1f} ms, p95 {percentile(latencies, 0.95) * 1000:.1f} ms",
    )
    saturation.met = throughput >= 500
    if profile:
        _profile_in_process(env, plan, query, profile)
    return [open_row, conversions_row, saturation]


def _conversions_row(
    port: int, plan: list[tuple[str, str]], sizes, *, query: str, days: int, stats_p95: float
) -> Row:
    """The conversions API at the stats API's rate, half of the time each: a partner's conversions per day, and
    its orders (the first page), with the same portal tokens, beside the stats API's p95 (the baseline)."""
    import common

    latencies: dict[str, list[float]] = {}
    alone: dict[str, float] = {}  # the median of one client's requests in turn: a request's own time
    for name, path in (("conversions", CONVERSIONS_PATH), ("orders", ORDERS_PATH)):
        warm = _Client(port, query, path)
        for _ in range(2):  # the first round fills caches; the second is timed
            timed = []
            for code, token in plan:
                started = time.perf_counter()
                if error := warm.get(code, token):
                    raise BenchError(f"the warm-up request of {name} of {code} failed: {error}")
                timed.append(time.perf_counter() - started)
        alone[name] = median(timed) * 1000
        log.info(
            "API: GET %s at %.0f requests/s for %.0f s", path, sizes.api_rate, sizes.api_open_seconds / 2
        )
        latencies[name], _ = _open_loop(
            port, plan, rate=sizes.api_rate, seconds=sizes.api_open_seconds / 2, query=query, path=path
        )
    every = [latency for some in latencies.values() for latency in some]
    p95 = percentile(every, 0.95) * 1000
    each = ", ".join(
        f"{name} {percentile(some, 0.95) * 1000:.1f} ms (one client alone: p50 {alone[name]:.1f} ms)"
        for name, some in latencies.items()
    )
    log.info("API: conversions p95 %.1f ms (%s)", p95, each)
    row = Row(
        "conversions API p95 at 100 req/s",
        p95,
        "ms",
        target="< 25 ms",
        baseline=stats_p95,
        note=f"GET partners/{{code}}/conversions/ over {days} days and GET orders/?partner={{code}} over the "
        f"same days, {sizes.api_open_seconds / 2:.0f} s each at {sizes.api_rate:.0f}/s (open loop), the "
        f"stats row's tokens and server; {common.order_count():,} orders in the database; p95 {each}; "
        "baseline: the stats API's p95 of the row above",
    )
    row.met = p95 < 25
    return row


def uv_rows(env: Environment, sizes) -> list[Row]:
    import common

    end = common.today()
    start = end - dt.timedelta(days=sizes.uv_days - 1)
    codes = _portal_sample(sizes)
    samples = []
    with common.redis_prefix(env.prefix("live")):
        common.uv_between(codes[0], start, end)  # warm-up: connections, the partner lookups' first query
        for n in range(sizes.uv_calls):
            code = codes[n % len(codes)]
            with Timer() as timer:
                common.uv_between(code, start, end)
            samples.append(timer.seconds * 1000)
    value = percentile(samples, 0.95)
    log.info("UV over %d days: p50 %.1f ms, p95 %.1f ms", sizes.uv_days, median(samples), value)
    row = Row(
        "UV range p95",
        value,
        "ms",
        target="< 50 ms",
        note=f"subtree UV over {sizes.uv_days} days (stored HyperLogLogs + Redis), {len(samples)} calls over "
        f"{len(codes)} partners, in-process; p50 {median(samples):.1f} ms",
    )
    row.met = value < 50
    return [row]


def login_rows(env: Environment, sizes) -> list[Row]:
    import common

    end = common.today() - dt.timedelta(days=1)
    days = [end - dt.timedelta(days=n) for n in range(sizes.login_days)][::-1]
    with common.redis_prefix(env.prefix("logins")):
        log.info(
            "logins: loading %s active of %s user ids over %d days",
            f"{sizes.login_active:,}",
            f"{sizes.login_ids:,}",
            len(days),
        )
        with Timer() as timer:
            expected = common.load_logins(
                user_type="client", id_space=sizes.login_ids, active=sizes.login_active, days=days
            )
        log.info("logins: loaded in %.1f s", timer.seconds)
        # Nothing is cached between runs: each one ORs the thirty days afresh.
        ordered, runs, cpu = sorted(expected), [], []
        # A call allocates ~25,000 objects, so every third one or so sets off a full collection, which walks
        # every object this runner holds: the expected million ids and what the stages before left behind
        # (a median of 187 ms after the whole run's stages against 53 alone, 129-239 ms of it collecting).
        # A web worker holds none of that: frozen out of the collector while the calls are timed.
        gc.collect()
        gc.freeze()
        try:
            for _ in range(sizes.login_runs):
                started = time.process_time()
                with Timer() as timer:
                    found = common.active_user_ids(user_type="client", start=days[0], end=days[-1])
                runs.append(timer.seconds * 1000)
                cpu.append((time.process_time() - started) * 1000)
                if found.tolist() != ordered:
                    raise BenchError(
                        f"active_user_ids found {len(found)} users, expected {len(expected)} in order"
                    )
            # What the API serves instead of the whole list: the count and a page of 100 from deep inside.
            pages = []
            for run in range(sizes.login_runs):
                offset = (run + 1) * len(ordered) // (sizes.login_runs + 1)
                with Timer() as timer:
                    count, page = common.active_page(
                        user_type="client", start=days[0], end=days[-1], offset=offset, limit=100
                    )
                pages.append(timer.seconds * 1000)
                if count != len(ordered) or page != ordered[offset : offset + 100]:
                    raise BenchError(
                        f"active_page at offset {offset} answered {count} users and a wrong page"
                    )
        finally:
            gc.unfreeze()
        with Timer() as baseline:
            counted = common.active_users_by_key_scan(user_type="client", start=days[0], end=days[-1])
        if counted != len(expected):
            raise BenchError(f"the per-user key scan counted {counted} users, expected {len(expected)}")
    value = median(runs)
    log.info(
        "logins: %.1f ms median (runs %s; CPU %s), baseline %.0f ms",
        value,
        ", ".join(f"{r:.0f}" for r in runs),
        ", ".join(f"{c:.0f}" for c in cpu),
        baseline.seconds * 1000,
    )
    row = Row(
        "logins active range",
        value,
        "ms",
        target="< 100 ms",
        baseline=baseline.seconds * 1000,
        note=f"ids of users active over {len(days)} days: {len(expected):,} of {sizes.login_ids:,} user ids; median "
        f"of {len(runs)} runs of active_user_ids (an int64 array; {median(cpu):.0f} ms of it CPU in this process); "
        f"the API's count + a page of 100 (active_page): "
        f"{median(pages):.0f} ms median; baseline: SSCAN the month indexes + GET every per-user key",
    )
    row.met = value < 100
    return [row]
