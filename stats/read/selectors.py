"""Reads for the API and admin: flushed SQL rows combined with what Redis holds that is not flushed yet.

A bucket's live PV is, per generation, the Redis value while its key exists (it is the newer absolute count)
and the flushed row otherwise. A day's live UV is the stored HyperLogLog merged with the Redis one.
"""

import bisect
import datetime as dt
import functools
from collections import OrderedDict, defaultdict
from collections.abc import Iterable
from typing import NamedTuple, cast

import orjson
from django.conf import settings
from django.db import connection
from django.db.models import Exists, F, OuterRef, QuerySet, Sum
from django.db.models.lookups import StartsWith
from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common.sql import as_date, fetch_rows
from cpsproject.common.timeutil import (
    day_bounds,
    local_day,
    months_touched,
    stamp_day,
    stamp_minute,
    to_local,
)
from partners.models import Partner
from stats import keys
from stats.conf import stats_setting
from stats.counters import pageviews
from stats.counters.series import ALL_TRAFFIC, partner_counter, read_series
from stats.counters.uniques import SELF, TREE, Blob, UvDay, merged_counts, union_counts
from stats.jobs import final_days
from stats.models import BucketStat, DailyStat
from stats.pipeline.partitions import counter_versions, known_partitions
from stats.pipeline.registry import RedisClient


class DayNumbers(NamedTuple):
    """One partner-day as the API shows it (a tuple: a year of them is built per request)."""

    date: dt.date
    pv: int
    uv: int
    pv_self: int
    uv_self: int
    reconciled: bool


def _bucket_starts(day: dt.date) -> list[dt.datetime]:
    start, end = day_bounds(day)
    step = dt.timedelta(seconds=stats_setting("BUCKET_SECONDS"))
    starts, moment = [], start
    while moment < end:
        starts.append(moment)
        moment += step
    return starts


def _days_with_redis_keys(now: dt.datetime) -> tuple[dt.date, dt.date]:
    """The first and last day that may have keys in Redis at ``now``: late events can re-create a day's keys
    until the maximum lateness has passed since its end. A day ends when the next begins, so "its end plus the
    horizon is after ``now``" is "it is not before the day of ``now`` minus the horizon"."""
    horizon = stats_setting("MAX_LATENESS_SECONDS") + stats_setting("SETTLE_SECONDS") + 86400
    return local_day(now - dt.timedelta(seconds=horizon)), local_day(now)


def _may_have_redis_keys(day: dt.date, now: dt.datetime) -> bool:
    first, last = _days_with_redis_keys(now)
    return first <= day <= last


@functools.lru_cache(maxsize=64)
def _day_buckets(day: dt.date, bucket_seconds: int, time_zone: str) -> tuple[tuple, tuple[str, ...]]:
    """Bucket starts of ``day`` and their ``stamp_minute``: the same for every partner, and costly to rebuild.

    Keyed by the settings they depend on as well as the day.
    """
    starts = _bucket_starts(day)
    first, after = day_bounds(day)
    if first.utcoffset() != after.utcoffset():  # a daylight-saving change that day
        return tuple(starts), tuple(stamp_minute(start) for start in starts)
    prefix = stamp_day(day)
    return tuple(starts), tuple(f"{prefix}{start.hour:02d}{start.minute:02d}" for start in starts)


def _live_starts(days: list[dt.date], now: dt.datetime) -> tuple[list[dt.datetime], list[str]]:
    """Starts and stamps of the buckets of ``days`` that may have a key: none past now + MAX_FUTURE_SECONDS."""
    newest = now + dt.timedelta(seconds=stats_setting("MAX_FUTURE_SECONDS") + stats_setting("BUCKET_SECONDS"))
    starts: list[dt.datetime] = []
    stamps: list[str] = []
    for day in days:
        day_starts, day_stamps = _day_buckets(day, stats_setting("BUCKET_SECONDS"), settings.TIME_ZONE)
        kept = bisect.bisect_right(day_starts, newest)
        starts += day_starts[:kept]
        stamps += day_stamps[:kept]
    return starts, stamps


def _read_live_buckets(
    code: str, starts: list[dt.datetime], stamps: list[str], partitions: list[int] | None = None
) -> list[tuple[dt.datetime, int, int, str]]:
    """``(start, pv, pv_self, generation)`` of each of ``code``'s bucket keys Redis holds (one per Kafka
    partition that counted views in it)."""
    if not starts:
        return []
    found = pageviews.read_live(get_redis_connection("default"), code, stamps, partitions=partitions)
    return [
        (start, bucket.tree, bucket.own, bucket.generation)
        for start, keys_found in zip(starts, found, strict=True)
        for bucket in keys_found
    ]


