"""Counters at several precisions (third design document): one hash per precision and counter.

Counters: ``all`` (every human PV) and ``p:{code}`` (a partner's subtree PV). Samples start on business-time
boundaries. The cleaner trims samples older than each precision's retention and forgets empty counters in one
Lua script per counter, so it never races a concurrent increment; a precision is only walked when it is due.
"""

import datetime as dt
from collections import Counter
from collections.abc import Iterable

from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common.timeutil import BatchClock, epoch, floor_local, from_epoch, to_local
from stats import keys
from stats.conf import stats_setting
from stats.counters.hincrby import queue_hincrby_many
from stats.pipeline.events import PageView

ALL_TRAFFIC = "all"  # every human PV, with or without a partner

# KEYS: counter hash, known index. ARGV: oldest sample to keep, the counter's index member.
_TRIM_COUNTER = """
local removed = 0
for _, sample in ipairs(redis.call('HKEYS', KEYS[1])) do
  if tonumber(sample) < tonumber(ARGV[1]) then
    redis.call('HDEL', KEYS[1], sample)
    removed = removed + 1
  end
end
if redis.call('HLEN', KEYS[1]) == 0 then redis.call('ZREM', KEYS[2], ARGV[2]) end
return removed
"""


def partner_counter(code: str) -> str:
    return f"p:{code}"


def precisions() -> dict[int, int]:
    """Return precision seconds -> samples kept."""
    return dict(stats_setting("SERIES_RETENTION"))


def queue_series(pipe, views: Iterable[PageView], *, now: dt.datetime) -> None:
    """Queue the increment of every (precision, counter, sample) the batch touches."""
    clock = BatchClock()
    retention = precisions()
    # Events of one chain in one second share every sample: count them first, then fan out once.
    per_second: Counter[tuple[tuple[str, ...], int]] = Counter(
        (view.lineage.codes if view.lineage else (), view.seconds) for view in views if not view.is_bot
    )
    if not per_second:
        return
    # (counter, precision) -> sample start -> count; per chain, the sample dicts of its counters by precision.
    samples: dict[tuple[str, int], dict[int, int]] = {}
    targets_of: dict[tuple[str, ...], list[tuple[int, list[dict[int, int]]]]] = {}
    for (codes, seconds), n in per_second.items():
        try:
            targets = targets_of[codes]
        except KeyError:
            counters = (ALL_TRAFFIC, *(partner_counter(code) for code in codes))
            targets = targets_of[codes] = [
                (precision, [samples.setdefault((counter, precision), {}) for counter in counters])
                for precision in retention
            ]
        offset = clock.offset(seconds)
        wall = seconds + offset
        for precision, counts in targets:
            sample = wall - wall % precision - offset
            for count in counts:
                count[sample] = count.get(sample, 0) + n
    hashes = {
        keys.series_hash(precision, counter): counts for (counter, precision), counts in samples.items()
    }
    ttls = {
        keys.series_hash(precision, counter): keys.series_ttl(precision, retention[precision])
        for counter, precision in samples
    }
    queue_hincrby_many(pipe, hashes, ttl=ttls.__getitem__)
    known = {keys.series_member(precision, counter): 0 for counter, precision in samples}
    pipe.zadd(keys.series_known(), known)
    pipe.expire(keys.series_known(), keys.LONG_TTL)


def oldest_kept_sample(precision: int, now: dt.datetime) -> int:
    return epoch(floor_local(now, precision)) - (precisions()[precision] - 1) * precision


def clean_series(*, now: dt.datetime | None = None, force: bool = False) -> str:
    """Trim expired samples of every due precision; return a summary."""
    now = now or timezone.now()
    client = get_redis_connection("default")
    trim = client.register_script(_TRIM_COUNTER)
    last_cleaned = {int(p): float(t) for p, t in client.hgetall(keys.series_cleaned()).items()}
    removed = walked = 0
    for precision in precisions():
        # A precision is due once per its own period (at most once a minute): cheap when nothing is due.
        if not force and now.timestamp() - last_cleaned.get(precision, 0) < max(60, min(precision, 3600)):
            continue
        oldest = oldest_kept_sample(precision, now)
        members = client.zrangebylex(keys.series_known(), f"[{precision}:", f"[{precision}:\xff")
        for member in members:
            member = member.decode()
            removed += trim(
                keys=[keys.series_hash_of_member(member), keys.series_known()], args=[oldest, member]
            )
            walked += 1
        client.hset(keys.series_cleaned(), str(precision), now.timestamp())
        client.expire(keys.series_cleaned(), keys.LONG_TTL)
    return f"trimmed {removed} series samples over {walked} counters"


MAX_POINTS = 5000


def read_series(
    *, counter: str, precision: int, start: dt.datetime, end: dt.datetime
) -> list[tuple[dt.datetime, int]]:
    """Return zero-filled ``(sample start, count)`` from the sample holding ``start`` to the one holding ``end``."""
    first, last = epoch(floor_local(start, precision)), epoch(floor_local(end, precision))
    samples = list(range(first, last + 1, precision))
    values = (
        get_redis_connection("default").hmget(keys.series_hash(precision, counter), [str(s) for s in samples])
        if samples
        else []
    )
    return [(to_local(from_epoch(s)), int(v or 0)) for s, v in zip(samples, values, strict=True)]
