"""Benchmarks of the read side: the stats API over HTTP, UV over a range, active users over a range."""

import datetime as dt
import http.client
import logging
import random
import threading
import time

from harness import (
    PYTHON,
    ROOT,
    BenchError,
    Environment,
    Row,
    Timer,
    free_port,
    median,
    percentile,
    wait_for_port,
)

log = logging.getLogger("bench.read")

WORKERS = 2  # web server processes: one per core of the benchmark machine


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


def _start_servers(env: Environment) -> int:
    port = free_port()
    server_env = env.child_env(CPS_REDIS_PREFIX=env.prefix("live"))
    workers = [
        env.spawn(f"web{n}", [PYTHON, str(ROOT / "bench" / "wsgi_server.py"), str(port)], env=server_env)
        for n in range(WORKERS)
    ]
    for worker in workers:
        wait_for_port(port, process=worker.process, what="the API server", timeout=60)
    time.sleep(1.0)  # let every worker bind, not only the first
    for worker in workers:
        if worker.process.poll() is not None:
            raise BenchError(f"an API server worker exited:\n{worker.tail()}")
    return port


def _load(
    port: int, plan: list[tuple[str, str]], *, clients: int, requests: int, query: str
) -> tuple[list[float], float]:
    """``clients`` threads, each with a keep-alive connection, send ``requests`` GETs in all (closed loop)."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)
    per_client = [requests // clients + (1 if n < requests % clients else 0) for n in range(clients)]

    def client(n: int) -> None:
        rng = random.Random(n)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine = []
        barrier.wait()
        for _ in range(per_client[n]):
            code, token = rng.choice(plan)
            started = time.perf_counter()
            try:
                connection.request(
                    "GET",
                    f"/api/v1/partners/{code}/stats/?{query}",
                    headers={"Authorization": f"Token {token}"},
                )
                response = connection.getresponse()
                body = response.read()
            except (OSError, http.client.HTTPException) as exc:
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
                continue
            mine.append(time.perf_counter() - started)
            if response.status != 200:
                with lock:
                    errors.append(f"HTTP {response.status}: {body[:200]!r}")
            if response.will_close:
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.close()
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


def api_rows(env: Environment, sizes, *, start: dt.date, end: dt.date) -> list[Row]:
    import common

    codes = _portal_sample(sizes)
    tokens = common.portal_tokens(codes)
    plan = [(code, tokens[code]) for code in codes]
    port = _start_servers(env)
    query = f"start={start.isoformat()}&end={end.isoformat()}"
    log.info(
        "API: warming up, then %d requests from %d clients (%d worker processes)",
        sizes.api_requests,
        sizes.api_clients,
        WORKERS,
    )
    _load(port, plan, clients=min(4, sizes.api_clients), requests=4 * min(4, sizes.api_clients), query=query)
    latencies, wall = _load(port, plan, clients=sizes.api_clients, requests=sizes.api_requests, query=query)
    p95 = percentile(latencies, 0.95) * 1000
    log.info(
        "API: p50 %.1f ms, p95 %.1f ms, %.0f requests/s", median(latencies) * 1000, p95, len(latencies) / wall
    )
    row = Row(
        "API stats p95",
        p95,
        "ms",
        target="< 50 ms",
        note=f"GET partners/{{code}}/stats/ over {(end - start).days + 1} days, {len(plan)} portal tokens of "
        f"{sizes.partners:,} partners, {sizes.api_clients} closed-loop clients, {len(latencies)} requests, "
        f"{WORKERS} server processes; p50 {median(latencies) * 1000:.1f} ms, {len(latencies) / wall:.0f} req/s",
    )
    row.met = p95 < 50
    return [row]


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
                raise BenchError(f"active_page at offset {offset} answered {count} users and a wrong page")
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