def _bucket_series(
    *, partner: Partner | None, days: list[dt.date], now: dt.datetime
) -> dict[dt.date, list[tuple]]:
    """Return ``(start, pv, pv_self)`` for every bucket of each day, zero-filled, including unflushed counts.

    One SQL query and one Redis round trip for the whole list of days.
    """
    if not days:
        return {}
    code = partner.code if partner else keys.NO_PARTNER
    starts_by_day = {day: _bucket_starts(day) for day in days}
    first, last = starts_by_day[min(days)][0], starts_by_day[max(days)][-1]
    latest: dict[tuple[dt.datetime, str], tuple[int, int]] = {}
    rows = BucketStat.objects.filter(partner=partner, start__gte=first, start__lte=last)
    for start, generation, pv, pv_self in rows.values_list("start", "generation", "pv", "pv_self"):
        latest[(start, generation)] = (pv, pv_self)
    live_starts, stamps = _live_starts([day for day in days if _may_have_redis_keys(day, now)], now)
    for start, pv, pv_self, generation in _read_live_buckets(code, live_starts, stamps):
        # While its key exists, Redis holds the newer absolute count of that generation.
        latest[(start, generation)] = (pv, pv_self)
    totals: defaultdict[dt.datetime, list[int]] = defaultdict(lambda: [0, 0])
    for (start, _), (pv, pv_self) in latest.items():
        totals[start][0] += pv
        totals[start][1] += pv_self
    return {
        day: [(to_local(start), *totals.get(start, (0, 0))) for start in starts]
        for day, starts in starts_by_day.items()
    }


def partner_bucket_series(
    *, partner: Partner | None, day: dt.date, now: dt.datetime | None = None
) -> list[tuple[dt.datetime, int, int]]:
    """Return ``(start, pv, pv_self)`` for every bucket of ``day``, zero-filled, including unflushed counts."""
    return _bucket_series(partner=partner, days=[day], now=now or timezone.now())[day]


_ONE_DAY = dt.timedelta(days=1)


def _fill_final_months(
    *, partner: Partner, months: list[dt.date], now: dt.datetime
) -> dict[dt.date, list[final_days.FinalDay | None]]:
    """Each month's days for the final-days cache, read from SQL (None: a day that is not final)."""
    last = (months[-1] + dt.timedelta(days=32)).replace(day=1) - dt.timedelta(days=1)
    rows, has_row = {}, set()
    for day, reconciled_at, pv, uv, pv_self, uv_self in (
        DailyStat.objects.filter(partner=partner, date__gte=months[0], date__lte=last)
        .order_by()
        .values_list("date", "reconciled_at", "pv", "uv", "pv_self", "uv_self")
    ):
        has_row.add(day)
        if reconciled_at is not None:
            rows[day] = final_days.FinalDay(pv, uv, pv_self, uv_self, reconciled=True)
    today = local_day(now)
    entries = {}
    for month in months:
        entry: list[final_days.FinalDay | None] = []
        day = month
        while day.month == month.month:
            if day in rows:
                entry.append(rows[day])
            elif day not in has_row and day <= today and not _may_have_redis_keys(day, now):
                # No event can reach it any more: a reconcile (which bumps the generation) gives it a row, or a
                # flush that ran more than a day late, which the entry's one-hour TTL bounds.
                entry.append(final_days.NO_TRAFFIC)
            else:
                entry.append(None)
            day += dt.timedelta(days=1)
        entries[month] = entry
    return entries


def _final_entries(*, partner: Partner, months: list[dt.date], now: dt.datetime) -> dict[dt.date, bytes]:
    """Each month's entry of the final-days cache, filled from SQL on a miss (``final_days.decode`` reads it)."""
    cached = final_days.read(partner_id=partner.pk, months=months)
    found = cached.found
    if cached.missing:
        filled = _fill_final_months(partner=partner, months=cached.missing, now=now)
        found.update(final_days.store(partner_id=partner.pk, months=filled, generation=cached.generation))
    return found


