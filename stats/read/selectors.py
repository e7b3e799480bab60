"""Reads for the API and admin: flushed SQL rows combined with what Redis holds that is not flushed yet.

A bucket's live PV is, per generation, the Redis value while its key exists (it is the newer absolute count)
and the flushed row otherwise. A day's live UV is the stored HyperLogLog merged with the Redis one.
"""

import bisect
import datetime as dt
import functools
from collections import defaultdict
from typing import NamedTuple

import orjson
from django.conf import settings
from django.db import connection
from django.db.models import Exists, F, OuterRef, QuerySet
from django.db.models.lookups import StartsWith
from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common.timeutil import (
    day_bounds,
    local_day,
    months_touched,
    stamp_day,
    stamp_minute,
    stamp_month,
    to_local,
)
from partners.models import Partner
from stats import keys
from stats.conf import stats_setting
from stats.counters import pageviews
from stats.counters.uniques import SELF, TREE, UvDay, union_counts
from stats.models import BucketStat, DailyStat


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


def _may_have_redis_keys(day: dt.date, now: dt.datetime) -> bool:
    """Late events can re-create keys for a day until the maximum lateness has passed."""
    horizon = stats_setting("MAX_LATENESS_SECONDS") + stats_setting("SETTLE_SECONDS") + 86400
    return day_bounds(day)[1] + dt.timedelta(seconds=horizon) > now and day <= local_day(now)


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
    starts, stamps = [], []
    for day in days:
        day_starts, day_stamps = _day_buckets(day, stats_setting("BUCKET_SECONDS"), settings.TIME_ZONE)
        kept = bisect.bisect_right(day_starts, newest)
        starts += day_starts[:kept]
        stamps += day_stamps[:kept]
    return starts, stamps


