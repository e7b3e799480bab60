"""What traffic quality's counter costs Redis and the consumer per event, measured apart from the other counters.

Replays a file of ``manage.py simulate`` events through ``quality.counting.queue_quality`` alone, in batches
cut as the consumer cuts them (one partition's share per MULTI/EXEC), against the Redis of ``REDIS_URL``
(use a private server: ``INFO cpu`` is the whole server's). Prints Redis CPU per event (``used_cpu_user`` +
``used_cpu_sys`` around the replay), the commands it ran (``INFO commandstats``), the consumer's CPU per event
to build them, the Redis memory per partner-day, and a digest of every quality key's content so that two
versions of the code can be shown to count the same. See ``bench/quality_cost.md``.

    DEBUG=1 REDIS_URL=redis://127.0.0.1:6395/0 DATABASE_URL=... \\
        .venv/bin/python manage.py simulate --events 300000 --users 100000 --rate 3600 --seed 7 --to file:EV
    DEBUG=1 REDIS_URL=... DATABASE_URL=... .venv/bin/python bench/quality_cost.py EV
"""

import argparse
import dataclasses
import hashlib
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cpsproject.settings")

import django  # noqa: E402

django.setup()

from common import parsed_events, redis_cpu_seconds  # noqa: E402
from django.utils import timezone  # noqa: E402
from django_redis import get_redis_connection  # noqa: E402

from quality import counting  # noqa: E402
from quality.counting import queue_quality  # noqa: E402
from stats.pipeline.registry import CounterWrites  # noqa: E402


def _digest(client) -> tuple[str, str, int, int]:
    """Digests of every quality key's content and of all but the buyers' latest views (``:last``, gone since
    step 3), the number of partner-day signal hashes (one per partner-day and partition), their keys' memory."""
    digest, counts = hashlib.sha256(), hashlib.sha256()
    memory = 0
    hashes = 0
    for key in sorted(client.scan_iter(match="*:q:*", count=5000)):
        kind = client.type(key)
        if kind == b"hash":
            content = sorted(client.hgetall(key).items())
            hashes += not key.endswith((b":last", b":addr"))
        elif kind == b"zset":
            content = sorted(client.zrange(key, 0, -1, withscores=True))
        else:
            continue
        memory += client.memory_usage(key, samples=0) or 0
        digest.update(repr((key, content)).encode())
        if not key.endswith(b":last"):
            counts.update(repr((key, content)).encode())
    return digest.hexdigest()[:16], counts.hexdigest()[:16], hashes, memory


def _consumer_memory() -> tuple[int, int]:
    """The buyers' latest views the consumer holds after the replay (step 3 on), and their bytes: the dicts,
    their keys and values (each openid and number counted once)."""
    recent = getattr(counting, "_recent", {})
    size, seen, entries = 0, set(), 0
    for views in recent.values():
        for generation in (views.newer, views.older):
            size += sys.getsizeof(generation)
            for day_key, buyers in generation.items():
                entries += len(buyers)
                size += sys.getsizeof(buyers)
                for item in (day_key, *buyers.keys(), *buyers.values()):
                    if id(item) not in seen:
                        seen.add(id(item))
                        size += sys.getsizeof(item)
    return entries, size


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("events", type=Path)
    parser.add_argument("--batch", type=int, default=3400, help="events per partition's apply")
    parser.add_argument("--partitions", type=int, default=3)
    args = parser.parse_args()
    events = parsed_events(args.events)
    client = get_redis_connection("default")
    client.flushdb()
    client.config_resetstat()
    now = timezone.now()
    python = building = 0.0
    before = redis_cpu_seconds(client)
    # Each partition's share with its offsets, as the consumer reads them (the code before step 3 takes none).
    offsets = {f.name for f in dataclasses.fields(CounterWrites)} >= {"first_offset", "next_offset"}
    read = dict.fromkeys(range(args.partitions), 0)
    for number, start in enumerate(range(0, len(events), args.batch)):
        pipe = client.pipeline(transaction=True)
        partition, size = number % args.partitions, len(events[start : start + args.batch])
        given = {"first_offset": read[partition], "next_offset": read[partition] + size} if offsets else {}
        read[partition] += size
        writes = CounterWrites(partition, fenced=pipe, idempotent=pipe, **given)
        began = time.process_time()
        queue_quality(writes, events[start : start + args.batch], now=now)
        building += time.process_time() - began
        # the client packs the commands when the transaction is sent: the consumer's CPU as well
        connection = pipe.connection_pool.get_connection("MULTI")
        connection.pack_commands([args for args, _ in pipe.command_stack])
        pipe.connection_pool.release(connection)
        python += time.process_time() - began
        pipe.execute()
    spent = redis_cpu_seconds(client) - before
    n = len(events)
    print(f"{n:,} events in batches of {args.batch}: Redis {spent / n * 1e6:.2f} µs/event, ", end="")
    print(f"consumer: queue_quality {building / n * 1e6:.2f}, with packing {python / n * 1e6:.2f} µs/event")
    for name, stats in sorted(client.info("commandstats").items()):
        calls = re.search(r"calls=(\d+)", str(stats)) if isinstance(stats, str) else None
        count = stats["calls"] if isinstance(stats, dict) else int(calls.group(1)) if calls else 0
        usec = stats["usec"] if isinstance(stats, dict) else 0
        if name not in ("cmdstat_info", "cmdstat_config", "cmdstat_flushdb"):
            print(f"  {name[8:]:10s} {count:>9,} calls, {count / n:6.3f}/event, {usec / n:6.2f} µs/event")
    digest, counts, hashes, memory = _digest(client)
    print(f"content {digest}, without the latest views {counts}; {hashes:,} partner-day-partitions, ", end="")
    print(f"{memory / max(hashes, 1):,.0f} B of Redis each")
    entries, size = _consumer_memory()
    print(f"consumer: {entries:,} latest views held after the replay, {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
