"""Counters at several precisions (third design document): one hash per Kafka partition, precision and counter.

Counters: ``all`` (every human PV) and ``p:{code}`` (a partner's subtree PV). Samples start on business-time
boundaries. A batch increments its partition's hashes in the partition's MULTI/EXEC; a read adds up the
partitions' samples. The cleaner trims samples older than each precision's retention and forgets empty counters
in one Lua script per counter (``series_trim.lua``, beside this file), so it never races a concurrent
increment; a precision is only walked when it is due.
"""

import datetime as dt
from collections import Counter

import numpy as np
from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common.lua import LuaScript
from cpsproject.common.timeutil import BatchClock, epoch, floor_local, from_epoch, next_period_start, to_local
from stats import keys
from stats.conf import stats_setting
from stats.counters.hincrby import queue_hincrby_many
from stats.counters.tally import PageViewTally
from stats.pipeline.partitions import known_partitions
from stats.pipeline.registry import CounterWrites

ALL_TRAFFIC = "all"  # every human PV, with or without a partner

_TRIM_COUNTER = LuaScript(__file__, "series_trim.lua")
_SUM_SAMPLES = LuaScript(__file__, "series_sum.lua")
_PARTNER = "p:"


def partner_counter(code: str) -> str:
    return f"{_PARTNER}{code}"


def precisions() -> dict[int, int]:
    """Return precision seconds -> samples kept."""
    return dict(stats_setting("SERIES_RETENTION"))


