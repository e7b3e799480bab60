"""PV buckets and UV HyperLogLogs in Redis: queue a batch's increments, read what is not flushed yet."""

import datetime as dt
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable

import orjson

from cpsproject.common import redis_keys
from cpsproject.common.timeutil import floor_local, stamp_minute
from stats import keys
from stats.conf import stats_setting
from stats.counters.tally import PageViewTally

SELF, TREE, BOT, GEN = "self", "tree", "bot", "gen"


def bucket_start(moment: dt.datetime) -> dt.datetime:
    return floor_local(moment, stats_setting("BUCKET_SECONDS"))


# KEYS: the bucket hashes, then the bucket index. ARGV: the batch's generation, the safety TTL, then JSON: per
# bucket its index score (yyyyMMddHHmm) and its tree, self and bot increments. A bucket the script creates gets
# its generation, TTL and index entry once; later batches only increment it (flush deletes key and entry
# together). The increments travel as one JSON argument (see ``stats.counters.hincrby``).
_ADD_TO_BUCKETS = """
local index = KEYS[#KEYS]
local generation, ttl = ARGV[1], ARGV[2]
local numbers = cjson.decode(ARGV[3])
for i = 1, #KEYS - 1 do
  local key, at = KEYS[i], 4 * i - 3
  if numbers[at + 1] ~= 0 then redis.call('HINCRBY', key, 'tree', numbers[at + 1]) end
  if numbers[at + 2] ~= 0 then redis.call('HINCRBY', key, 'self', numbers[at + 2]) end
  if numbers[at + 3] ~= 0 then redis.call('HINCRBY', key, 'bot', numbers[at + 3]) end
  if redis.call('HSETNX', key, 'gen', generation) == 1 then
    redis.call('EXPIRE', key, ttl)
    redis.call('ZADD', index, numbers[at], key)
  end
end
redis.call('EXPIRE', index, ttl)
return #KEYS - 1
"""

# KEYS: HyperLogLogs. ARGV: the safety TTL, then JSON: per key the list of users to add. PFADD takes a few
# thousand members per call (Lua's stack bounds ``unpack``).
_ADD_TO_HLLS = """
local members = cjson.decode(ARGV[2])
for i = 1, #KEYS do
  local users = members[i]
  for first = 1, #users, 4000 do
    redis.call('PFADD', KEYS[i], unpack(users, first, math.min(first + 3999, #users)))
  end
  redis.call('EXPIRE', KEYS[i], ARGV[1])
end
return #KEYS
"""

# Bounds one script call's arguments; a bigger batch makes several calls in the same transaction.
BUCKETS_PER_CALL = 5000
HLLS_PER_CALL = 2000


def queue_page_views(pipe, tally: PageViewTally, *, now: dt.datetime) -> None:
    """Queue a few commands per batch on ``pipe``: the PV buckets and the UV HyperLogLogs of ``tally``.

    Each view counts for its own partner (``self``) and for the partner and every ancestor (``tree``);
    bot traffic only in ``bot`` of its own partner. Traffic with no partner counts under ``keys.NO_PARTNER``.
    """
    clock = tally.clock
    period = stats_setting("BUCKET_SECONDS")
    no_partner = (keys.NO_PARTNER,)
    bucket_of = {seconds: clock.floor(seconds, period) for seconds in tally.seconds()}
    # A batch spans a bucket or two: count per partner and bucket first, so the fan-out to ancestors runs once
    # per partner-bucket rather than once per partner-second.
    humans: Counter[tuple[object, int]] = Counter()
    for (lineage, seconds), n in tally.humans.items():
        humans[(lineage, bucket_of[seconds])] += n
    bots: Counter[tuple[object, int]] = Counter()
    for (lineage, seconds), n in tally.bots.items():
        bots[(lineage, bucket_of[seconds])] += n

    # (code, bucket start) -> [tree, self, bot]
    buckets: defaultdict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0, 0])
    for (lineage, start), n in bots.items():
        buckets[((lineage.codes if lineage else no_partner)[-1], start)][2] += n
    for (lineage, start), n in humans.items():
        chain = lineage.codes if lineage else no_partner
        buckets[(chain[-1], start)][1] += n
        for code in chain:
            buckets[(code, start)][0] += n
    visitors: defaultdict[tuple[str, str, str], set[str]] = defaultdict(set)
    for (lineage, day), openids in tally.visitors.items():
        chain = lineage.codes if lineage else no_partner
        visitors[(chain[-1], day, SELF)].update(openids)
        for code in chain:
            visitors[(code, day, TREE)].update(openids)

    ttl = keys.realtime_ttl()
    if buckets:
        add = pipe.register_script(_ADD_TO_BUCKETS)
        generation = uuid.uuid4().hex[:12]  # the batch that creates a key (see BucketStat.generation)
        items = list(buckets.items())
        for first in range(0, len(items), BUCKETS_PER_CALL):
            bucket_keys: list[str] = []
            numbers: list[int] = []
            for (code, start), (tree, own, bot) in items[first : first + BUCKETS_PER_CALL]:
                stamp = clock.stamp_minute(start)
                bucket_keys.append(keys.pv_bucket(code, stamp))
                numbers += (int(stamp), tree, own, bot)
            add(
                keys=[*bucket_keys, keys.pv_index()],
                args=[generation, ttl, orjson.dumps(numbers)],
                client=pipe,
            )
    if visitors:
        add_users = pipe.register_script(_ADD_TO_HLLS)
        uv_keys_by_day: defaultdict[str, list[str]] = defaultdict(list)
        items = [
            (keys.uv_day(code, day, scope), day, openids) for (code, day, scope), openids in visitors.items()
        ]
        for first in range(0, len(items), HLLS_PER_CALL):
            chunk = items[first : first + HLLS_PER_CALL]
            members = orjson.dumps([list(openids) for _, _, openids in chunk])
            add_users(keys=[key for key, _, _ in chunk], args=[ttl, members], client=pipe)
        for key, day, _ in items:
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
