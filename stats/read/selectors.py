"""Reads for the API and admin: flushed SQL rows combined with what Redis holds that is not flushed yet.

A bucket's live PV is, per generation, the Redis value while its key exists (it is the newer absolute count)
and the flushed row otherwise. A day's live UV is the stored HyperLogLog merged with the Redis one.
"""

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass

from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common.timeutil import day_bounds, local_day, stamp_day, stamp_minute, to_local
from partners.models import Partner
from stats import keys
from stats.conf import stats_setting
from stats.counters.pageviews import GEN, SELF, TREE, hll_union_counts
from stats.models import BucketStat, DailyStat


@dataclass(frozen=True)
class DayNumbers:
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


# KEYS = bucket keys; ARGV = the tree, self and generation fields. One reply for a day of buckets: 288 HGETALL
# replies cost redis-py (no hiredis) more than the rest of a stats request.
_READ_LIVE_BUCKETS = """
local out = {}
for k = 1, #KEYS do
  local v = redis.call('HMGET', KEYS[k], ARGV[1], ARGV[2], ARGV[3])
  out[k] = (v[1] or '') .. ',' .. (v[2] or '') .. ',' .. (v[3] or '')
end
return table.concat(out, ';')
"""


def _read_live_buckets(code: str, starts: list[dt.datetime]) -> dict[dt.datetime, tuple[int, int, str]]:
    """Return ``(pv, pv_self, generation)`` of each of ``code``'s buckets that Redis holds, in one round trip."""
    if not starts:
        return {}
    client = get_redis_connection("default")
    bucket_keys = [keys.pv_bucket(code, stamp_minute(start)) for start in starts]
    reply = client.register_script(_READ_LIVE_BUCKETS)(keys=bucket_keys, args=[TREE, SELF, GEN])
    found = {}
    for start, line in zip(starts, reply.decode().split(";"), strict=True):
        tree, own, generation = line.split(",")
        if tree or own or generation:
            found[start] = (int(tree or 0), int(own or 0), generation)
    return found


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
    # No event is accepted past now + MAX_FUTURE_SECONDS: later buckets of today cannot have keys yet.
    newest = now + dt.timedelta(seconds=stats_setting("MAX_FUTURE_SECONDS") + stats_setting("BUCKET_SECONDS"))
    live_starts = [
        s for day in days if _may_have_redis_keys(day, now) for s in starts_by_day[day] if s <= newest
    ]
    for start, (pv, pv_self, generation) in _read_live_buckets(code, live_starts).items():
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


def partner_days(
    *, partner: Partner, start: dt.date, end: dt.date, now: dt.datetime | None = None
) -> list[DayNumbers]:
    """Return one entry per day from ``start`` to ``end`` inclusive: reconciled, or flushed plus unflushed."""
    now = now or timezone.now()
    # The day rows without their HyperLogLogs (up to 24 KB a row): only the days still live need those.
    stored = {
        row["date"]: row
        for row in DailyStat.objects.filter(partner=partner, date__gte=start, date__lte=end).values(
            "date", "pv", "uv", "pv_self", "uv_self", "reconciled_at"
        )
    }
    all_days = [start + dt.timedelta(days=n) for n in range((end - start).days + 1)]
    live_days = [
        day
        for day in all_days
        if not (stored.get(day) and stored[day]["reconciled_at"]) and _may_have_redis_keys(day, now)
    ]
    buckets = _bucket_series(partner=partner, days=live_days, now=now)
    blobs = {}
    if live_days:
        blobs = {
            row[0]: row[1:]
            for row in DailyStat.objects.filter(partner=partner, date__in=live_days).values_list(
                "date", "hll", "hll_self"
            )
        }
    unions = []
    for day in live_days:
        hll, hll_self = blobs.get(day, (None, None))
        for scope, blob in ((TREE, hll), (SELF, hll_self)):
            unions.append(([blob], [keys.uv_day(partner.code, stamp_day(day), scope)]))
    uv_counts = iter(hll_union_counts(get_redis_connection("default"), unions))
    live = {
        day: (
            sum(b[1] for b in buckets[day]),
            next(uv_counts),
            sum(b[2] for b in buckets[day]),
            next(uv_counts),
        )
        for day in live_days
    }
    days = []
    for day in all_days:
        row = stored.get(day)
        if day in live:
            days.append(DayNumbers(day, *live[day], reconciled=False))
        elif row:
            numbers = (row["pv"], row["uv"], row["pv_self"], row["uv_self"])
            days.append(DayNumbers(day, *numbers, reconciled=row["reconciled_at"] is not None))
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
    sources = [keys.uv_day(partner.code, stamp_day(day), scope) for day in days]
    return hll_union_counts(get_redis_connection("default"), [(list(blobs), sources)])[0]


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
    unions = [(blobs[day], [keys.uv_day(code, stamp_day(day), TREE) for code in codes]) for day in all_days]
    unions += [
        (
            [stored_site[day].hll if day in stored_site else None],
            [keys.uv_day(keys.NO_PARTNER, stamp_day(day), TREE)],
        )
        for day in all_days
    ]
    counts = hll_union_counts(get_redis_connection("default"), unions)
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
        keys.uv_day(code, stamp_day(day), TREE)
        for day in days
        if _may_have_redis_keys(day, now)
        for code in codes
    ]
    return hll_union_counts(get_redis_connection("default"), [(blobs, sources)])[0]