def _final_days(
    *, partner: Partner, start: dt.date, end: dt.date, now: dt.datetime
) -> dict[dt.date, DayNumbers]:
    """The days of ``start..end`` that only a reconcile can change, from the cache (``_final_entries``).

    Reconciled days, and days past the lateness horizon that have no row.
    """
    final = {}
    first_live, today = _days_with_redis_keys(now)
    for month, entry in _final_entries(partner=partner, months=months_touched(start, end), now=now).items():
        day = month
        for cached in final_days.decode(entry):
            if cached is not None and start <= day <= end:
                if cached.reconciled:
                    final[day] = DayNumbers(day, *cached)
                elif not first_live <= day <= today:  # a caller may ask as of an earlier moment
                    final[day] = DayNumbers(day, 0, 0, 0, 0, False)
            day += _ONE_DAY
    return final


def _live_pv(
    *, partner: Partner, days: list[dt.date], now: dt.datetime, partitions: list[int]
) -> dict[dt.date, tuple[int, int]]:
    """``(pv, pv_self)`` of each day, including unflushed counts: what ``_bucket_series`` sums, without the series.

    Per day, the flushed bucket rows summed in SQL, minus the rows whose (bucket, generation) Redis holds a
    newer absolute count of, plus those counts.
    """
    found: dict[dt.date, list[tuple[dt.datetime, int, int, str]]] = defaultdict(list)
    for start, pv, pv_self, generation in _read_live_buckets(
        partner.code, *_live_starts(days, now), partitions
    ):
        found[start.date()].append((start, pv, pv_self, generation))
    quote, adapt = connection.ops.quote_name, connection.ops.adapt_datetimefield_value
    table, start_, generation_ = quote(BucketStat._meta.db_table), quote("start"), quote("generation")
    live = {}
    for day in days:
        first, after = day_bounds(day)
        superseded = " OR ".join([f"({start_} = %s AND {generation_} = %s)"] * len(found[day])) or "1 = 0"
        pairs = [value for start, _, _, generation in found[day] for value in (adapt(start), generation)]
        ((pv, pv_self, old_pv, old_self),) = fetch_rows(
            f"SELECT COALESCE(SUM(pv), 0), COALESCE(SUM(pv_self), 0),"
            f" COALESCE(SUM(CASE WHEN {superseded} THEN pv END), 0),"
            f" COALESCE(SUM(CASE WHEN {superseded} THEN pv_self END), 0)"
            f" FROM {table} WHERE partner_id = %s AND {start_} >= %s AND {start_} < %s",
            [*pairs, *pairs, partner.pk, adapt(first), adapt(after)],
        )
        live[day] = (
            int(pv) - int(old_pv) + sum(b[1] for b in found[day]),
            int(pv_self) - int(old_self) + sum(b[2] for b in found[day]),
        )
    return live


class _StoredDay(NamedTuple):
    """One partner-day row as ``_open_days`` reads it."""

    numbers: tuple[int, int, int, int]  # pv, uv, pv_self, uv_self
    reconciled: bool
    hll: bytes | None  # read only for days that may still be live
    hll_self: bytes | None


def _stored_rows(
    *, partner: Partner, start: dt.date, end: dt.date, first_live: dt.date
) -> dict[dt.date, _StoredDay]:
    """Each stored day of ``start..end``; HyperLogLogs only from ``first_live`` on."""
    quote, adapt = connection.ops.quote_name, connection.ops.adapt_datefield_value
    date = quote("date")
    rows = fetch_rows(
        f"SELECT {date}, pv, uv, pv_self, uv_self, reconciled_at IS NOT NULL,"
        f" CASE WHEN {date} >= %s THEN hll END, CASE WHEN {date} >= %s THEN hll_self END"
        f" FROM {quote(DailyStat._meta.db_table)} WHERE partner_id = %s AND {date} >= %s AND {date} <= %s",
        [adapt(first_live), adapt(first_live), partner.pk, adapt(start), adapt(end)],
    )
    return {
        as_date(row[0]): _StoredDay(
            (int(row[1]), int(row[2]), int(row[3]), int(row[4])),
            bool(row[5]),
            _as_bytes(row[6]),
            _as_bytes(row[7]),
        )
        for row in rows
    }


def _as_bytes(value: bytes | memoryview | None) -> bytes | None:
    return bytes(value) if value is not None else None


# A live day's numbers, by (prefix, partner, day, the partitions' counter versions, the last bucket read): a
# result is found again only while no write has touched the counters it was read from (see
# ``stats.pipeline.partitions``). Reading a day's 288 buckets per partition cost the API most of its CPU, and
# Redis as much again, on every request.
_LIVE_DAYS: OrderedDict[tuple, DayNumbers] = OrderedDict()
_LIVE_DAYS_KEPT = 4096