def _read_live_buckets(
    code: str, starts: list[dt.datetime], stamps: list[str]
) -> list[tuple[dt.datetime, int, int, str]]:
    """``(start, pv, pv_self, generation)`` of each of ``code``'s bucket keys Redis holds (one per Kafka
    partition that counted views in it)."""
    if not starts:
        return []
    found = pageviews.read_live(get_redis_connection("default"), code, stamps)
    return [
        (start, tree, own, generation)
        for start, keys_found in zip(starts, found, strict=True)
        for tree, own, generation in keys_found
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


def _fill_final_months(*, partner: Partner, months: list[dt.date], now: dt.datetime) -> dict[dt.date, list]:
    """Each month's entry of the final-days cache, read from SQL (see ``keys.final_days``)."""
    last = (months[-1] + dt.timedelta(days=32)).replace(day=1) - dt.timedelta(days=1)
    rows, has_row = {}, set()
    for day, reconciled_at, *numbers in (
        DailyStat.objects.filter(partner=partner, date__gte=months[0], date__lte=last)
        .order_by()
        .values_list("date", "reconciled_at", "pv", "uv", "pv_self", "uv_self")
    ):
        has_row.add(day)
        if reconciled_at is not None:
            rows[day] = numbers
    today = local_day(now)
    entries = {}
    for month in months:
        entry, day = [], month
        while day.month == month.month:
            if day in rows:
                entry.append(rows[day])
            elif day not in has_row and day <= today and not _may_have_redis_keys(day, now):
                # No event can reach it any more: a reconcile (which bumps the generation) gives it a row, or a
                # flush that ran more than a day late, which the entry's one-hour TTL bounds.
                entry.append(0)
            else:
                entry.append(None)
            day += dt.timedelta(days=1)
        entries[month] = entry
    return entries


def _final_days(
    *, partner: Partner, start: dt.date, end: dt.date, now: dt.datetime
) -> dict[dt.date, DayNumbers]:
    """The days of ``start..end`` that only a reconcile can change, from the cache (filled from SQL on a miss).

    Reconciled days, and days past the lateness horizon that have no row. The cache generation is read in the
    same round trip as the entries, and a reconcile bumps it after its commit: an entry filled before a
    recount is never read after it.
    """
    months = months_touched(start, end)
    client = get_redis_connection("default")
    generation, *entries = client.mget(
        [keys.final_days_generation()] + [keys.final_days(partner.pk, stamp_month(month)) for month in months]
    )
    tag = b"%d|" % int(generation or 0)
    found, missing = {}, []
    for month, entry in zip(months, entries, strict=True):
        if entry and entry.startswith(tag):
            found[month] = orjson.loads(entry[len(tag) :])
        else:
            missing.append(month)
    if missing:
        filled = _fill_final_months(partner=partner, months=missing, now=now)
        pipe = client.pipeline(transaction=False)
        for month, entry in filled.items():
            key = keys.final_days(partner.pk, stamp_month(month))
            pipe.set(key, tag + orjson.dumps(entry), ex=keys.final_days_ttl())
        pipe.execute()
        found.update(filled)
    final = {}
    for month, entry in found.items():
        day = month
        for numbers in entry:
            if numbers is not None and start <= day <= end:
                if numbers:
                    final[day] = DayNumbers(day, *numbers, True)
                elif not _may_have_redis_keys(day, now):  # a caller may ask as of an earlier moment
                    final[day] = DayNumbers(day, 0, 0, 0, 0, False)
            day += _ONE_DAY
    return final


def _sql(query: str, params: list) -> list[tuple]:
    """Rows of one raw query: the ORM spends ~1 ms of CPU building each query of the stats request."""
    with connection.cursor() as cursor:
        cursor.execute(query, params)
        return cursor.fetchall()


def _live_pv(*, partner: Partner, days: list[dt.date], now: dt.datetime) -> dict[dt.date, tuple[int, int]]:
    """``(pv, pv_self)`` of each day, including unflushed counts: what ``_bucket_series`` sums, without the series.

    Per day, the flushed bucket rows summed in SQL, minus the rows whose (bucket, generation) Redis holds a
    newer absolute count of, plus those counts.
    """
    found: dict[dt.date, list[tuple[dt.datetime, int, int, str]]] = defaultdict(list)
    for start, pv, pv_self, generation in _read_live_buckets(partner.code, *_live_starts(days, now)):
        found[start.date()].append((start, pv, pv_self, generation))
    quote, adapt = connection.ops.quote_name, connection.ops.adapt_datetimefield_value
    table, start_, generation_ = quote(BucketStat._meta.db_table), quote("start"), quote("generation")
    live = {}
    for day in days:
        first, after = day_bounds(day)
        superseded = " OR ".join([f"({start_} = %s AND {generation_} = %s)"] * len(found[day])) or "1 = 0"
        pairs = [value for start, _, _, generation in found[day] for value in (adapt(start), generation)]
        ((pv, pv_self, old_pv, old_self),) = _sql(
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


def _stored_rows(
    *, partner: Partner, start: dt.date, end: dt.date, first_live: dt.date
) -> dict[dt.date, tuple]:
    """``(numbers, reconciled, (hll, hll_self))`` of each stored day; HyperLogLogs only from ``first_live`` on."""
    quote, adapt = connection.ops.quote_name, connection.ops.adapt_datefield_value
    date = quote("date")
    rows = _sql(
        f"SELECT {date}, pv, uv, pv_self, uv_self, reconciled_at IS NOT NULL,"
        f" CASE WHEN {date} >= %s THEN hll END, CASE WHEN {date} >= %s THEN hll_self END"
        f" FROM {quote(DailyStat._meta.db_table)} WHERE partner_id = %s AND {date} >= %s AND {date} <= %s",
        [adapt(first_live), adapt(first_live), partner.pk, adapt(start), adapt(end)],
    )
    return {
        _as_date(row[0]): (tuple(map(int, row[1:5])), bool(row[5]), (_as_bytes(row[6]), _as_bytes(row[7])))
        for row in rows
    }


def _as_date(value: dt.date | str) -> dt.date:
    # SQLite answers a raw query's date column as text.
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(value)


def _as_bytes(value: bytes | memoryview | None) -> bytes | None:
    return bytes(value) if value is not None else None


def partner_days(
    *, partner: Partner, start: dt.date, end: dt.date, now: dt.datetime | None = None
) -> list[DayNumbers]:
    """Return one entry per day from ``start`` to ``end`` inclusive: reconciled, or flushed plus unflushed.

    Days only a reconcile can change come from a cache (``_final_days``); from the first other day on, the rows
    are read from SQL, and the days still live add what Redis holds.
    """
    now = now or timezone.now()
    all_days = [start + dt.timedelta(days=n) for n in range((end - start).days + 1)]
    final = _final_days(partner=partner, start=start, end=end, now=now)
    rest = [day for day in all_days if day not in final]
    if not rest:
        return [final[day] for day in all_days]
    # The first day live now: later days may have Redis keys, so their rows' HyperLogLogs are read too.
    first_live = next((day for day in rest if _may_have_redis_keys(day, now)), end + dt.timedelta(days=1))
    stored = _stored_rows(partner=partner, start=rest[0], end=end, first_live=first_live)
    live_days = [
        day for day in rest if not (day in stored and stored[day][1]) and _may_have_redis_keys(day, now)
    ]
    live = {}
    if live_days:
        pv = _live_pv(partner=partner, days=live_days, now=now)
        unions = []
        for day in live_days:
            hll, hll_self = stored[day][2] if day in stored else (None, None)
            for scope, blob in ((TREE, hll), (SELF, hll_self)):
                unions.append(([blob], [UvDay(partner.code, stamp_day(day), scope)]))
        uv_counts = iter(union_counts(get_redis_connection("default"), unions))
        live = {day: (pv[day][0], next(uv_counts), pv[day][1], next(uv_counts)) for day in live_days}
    days = []
    for day in all_days:
        if day < rest[0]:
            days.append(final[day])
        elif day in live:
            days.append(DayNumbers(day, *live[day], reconciled=False))
        elif day in stored:
            numbers, reconciled, _ = stored[day]
            days.append(DayNumbers(day, *numbers, reconciled=reconciled))
        else:
            days.append(DayNumbers(day, 0, 0, 0, 0, False))
    return days


def uv_between(partner: Partner, start: dt.date, end: dt.date, *, scope: str = TREE) -> int:
    """Distinct users of ``partner`` (its subtree, or itself with ``scope="self"``) from ``start`` to ``end``.

    Merges the stored day HyperLogLogs with the ones still in Redis: an estimate with 0.81% standard error.
    """
    field = "hll" if scope == TREE else "hll_self"
    blobs = DailyStat.objects.filter(partner=partner, date__gte=start, date__lte=end).values_list(
        field, flat=True
    )
    days = [start + dt.timedelta(days=n) for n in range((end - start).days + 1)]
    sources = [UvDay(partner.code, stamp_day(day), scope) for day in days]
    return union_counts(get_redis_connection("default"), [(list(blobs), sources)])[0]


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
    blobs: defaultdict[dt.date, list[bytes | None]] = defaultdict(list)
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
