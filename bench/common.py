"""Shared set-up for the benchmarks: Django on its own SQLite file (or DATABASE_URL) and a private Redis prefix."""

import os
import resource
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cpsproject.settings")
os.environ.setdefault("DATABASE_URL", f"sqlite:///{ROOT / '.run' / 'bench.sqlite3'}")
os.environ.setdefault("CPS_REDIS_PREFIX", f"bench-{uuid.uuid4().hex[:8]}")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django_redis import get_redis_connection  # noqa: E402

call_command("migrate", verbosity=0)


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[int(0.95 * (len(ordered) - 1))] if ordered else 0.0


def clear_prefix() -> None:
    client = get_redis_connection("default")
    prefix = os.environ["CPS_REDIS_PREFIX"]
    batch = list(client.scan_iter(match=f"{{{prefix}}}:*", count=5000))
    for start in range(0, len(batch), 1000):
        client.delete(*batch[start : start + 1000])


class Timer:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start