def _live_numbers(
    *, partner: Partner, days: list[dt.date], now: dt.datetime, stored: dict[dt.date, _StoredDay]
) -> dict[dt.date, DayNumbers]:
    """Each live day's numbers (not reconciled): flushed rows plus what Redis holds."""
    client = get_redis_connection("default")
    partitions = known_partitions(client)  # once for the versions, the page views and the UV
    versions = counter_versions(client, partitions)
    last_bucket = _live_starts(days[-1:], now)[1][-1:]  # a moment asked about earlier reads fewer buckets
    # The partition registry's name stands for the key prefix: another prefix's counters are another cache.
    cache_key = (keys.partitions(), partner.code, versions, tuple(last_bucket))
    live = {day: _LIVE_DAYS[(*cache_key, day)] for day in days if (*cache_key, day) in _LIVE_DAYS}
    missing = [day for day in days if day not in live]
    if not missing:
        return live
    pv = _live_pv(partner=partner, days=missing, now=now, partitions=partitions)
    unions = []
    for day in missing:
        hll, hll_self = (stored[day].hll, stored[day].hll_self) if day in stored else (None, None)
        for scope, blob in ((TREE, hll), (SELF, hll_self)):
            unions.append(([blob], [UvDay(partner.code, stamp_day(day), scope)]))
    uv_counts = iter(union_counts(client, unions, partitions=partitions))
    for day in missing:
        live[day] = DayNumbers(day, pv[day][0], next(uv_counts), pv[day][1], next(uv_counts), False)
        if len(_LIVE_DAYS) >= _LIVE_DAYS_KEPT:
            _LIVE_DAYS.popitem(last=False)  # the oldest entry (atomic, where a threaded server shares it)
        _LIVE_DAYS[(*cache_key, day)] = live[day]
    return live


def _open_days(*, partner: Partner, first: dt.date, end: dt.date, now: dt.datetime) -> list[DayNumbers]:
    """One entry per day from ``first`` to ``end``, read from SQL, with what Redis holds for the days still live."""
    all_days = [first + dt.timedelta(days=n) for n in range((end - first).days + 1)]
    # The first day live now: later days may have Redis keys, so their rows' HyperLogLogs are read too.
    first_live = next((day for day in all_days if _may_have_redis_keys(day, now)), end + _ONE_DAY)
    stored = _stored_rows(partner=partner, start=first, end=end, first_live=first_live)
    live_days = [
        day
        for day in all_days
        if not (day in stored and stored[day].reconciled) and _may_have_redis_keys(day, now)
    ]
    live = _live_numbers(partner=partner, days=live_days, now=now, stored=stored) if live_days else {}
    days = []
    for day in all_days:
        if day in live:
            days.append(live[day])
        elif day in stored:
            days.append(DayNumbers(day, *stored[day].numbers, reconciled=stored[day].reconciled))
        else:
            days.append(DayNumbers(day, 0, 0, 0, 0, False))
    return days


def partner_days(
    *, partner: Partner, start: dt.date, end: dt.date, now: dt.datetime | None = None
) -> list[DayNumbers]:
    """Return one entry per day from ``start`` to ``end`` inclusive: reconciled, or flushed plus unflushed.

    The days before the first one a reconcile has not closed come from a cache (``_final_days``); from that
    day on, rows are read from SQL, and the days still live add what Redis holds.
    """
    now = now or timezone.now()
    final = _final_days(partner=partner, start=start, end=end, now=now)
    days, day = [], start
    while day <= end and day in final:
        days.append(final[day])
        day += _ONE_DAY
    if day <= end:
        days += _open_days(partner=partner, first=day, end=end, now=now)
    return days


def day_json(day: DayNumbers) -> bytes:
    """One day as the stats endpoint renders it: ``{"date": "2026-11-21", "pv": …, …, "reconciled": …}``."""
    return orjson.dumps(day._asdict())


class _RenderedMonth(NamedTuple):
    """A month of the final-days cache as the stats endpoint sends it, with sums to take any slice at once."""

    jsons: tuple[bytes | None, ...]  # each day's ``day_json``; None where the day is not final
    pv_before: tuple[int, ...]  # pv_before[i]: the PV of the days before day i
    zeros_before: tuple[int, ...]  # zeros_before[i]: how many days before day i are unreconciled zeros
    # open_from[i]: the first day from day i on that is not final (or the month's length)
    open_from: tuple[int, ...]