def queue_series(writes: CounterWrites, tally: PageViewTally, *, now: dt.datetime) -> None:
    """Queue the increment of every (precision, counter, sample) the batch touches on ``writes.fenced``."""
    partition = writes.partition
    clock = tally.clock
    retention = precisions()
    per_second = tally.humans  # bots count in no series
    if not per_second:
        return
    # One row per (lineage, second) and counter it feeds: the site's and each partner's of the chain.
    counter_number: dict[str, int] = {ALL_TRAFFIC: 0}
    numbers_of: dict[object, list[int]] = {}
    row_counter: list[int] = []
    row_second: list[int] = []
    row_views: list[int] = []
    for (lineage, second), n in per_second.items():
        try:
            numbers = numbers_of[lineage]
        except KeyError:
            codes = lineage.codes if lineage else ()
            numbers = numbers_of[lineage] = [
                0,
                *(counter_number.setdefault(partner_counter(c), len(counter_number)) for c in codes),
            ]
        row_counter += numbers
        row_second += [second] * len(numbers)
        row_views += [n] * len(numbers)
    counter = np.array(row_counter, dtype=np.int64)
    seconds = np.array(row_second, dtype=np.int64)
    views_in_row = np.array(row_views, dtype=np.int64)
    # A batch spans a few distinct seconds: the zone's offset is looked up once for each (exact across DST).
    distinct, at = np.unique(seconds, return_inverse=True)
    offset = np.array([clock.offset(int(s)) for s in distinct], dtype=np.int64)[at]
    wall = seconds + offset
    counters = list(counter_number)
    one_offset = int(offset.min()) == int(offset.max())
    # Per precision, sum the rows of each (counter, sample) pair with numpy rather than a dict per counter.
    for precision, kept in retention.items():
        sample = wall - wall % precision - offset
        if not (one_offset and clock.offset(int(sample.min())) == int(offset[0])):
            # An offset changes inside the batch's samples (a DST day, a 5-hour sample over the change): such a
            # sample began under the offset of its start, so each distinct second is floored by the clock.
            sample = np.array([clock.floor(int(s), precision) for s in distinct], dtype=np.int64)[at]
        first = int(sample.min())
        span = int(sample.max()) - first + 1
        pairs, where = np.unique(counter * span + (sample - first), return_inverse=True)
        amounts = np.bincount(where, weights=views_in_row).astype(np.int64)
        triples = np.column_stack((pairs // span + 1, pairs % span + first, amounts))
        queue_hincrby_many(
            writes.fenced,
            [keys.series_hash(partition, precision, c) for c in counters],
            triples,
            ttl=keys.series_ttl(precision, kept),
            index=keys.series_known(partition),
            members=[keys.series_member(precision, c) for c in counters],
            index_ttl=keys.LONG_TTL,
            renew_after=keys.DAY,
        )


def oldest_kept_sample(precision: int, now: dt.datetime) -> int:
    return epoch(floor_local(now, precision)) - (precisions()[precision] - 1) * precision


def clean_series(*, now: dt.datetime | None = None, force: bool = False) -> str:
    """Trim expired samples of every due precision; return a summary."""
    now = now or timezone.now()
    client = get_redis_connection("default")
    partitions = known_partitions(client)
    last_cleaned = {int(p): float(t) for p, t in client.hgetall(keys.series_cleaned()).items()}
    removed = walked = 0
    for precision in precisions():
        # A precision is due once per its own period (at most once a minute): cheap when nothing is due.
        if not force and now.timestamp() - last_cleaned.get(precision, 0) < max(60, min(precision, 3600)):
            continue
        oldest = oldest_kept_sample(precision, now)
        for partition in partitions:
            known = keys.series_known(partition)
            members = [m.decode() for m in client.zrangebylex(known, f"[{precision}:", f"[{precision}:\xff")]
            pipe = client.pipeline(transaction=False)
            for member in members:
                hash_key = keys.series_hash_of_member(partition, member)
                _TRIM_COUNTER.queue(pipe, keys=[hash_key, known], args=[oldest, member])
            removed += sum(pipe.execute()) if members else 0
            walked += len(members)
        client.hset(keys.series_cleaned(), str(precision), now.timestamp())
        client.expire(keys.series_cleaned(), keys.LONG_TTL)
    return f"trimmed {removed} series samples over {walked} counters"


MAX_POINTS = 5000


def _one_offset_between(clock: BatchClock, first: int, last: int) -> bool:
    """Whether the zone keeps one offset from epoch ``first`` to ``last``, checked once a day: a zone's offset
    changes months apart, never twice within a day."""
    offset = clock.offset(first)
    return all(clock.offset(moment) == offset for moment in (*range(first, last, 86400), last))


def _sample_starts(clock: BatchClock, precision: int, first_second: int, last_second: int) -> list[int]:
    """The starts of the samples of ``precision`` from the one holding epoch ``first_second`` to the one holding
    ``last_second``."""
    first, last = clock.floor(first_second, precision), clock.floor(last_second, precision)
    if _one_offset_between(clock, first, last + precision):
        return list(range(first, last + 1, precision))
    # Not a fixed step: a sample holding a change of offset (a DST day) is longer than its precision.
    samples, sample = [], first
    while sample <= last:
        samples.append(sample)
        sample = next_period_start(sample, precision, clock.offset)
    return samples


def partner_totals(*, precision: int, since: int, until: int) -> Counter[str]:
    """Each partner's subtree PV in the samples of ``precision`` that start from epoch ``since`` on, up to the
    one holding epoch ``until``, summed over the partitions: the rankings' tree scope (each view counted for
    the chain of its moment, as the series count it). Two round trips: the counters, then a script a
    partition."""
    samples = [s for s in _sample_starts(BatchClock(), precision, since, until) if s >= since]
    client = get_redis_connection("default")
    partitions = known_partitions(client) if samples else []
    listing = client.pipeline(transaction=False)
    first, last = keys.series_member(precision, _PARTNER), keys.series_member(precision, _PARTNER + "\xff")
    for partition in partitions:
        listing.zrangebylex(keys.series_known(partition), f"[{first}", f"[{last}")
    summing = client.pipeline(transaction=False)
    codes: list[list[str]] = []
    for partition, members in zip(partitions, listing.execute() if partitions else [], strict=True):
        if members:
            names = [m.decode() for m in members]
            codes.append([name.split(":", 1)[1].removeprefix(_PARTNER) for name in names])  # "300:p:CODE"
            hashes = [keys.series_hash_of_member(partition, name) for name in names]
            _SUM_SAMPLES.queue(summing, keys=hashes, args=samples)
    totals: Counter[str] = Counter()
    for partners, sums in zip(codes, summing.execute() if codes else [], strict=True):
        for code, total in zip(partners, sums, strict=True):
            if total != b"0":
                totals[code] += int(total)
    return totals


def read_series(
    *, counter: str, precision: int, start: dt.datetime, end: dt.datetime
) -> list[tuple[dt.datetime, int]]:
    """Return zero-filled ``(sample start, count)`` from the sample holding ``start`` to the one holding ``end``."""
    clock = BatchClock()
    samples = _sample_starts(clock, precision, epoch(start), epoch(end))
    totals = [0] * len(samples)
    client = get_redis_connection("default")
    partitions = known_partitions(client) if samples else []
    pipe = client.pipeline(transaction=False)
    for partition in partitions:
        pipe.hmget(keys.series_hash(partition, precision, counter), [str(s) for s in samples])
    for values in pipe.execute() if partitions else []:
        for at, value in enumerate(values):
            if value:
                totals[at] += int(value)
    return [(to_local(from_epoch(s)), total) for s, total in zip(samples, totals, strict=True)]
