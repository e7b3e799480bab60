"""PV buckets and UV HyperLogLogs in Redis: queue a batch's increments, read what is not flushed yet."""

import datetime as dt
import uuid
from collections import defaultdict
from collections.abc import Iterable

from cpsproject.common import redis_keys
from cpsproject.common.timeutil import BatchClock, floor_local, stamp_minute
from stats import keys
from stats.conf import stats_setting
from stats.pipeline.events import PageView

SELF, TREE, BOT, GEN = "self", "tree", "bot", "gen"


def bucket_start(moment: dt.datetime) -> dt.datetime:
    return floor_local(moment, stats_setting("BUCKET_SECONDS"))


# KEYS: the bucket hashes, then the bucket index. ARGV: the batch's generation, the safety TTL, then per bucket
# its index score (yyyyMMddHHmm) and its tree, self and bot increments. A bucket the script creates gets its
# generation, TTL and index entry once; later batches only increment it (flush deletes key and entry together).
_ADD_TO_BUCKETS = """
local index = KEYS[#KEYS]
local generation, ttl = ARGV[1], ARGV[2]
for i = 1, #KEYS - 1 do
  local key, at = KEYS[i], 4 * i - 1
  if ARGV[at + 1] ~= '0' then redis.call('HINCRBY', key, 'tree', ARGV[at + 1]) end
  if ARGV[at + 2] ~= '0' then redis.call('HINCRBY', key, 'self', ARGV[at + 2]) end
  if ARGV[at + 3] ~= '0' then redis.call('HINCRBY', key, 'bot', ARGV[at + 3]) end
  if redis.call('HSETNX', key, 'gen', generation) == 1 then
    redis.call('EXPIRE', key, ttl)
    redis.call('ZADD', index, ARGV[at], key)
  end
end
redis.call('EXPIRE', index, ttl)
return #KEYS - 1
"""

# Bounds one script call's arguments; a bigger batch makes several calls in the same transaction.
BUCKETS_PER_CALL = 5000


def queue_page_views(pipe, views: Iterable[PageView], *, now: dt.datetime) -> None:
    """Pre-aggregate ``views`` in memory and queue a few commands per batch on ``pipe``.

    Each view counts for its own partner (``self``) and for the partner and every ancestor (``tree``);
    bot traffic only in ``bot`` of its own partner. Traffic with no partner counts under ``keys.NO_PARTNER``.
    """
    clock = BatchClock()
    period = stats_setting("BUCKET_SECONDS")
    no_partner = (keys.NO_PARTNER,)
    # (code, bucket start) -> [tree, self, bot]
    buckets: defaultdict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0, 0])
    visitors: defaultdict[tuple[str, str, str], set[str]] = defaultdict(set)
    for view in views:
        start = clock.floor(view.seconds, period)
        chain = view.lineage.codes if view.lineage else no_partner
        own = chain[-1]
        if view.is_bot:
            buckets[(own, start)][2] += 1
            continue
        buckets[(own, start)][1] += 1
        for code in chain:
            buckets[(code, start)][0] += 1
        if view.openid:
            day = clock.day_stamp(view.seconds)
            visitors[(own, day, SELF)].add(view.openid)
            for code in chain:
                visitors[(code, day, TREE)].add(view.openid)
    ttl = keys.realtime_ttl()
    if buckets:
        add = pipe.register_script(_ADD_TO_BUCKETS)
        generation = uuid.uuid4().hex[:12]  # the batch that creates a key (see BucketStat.generation)
        items = list(buckets.items())
        for first in range(0, len(items), BUCKETS_PER_CALL):
            bucket_keys, args = [], [generation, ttl]
            for (code, start), (tree, own, bot) in items[first : first + BUCKETS_PER_CALL]:
                stamp = clock.stamp_minute(start)
                bucket_keys.append(keys.pv_bucket(code, stamp))
                args += (stamp, tree, own, bot)
            add(keys=[*bucket_keys, keys.pv_index()], args=args, client=pipe)
    uv_keys_by_day: defaultdict[str, list[str]] = defaultdict(list)
    for (code, day, scope), openids in visitors.items():
        key = keys.uv_day(code, day, scope)
        pipe.pfadd(key, *openids)
        pipe.expire(key, ttl)
        uv_keys_by_day[day].append(key)
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
