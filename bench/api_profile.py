"""CPU per stats request inside Django, and where it goes: what chooses each step of the API's speed work.

Run by ``bench/read_side.py`` beside the gunicorn it measures (``bench/run.py --only api --profile DIR``), with
the server's environment (production settings, its Redis prefix and database), so it reads the same caches::

    api_profile.py --plan PLAN.json --query 'start=…&end=…' --requests 600 --out DIR/api.prof

It calls Django's WSGI handler directly, with no HTTP server and no client in the way: the figure is the CPU
the product spends per request (``time.process_time``), which neighbouring processes disturb far less than a
latency. It then profiles the same requests with a CPU clock and prints the functions that take the most.
"""

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path


def _environ(path: str, query: str, token: str) -> dict:
    return {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "HTTP_AUTHORIZATION": f"Token {token}",
        "HTTP_HOST": "127.0.0.1",
        "REMOTE_ADDR": "127.0.0.1",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.input": io.BytesIO(),
        "wsgi.errors": sys.stderr,
        "wsgi.url_scheme": "http",
        "wsgi.version": (1, 0),
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }


# The resources a portal reads, by the name ``--resource`` takes: each a path template of a partner's code.
RESOURCES = {
    "stats": "/api/v1/partners/{code}/stats/",
    "conversions": "/api/v1/partners/{code}/conversions/",
    "orders": "/api/v1/orders/?partner={code}",
}


def _send(handler, plan: list[tuple[str, str]], query: str, requests: int, resource: str = "stats") -> None:
    statuses = []

    def start_response(status, headers, exc_info=None):
        statuses.append(status)

    for n in range(requests):
        code, token = plan[n % len(plan)]
        path, _, own_query = RESOURCES[resource].format(code=code).partition("?")
        body = handler(_environ(path, "&".join(filter(None, [own_query, query])), token), start_response)
        b"".join(body)
        body.close()
        if not statuses[-1].startswith("200"):
            raise SystemExit(f"GET {resource} of {code}: {statuses[-1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", type=Path, required=True, help="JSON list of [partner code, token]")
    parser.add_argument("--query", required=True)
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--resource", choices=sorted(RESOURCES), default="stats")
    parser.add_argument("--out", type=Path, help="where to write the cProfile data")
    arguments = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the product, beside bench/
    import django

    django.setup()
    from django.core.handlers.wsgi import WSGIHandler

    handler = WSGIHandler()
    plan = [tuple(pair) for pair in json.loads(arguments.plan.read_text())]
    resource = arguments.resource
    # A first round: every partner's caches filled, connections made.
    _send(handler, plan, arguments.query, len(plan), resource)

    rounds = []
    for _ in range(3):
        started = time.process_time()
        _send(handler, plan, arguments.query, arguments.requests, resource)
        rounds.append((time.process_time() - started) / arguments.requests * 1000)
    rounds.sort()
    print(
        f"CPU per {resource} request in-process: median {rounds[1]:.2f} ms (rounds: {', '.join(f'{r:.2f}' for r in rounds)})"
    )

    profiler = cProfile.Profile(time.process_time)
    profiler.runcall(_send, handler, plan, arguments.query, arguments.requests, resource)
    if arguments.out:
        profiler.dump_stats(arguments.out)
    report = io.StringIO()
    pstats.Stats(profiler, stream=report).sort_stats("cumulative").print_stats(45)
    print(report.getvalue())


if __name__ == "__main__":
    main()