@functools.lru_cache(maxsize=4096)
def _rendered_month(month: dt.date, entry: bytes) -> _RenderedMonth:
    """A final-days cache entry (``_final_entries``) rendered.

    Memoised on the entry's bytes, which are all the rendering depends on: the cache never rewrites an entry
    in place (a reconcile starts a new generation, read with the entry), so a stale rendering cannot be found.
    """
    jsons: list[bytes | None] = []
    pv_before, zeros_before, day = [0], [0], month
    for cached in final_days.decode(entry):
        without_traffic = cached is not None and not cached.reconciled  # a reconciled day may be all zeros
        if cached is None:
            jsons.append(None)
            pv = 0
        else:
            jsons.append(day_json(DayNumbers(day, *cached)))
            pv = cached.pv
        pv_before.append(pv_before[-1] + pv)
        zeros_before.append(zeros_before[-1] + without_traffic)
        day += _ONE_DAY
    open_from = [len(jsons)] * (len(jsons) + 1)
    for index in reversed(range(len(jsons))):
        open_from[index] = index if jsons[index] is None else open_from[index + 1]
    return _RenderedMonth(tuple(jsons), tuple(pv_before), tuple(zeros_before), tuple(open_from))


def _final_run(rendered: _RenderedMonth, month: dt.date, first: int, after: int, now: dt.datetime) -> int:
    """How many days from day ``first`` of ``month`` (and before day ``after``) are final as of ``now``.

    A day without traffic is final only once no late event can reach it: past the lateness horizon, which
    moves with the moment asked about.
    """
    after = min(after, rendered.open_from[first])
    if after <= first:
        return 0
    no_zeros = rendered.zeros_before[after] == rendered.zeros_before[first]
    if no_zeros or not _may_have_redis_keys(month + dt.timedelta(days=after - 1), now):
        return after - first
    for index in range(first, after):  # a day without traffic near the horizon: day by day
        zero = rendered.zeros_before[index + 1] != rendered.zeros_before[index]
        if zero and _may_have_redis_keys(month + dt.timedelta(days=index), now):
            return index - first
    return after - first


def partner_days_json(
    *, partner: Partner, start: dt.date, end: dt.date, now: dt.datetime | None = None
) -> tuple[bytes, int]:
    """``partner_days`` as the stats endpoint sends it: the JSON array of the days, and their total PV.

    The same numbers, without building a year of entries per request: the closed days come rendered from
    ``_rendered_month`` a month slice at a time, and only the days from the first open one on are read and
    rendered here.
    """
    now = now or timezone.now()
    months = months_touched(start, end)
    entries = _final_entries(partner=partner, months=months, now=now)
    parts, total, day = [], 0, start
    for month in months:
        rendered = _rendered_month(month, entries[month])
        last = min(end, (month + dt.timedelta(days=32)).replace(day=1) - _ONE_DAY)
        first, after = (day - month).days, (last - month).days + 1
        run = _final_run(rendered, month, first, after, now)
        if run:
            parts.append(b",".join(cast(tuple[bytes, ...], rendered.jsons[first : first + run])))  # all final
            total += rendered.pv_before[first + run] - rendered.pv_before[first]
            day += dt.timedelta(days=run)
        if day <= last:  # an open day: it and the rest are read
            break
    if day <= end:
        for open_day in _open_days(partner=partner, first=day, end=end, now=now):
            total += open_day.pv
            parts.append(day_json(open_day))
    return b"[" + b",".join(parts) + b"]", total


def uv_between(
    partner: Partner, start: dt.date, end: dt.date, *, scope: str = TREE, now: dt.datetime | None = None
) -> int:
    """Distinct users of ``partner`` (its subtree, or itself with ``scope="self"``) from ``start`` to ``end``.

    Merges the stored day HyperLogLogs with the ones still in Redis: an estimate with 0.81% standard error.
    The days from ``start`` that are final and past the lateness horizon (no Redis key can hold them) come
    merged from the final-days cache: a year of a busy partner's stored blobs is 4 MB to read and merge.
    """
    now = now or timezone.now()
    field = "hll" if scope == TREE else "hll_self"
    client = get_redis_connection("default")
    blobs: list[Blob | None] = []
    first_open = start
    last_final = _last_final_day(partner=partner, start=start, end=end, now=now)
    if last_final is not None and last_final > start:  # a run of two days or more: worth its cache entry
        blobs.append(
            _final_union(client, partner=partner, field=field, scope=scope, first=start, last=last_final)
        )
        first_open = last_final + _ONE_DAY
    if first_open <= end:
        adapt, date = connection.ops.adapt_datefield_value, connection.ops.quote_name("date")
        blobs += [
            _as_bytes(blob)
            for (blob,) in fetch_rows(
                f"SELECT {field} FROM {connection.ops.quote_name(DailyStat._meta.db_table)}"
                f" WHERE partner_id = %s AND {date} >= %s AND {date} <= %s",
                [partner.pk, adapt(first_open), adapt(end)],
            )
        ]
    days = [first_open + dt.timedelta(days=n) for n in range((end - first_open).days + 1)]
    sources = [UvDay(partner.code, stamp_day(day), scope) for day in days]
    return union_counts(client, [(blobs, sources)])[0]


