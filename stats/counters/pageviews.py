"""PV buckets and UV HyperLogLogs in Redis: queue a batch's increments, read what is not flushed yet."""

import datetime as dt
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable

from cpsproject.common import redis_keys
from cpsproject.common.timeutil import floor_local, local_day, stamp_day, stamp_minute
from stats import keys
from stats.conf import stats_setting
from stats.counters.hincrby import queue_hincrby_many
from stats.pipeline.events import PageView

SELF, TREE, BOT, GEN = "self", "tree", "bot", "gen"


def bucket_start(moment: dt.datetime) -> dt.datetime:
    return floor_local(moment, stats_setting("BUCKET_SECONDS"))


def queue_page_views(pipe, views: Iterable[PageView], *, now: dt.datetime) -> None:
    """Pre-aggregate ``views`` in memory and queue one command per distinct key on ``pipe``.

    Each view counts for its own partner (``self``) and for the partner and every ancestor (``tree``);
    bot traffic only in ``bot`` of its own partner. Traffic with no partner counts under ``keys.NO_PARTNER``.
    """
    generation = uuid.uuid4().hex[:12]  # the batch that creates a key (see BucketStat.generation)
    increments: Counter[tuple[str, str]] = Counter()
    scores: dict[str, int] = {}
    visitors: defaultdict[str, set[str]] = defaultdict(set)
    uv_keys_by_day: defaultdict[str, set[str]] = defaultdict(set)
    for view in views:
        stamp = stamp_minute(bucket_start(view.ts))
        chain = view.lineage.codes if view.lineage else (keys.NO_PARTNER,)
        own = chain[-1]
        own_key = keys.pv_bucket(own, stamp)
        scores[own_key] = int(stamp)
        if view.is_bot:
            increments[(own_key, BOT)] += 1
            continue
        increments[(own_key, SELF)] += 1
        day = stamp_day(local_day(view.ts))
        if view.openid:
            visitors[keys.uv_day(own, day, SELF)].add(view.openid)
        for code in chain:
            tree_key = keys.pv_bucket(code, stamp)
            scores[tree_key] = int(stamp)
            increments[(tree_key, TREE)] += 1
            if view.openid:
                visitors[keys.uv_day(code, day, TREE)].add(view.openid)
    ttl = keys.realtime_ttl()
    queue_hincrby_many(pipe, increments, ttl=lambda key: ttl)
    for key in scores:
        pipe.hsetnx(key, GEN, generation)
    if scores:
        pipe.zadd(keys.pv_index(), scores)
        pipe.expire(keys.pv_index(), ttl)
    for key, openids in visitors.items():
        pipe.pfadd(key, *openids)
        pipe.expire(key, ttl)
        day = keys.parse_uv_day(key)[1]
        uv_keys_by_day[day].add(key)
    for day, uv_keys in uv_keys_by_day.items():
        pipe.sadd(keys.uv_index(day), *uv_keys)
        pipe.zadd(keys.uv_days(), {day: int(day)})
        pipe.expire(keys.uv_index(day), ttl)
        pipe.expire(keys.uv_days(), ttl)


def queue_hll_union(pipe, target: str, *, blobs: Iterable[bytes | None], sources: Iterable[str]) -> int:
    """Queue commands leaving ``target`` = union of stored HLL ``blobs`` and the Redis HLL keys ``sources``.

    Return how many replies they add, so the caller can find the replies of what it queues next.
    """
    stored = [bytes(blob) for blob in blobs if blob]
    parts = [redis_keys.scratch_part(target, n) for n in range(1, len(stored))]
    if stored:
        pipe.set(target, stored[0])
    else:
        pipe.delete(target)
    for part, blob in zip(parts, stored[1:], strict=True):
        pipe.set(part, blob)
    pipe.pfmerge(target, *parts, *sources)
    if parts:
        pipe.delete(*parts)
    return 1 + len(parts) + 1 + (1 if parts else 0)


def hll_union_counts(client, unions: list[tuple[list[bytes | None], list[str]]]) -> list[int]:
    """Return the PFCOUNT of each ``(stored blobs, Redis keys)`` union, all in one round trip."""
    pipe = client.pipeline(transaction=True)
    skips = []
    for blobs, sources in unions:
        target = redis_keys.scratch(uuid.uuid4().hex)
        skips.append(queue_hll_union(pipe, target, blobs=blobs, sources=sources))
        pipe.pfcount(target)
        pipe.delete(target)
    replies, position, counts = pipe.execute(), 0, []
    for skip in skips:
        counts.append(replies[position + skip])
        position += skip + 2
    return counts


def read_buckets(client, code: str, starts: list[dt.datetime]) -> dict[dt.datetime, dict[str, str]]:
    """Return the Redis hash of each of ``code``'s buckets that exists, by bucket start, in one round trip."""
    pipe = client.pipeline(transaction=False)
    for start in starts:
        pipe.hgetall(keys.pv_bucket(code, stamp_minute(start)))
    return {
        start: {field.decode(): value.decode() for field, value in values.items()}
        for start, values in zip(starts, pipe.execute(), strict=True)
        if values
    }
