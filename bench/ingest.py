"""Ingest throughput: the real pipeline (parse, archive, one MULTI/EXEC per partition) against the design
document's baseline (one Redis round trip per counter per event), on the same events in the same run.

    .venv/bin/python bench/ingest.py [EVENTS]
"""

import logging
import sys

from common import Timer, clear_prefix, p95, rss_mb
from django.utils import timezone
from django_redis import get_redis_connection

from partners.models import Partner
from partners.services import partners_import_csv
from stats import keys
from stats.demo import SAMPLE_PARTNERS
from stats.events import parse_event
from stats.ingest import Message, PartnerDirectory, process_batch
from stats.realtime import bucket_start
from stats.simulate import simulate_events
from stats.timeutil import local_day, stamp_day, stamp_minute

logging.basicConfig(level=logging.INFO, format="%(message)s")
log = logging.getLogger("bench.ingest")
BATCH = 2000


def main(events: int) -> None:
    if not Partner.objects.exists():
        partners_import_csv(text=SAMPLE_PARTNERS.read_text())
    now = timezone.now()
    values, _ = simulate_events(events=events, day=local_day(now), users=50_000, until=now, seed=99)
    directory = PartnerDirectory()

    clear_prefix()
    latencies = []
    with Timer() as pipeline_timer:
        for n, start in enumerate(range(0, len(values), BATCH)):
            messages = [
                Message("bench", n % 3, start + i, v) for i, v in enumerate(values[start : start + BATCH])
            ]
            with Timer() as batch_timer:
                process_batch(messages, group=f"bench-{now.timestamp()}", directory=directory, now=now)
            latencies.append(batch_timer.seconds * 1000)
            if n % 25 == 0:
                log.info("pipeline: %d/%d events", start + len(messages), len(values))

    clear_prefix()
    client = get_redis_connection("default")
    lineages = directory.lineages()
    with Timer() as naive_timer:
        for n, value in enumerate(values):
            try:
                event = parse_event(value, lineages=lineages, now=now)
            except Exception:
                continue
            if getattr(event, "lineage", None) is None or event.is_bot:
                continue
            stamp = stamp_minute(bucket_start(event.ts))
            for code in event.lineage.codes:
                client.hincrby(keys.pv_bucket(code, stamp), "tree", 1)
                client.pfadd(keys.uv_day(code, stamp_day(local_day(event.ts)), "tree"), event.openid)
            if n % 50_000 == 0:
                log.info("baseline: %d/%d events", n, len(values))
    clear_prefix()

    print(f"events: {len(values)}  batch size: {BATCH}")
    print(
        f"pipeline  : {len(values) / pipeline_timer.seconds:10.0f} events/s   p95 batch {p95(latencies):7.1f} ms"
    )
    print(
        f"baseline  : {len(values) / naive_timer.seconds:10.0f} events/s   (one round trip per counter, no archive)"
    )
    print(f"speed-up  : {naive_timer.seconds / pipeline_timer.seconds:10.1f}x   peak RSS {rss_mb():.0f} MB")
    print("target    :        360 events/s peak load from the design document")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