def _last_final_day(*, partner: Partner, start: dt.date, end: dt.date, now: dt.datetime) -> dt.date | None:
    """The last day of the run of days from ``start`` that are final (``_final_days``) and past the lateness
    horizon, or None when ``start`` is not one: their stored rows are all there is of them."""
    first_live, today = _days_with_redis_keys(now)
    if first_live <= start <= today:  # a recent range: no run, and no need to read the cache for it
        return None
    months = months_touched(start, end)
    entries = _final_entries(partner=partner, months=months, now=now)
    last = None
    for month in months:
        day = month
        for final in final_days.final_mask(entries[month]):
            if start <= day:
                if day > end or not final or first_live <= day:
                    return last
                last = day
            day += _ONE_DAY
    return last


def _final_union(
    client: RedisClient, *, partner: Partner, field: str, scope: str, first: dt.date, last: dt.date
) -> bytes:
    """The union of the partner's stored HyperLogLogs (``field``) from ``first`` to ``last``, all final days:
    from the cache, or merged from SQL and cached."""
    union, generation = final_days.read_union(partner_id=partner.pk, scope=scope, first=first, last=last)
    if union is None:
        stored = DailyStat.objects.filter(partner=partner, date__gte=first, date__lte=last).values_list(
            field, flat=True
        )
        union = merged_counts(client, [list(stored)])[0][0]
        final_days.store_union(
            partner_id=partner.pk, scope=scope, first=first, last=last, union=union, generation=generation
        )
    return union


def site_days(*, start: dt.date, end: dt.date, now: dt.datetime | None = None) -> list[DayNumbers]:
    """Return the whole site per day: every root partner's subtree plus the traffic with no partner.

    PV is that sum; UV is the union of the roots' and the no-partner HyperLogLogs (stored and still in Redis),
    never a sum of UVs. ``pv_self``/``uv_self`` are the no-partner traffic alone. A day is reconciled when
    every root that had traffic that day is.
    """
    now = now or timezone.now()
    roots = list(Partner.objects.filter(parent__isnull=True))
    per_root = [partner_days(partner=root, start=start, end=end, now=now) for root in roots]
    all_days = [start + dt.timedelta(days=n) for n in range((end - start).days + 1)]
    stored_site = {
        row.date: row
        for row in DailyStat.objects.filter(partner__isnull=True, date__gte=start, date__lte=end)
    }
    live_site = [day for day in all_days if _may_have_redis_keys(day, now)]
    site_buckets = _bucket_series(partner=None, days=live_site, now=now)
    blobs: defaultdict[dt.date, list[Blob | None]] = defaultdict(list)
    roots_rows = DailyStat.objects.filter(partner__parent__isnull=True, partner__isnull=False)
    for day, blob in roots_rows.filter(date__gte=start, date__lte=end).values_list("date", "hll"):
        blobs[day].append(blob)
    for day, row in stored_site.items():
        blobs[day].append(row.hll)
    codes = [root.code for root in roots] + [keys.NO_PARTNER]
    unions = [(blobs[day], [UvDay(code, stamp_day(day), TREE) for code in codes]) for day in all_days]
    unions += [
        (
            [stored_site[day].hll if day in stored_site else None],
            [UvDay(keys.NO_PARTNER, stamp_day(day), TREE)],
        )
        for day in all_days
    ]
    counts = union_counts(get_redis_connection("default"), unions)
    union_uv, site_uv = counts[: len(all_days)], counts[len(all_days) :]
    days = []
    for index, day in enumerate(all_days):
        if day in site_buckets:
            site_pv = sum(bucket[1] for bucket in site_buckets[day])
        else:
            site_pv = stored_site[day].pv if day in stored_site else 0
        root_days = [numbers[index] for numbers in per_root]
        # With one source of traffic that day, show its own UV (exact once reconciled), not the estimate.
        busy_roots = [d for d in root_days if d.pv]
        uv = union_uv[index]
        if len(busy_roots) == 1 and not site_pv:
            uv = busy_roots[0].uv
        elif not busy_roots and site_pv:
            uv = site_uv[index]
        reconciled = any(d.pv for d in root_days) and all(d.reconciled for d in root_days if d.pv)
        days.append(
            DayNumbers(
                day,
                pv=sum(d.pv for d in root_days) + site_pv,
                uv=uv,
                pv_self=site_pv,
                uv_self=site_uv[index],
                reconciled=reconciled,
            )
        )
    return days


def site_uv_between(
    *, start: dt.date, end: dt.date, now: dt.datetime | None = None, most_rows: int = 1000
) -> int | None:
    """Distinct users of the whole site from ``start`` to ``end``: every root's subtree and the no-partner traffic.

    The union of the stored day HyperLogLogs and the ones still in Redis (0.81% standard error). None when more
    than ``most_rows`` stored ones (12 kB each) would have to be merged.
    """
    now = now or timezone.now()
    site_rows = DailyStat.objects.filter(partner__isnull=True, date__gte=start, date__lte=end)
    root_rows = DailyStat.objects.filter(partner__parent__isnull=True, partner__isnull=False).filter(
        date__gte=start, date__lte=end
    )
    if site_rows.count() + root_rows.count() > most_rows:
        return None
    blobs = list(site_rows.values_list("hll", flat=True)) + list(root_rows.values_list("hll", flat=True))
    codes = list(Partner.objects.filter(parent__isnull=True).values_list("code", flat=True)) + [
        keys.NO_PARTNER
    ]
    days = [start + dt.timedelta(days=n) for n in range((end - start).days + 1)]
    sources = [
        UvDay(code, stamp_day(day), TREE) for day in days if _may_have_redis_keys(day, now) for code in codes
    ]
    return union_counts(get_redis_connection("default"), [(blobs, sources)])[0]


def outermost_rows(queryset: QuerySet) -> QuerySet:
    """Return the rows of ``queryset`` whose partner has no ancestor among its rows of the same date.

    ``queryset`` holds partner-day rows (``DailyStat``, ``ReconcileDrift``). A subtree figure (``pv``) already
    holds its descendants' traffic, so a sum over these rows counts each event once, where a sum over every
    row counts an event once per level above it. Traffic with no partner is always outermost.
    """
    ancestors = (
        queryset.order_by()
        .filter(date=OuterRef("date"), partner__isnull=False)
        .exclude(partner_id=OuterRef("partner_id"))
        .filter(StartsWith(OuterRef("partner__path"), F("partner__path")))
    )
    return queryset.filter(~Exists(ancestors))


def minute_series(
    *, partner: Partner | None, scope: str, start: dt.datetime, end: dt.datetime
) -> list[tuple[dt.datetime, int]]:
    """Return zero-filled ``(minute, PV)`` from ``start`` to ``end`` for the dashboard's scope.

    The series hold a partner's subtree (``p:{code}``) and all traffic; own traffic is the subtree less its
    children's subtrees (which are disjoint), and the traffic with no partner is all traffic less the roots'.
    """
    if partner is not None:
        whole = partner_counter(partner.code)
        parts = Partner.objects.filter(parent=partner) if scope == SELF else Partner.objects.none()
    else:
        whole = ALL_TRAFFIC
        parts = Partner.objects.filter(parent__isnull=True) if scope == SELF else Partner.objects.none()
    minutes = read_series(counter=whole, precision=60, start=start, end=end)
    for code in parts.order_by("code").values_list("code", flat=True):
        part = read_series(counter=partner_counter(code), precision=60, start=start, end=end)
        minutes = [(moment, n - m) for (moment, n), (_, m) in zip(minutes, part, strict=True)]
    return minutes


def open_list_days(now: dt.datetime) -> tuple[dt.date, dt.date]:
    """The first and last day whose stored rows may still lack on-time traffic: today, and yesterday until its
    last bucket has settled. The lists read these days as ``partner_days`` does; older days' rows hold every
    settled bucket, and a late event reaches them with the next flush."""
    settle = dt.timedelta(seconds=stats_setting("SETTLE_SECONDS") + stats_setting("BUCKET_SECONDS"))
    return local_day(now - settle), local_day(now)


def _no_partner_days(*, days: list[dt.date], now: dt.datetime) -> dict[dt.date, DayNumbers]:
    """The traffic with no partner per day, as ``site_days`` counts it: flushed buckets plus Redis."""
    buckets = _bucket_series(partner=None, days=days, now=now)
    stored = dict(DailyStat.objects.filter(partner__isnull=True, date__in=days).values_list("date", "hll"))
    uvs = union_counts(
        get_redis_connection("default"),
        [([stored.get(day)], [UvDay(keys.NO_PARTNER, stamp_day(day), TREE)]) for day in days],
    )
    numbers = {}
    for day, uv in zip(days, uvs, strict=True):
        pv = sum(bucket[1] for bucket in buckets[day])
        numbers[day] = DayNumbers(day, pv, uv, pv, uv, False)
    return numbers


def open_row_numbers(
    *, rows: Iterable[tuple[Partner | None, dt.date, bool]], now: dt.datetime
) -> dict[tuple[int | None, dt.date], DayNumbers]:
    """The figures every page shows for each unreconciled ``(partner, day, reconciled)`` row of an open day.

    Keyed by ``(partner id or None, day)``: a stored row of today counts settled buckets only, where the
    dashboard and the API add what Redis holds.
    """
    first, last = open_list_days(now)
    wanted: defaultdict[Partner | None, set[dt.date]] = defaultdict(set)
    for partner, day, reconciled in rows:
        if not reconciled and first <= day <= last:
            wanted[partner].add(day)
    numbers: dict[tuple[int | None, dt.date], DayNumbers] = {}
    for partner, days in wanted.items():
        if partner is None:
            for day, figures in _no_partner_days(days=sorted(days), now=now).items():
                numbers[(None, day)] = figures
            continue
        for figures in partner_days(partner=partner, start=min(days), end=max(days), now=now):
            if figures.date in days:
                numbers[(partner.pk, figures.date)] = figures
    return numbers


def daily_list_totals(*, queryset: QuerySet, now: dt.datetime, uv_max_rows: int) -> dict:
    """Totals of the selected ``DailyStat`` rows with the open days' figures as ``open_row_numbers`` has them.

    PV sums the outermost rows (a parent's PV holds its children's), own and bot PV every row; UV is the union
    of the rows' HyperLogLogs and, for the open days, Redis's: None over ``uv_max_rows`` rows.
    """
    first, last = open_list_days(now)
    open_rows = queryset.filter(reconciled_at__isnull=True, date__gte=first, date__lte=last)
    settled = queryset.exclude(pk__in=open_rows.values("pk"))
    sums = settled.order_by().aggregate(pv_self=Sum("pv_self"), bot_pv=Sum("bot_pv"))
    pv = outermost_rows(queryset).exclude(pk__in=open_rows.values("pk")).order_by().aggregate(pv=Sum("pv"))
    totals = {"rows": queryset.order_by().count(), "pv": pv["pv"] or 0, "pv_self": sums["pv_self"] or 0}
    totals["bot_pv"] = (sums["bot_pv"] or 0) + (open_rows.order_by().aggregate(b=Sum("bot_pv"))["b"] or 0)
    listed = list(open_rows.select_related("partner"))
    live = open_row_numbers(rows=[(row.partner, row.date, False) for row in listed], now=now)
    # Outermost among every selected row: a reconciled parent row of that day holds an open child's views.
    outermost = set(
        outermost_rows(queryset).filter(pk__in=open_rows.values("pk")).values_list("pk", flat=True)
    )
    for row in listed:
        figures = live[(row.partner_id, row.date)]
        totals["pv_self"] += figures.pv_self
        totals["pv"] += figures.pv if row.pk in outermost else 0
    totals["uv"] = totals["uv_self"] = None
    if 0 < totals["rows"] <= uv_max_rows:
        blobs = list(queryset.order_by().values_list("hll", "hll_self"))
        names = [
            (row.partner.code if row.partner else keys.NO_PARTNER, stamp_day(row.date)) for row in listed
        ]
        tree = [UvDay(code, day, TREE) for code, day in names]
        own = [UvDay(code, day, SELF) for code, day in names]
        totals["uv"], totals["uv_self"] = union_counts(
            get_redis_connection("default"), [([b[0] for b in blobs], tree), ([b[1] for b in blobs], own)]
        )
    return totals
