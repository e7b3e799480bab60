"""Flush Redis PV buckets and UV HyperLogLogs to the SQL tables, idempotently.

Order of work, so that a crash anywhere leaves numbers a re-run repairs:

1. read every Kafka partition's day HyperLogLogs and merge each partner-day's with the one stored with the day
   (a union: idempotent);
2. in one transaction, read every partition's buckets (absolute counts since their key was created) a chunk at
   a time and upsert their rows with those absolute values (on MySQL the next chunk is read from Redis while
   MariaDB inserts the last one), recompute the touched days from bucket rows, and store the merged
   HyperLogLogs;
3. after the commit, delete each settled key only if it still holds what was written (a compare-and-delete
   script), so an increment that raced the flush stays in Redis for the next one.

The ``flush`` job lock is renewed while the flush runs and checked before step 2 opens, before it commits and
before step 3: a flush that lost its lock stops (``LockLost``) instead of writing beside another one.
"""

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Sum
from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common import faults
from cpsproject.common.locks import job_lock
from cpsproject.common.timeutil import (
    day_bounds,
    local_day,
    parse_stamp_day,
    parse_stamp_minute,
    stamp_minute,
)
from cpsproject.common.upsert import upsert_chunks, upsert_rows
from partners.models import Partner
from stats import keys
from stats.conf import stats_setting
from stats.counters import pageviews, uniques
from stats.counters.pageviews import bucket_start
from stats.counters.uniques import SELF, TREE
from stats.jobs.layout import upgrade_layout
from stats.models import BucketStat, DailyStat
from stats.pipeline.registry import RedisClient

logger = logging.getLogger(__name__)

# Partner-days merged per round trip.
CHUNK = 1000


@dataclass
class FlushResult:
    buckets: int = 0
    days: int = 0
    deleted_keys: int = 0

    def summary(self) -> str:
        return f"flushed {self.buckets} buckets into {self.days} partner-days; deleted {self.deleted_keys} settled keys"


@dataclass(frozen=True)
class DayUv:
    """One partner-day's HyperLogLog: the stored one merged with every partition's in Redis."""

    name: uniques.UvDay
    day: dt.date
    merged: bytes
    count: int


def _settled_bucket_stamp(now: dt.datetime) -> int:
    """Return the latest bucket stamp whose bucket ended at least SETTLE_SECONDS ago."""
    lag = dt.timedelta(seconds=stats_setting("BUCKET_SECONDS") + stats_setting("SETTLE_SECONDS"))
    return int(stamp_minute(bucket_start(now - lag)))


def _day_settled(day: dt.date, now: dt.datetime) -> bool:
    return day_bounds(day)[1] + dt.timedelta(seconds=stats_setting("SETTLE_SECONDS")) <= now


def _stored_hlls(days: set[dt.date]) -> dict:
    stored = {}
    for row in DailyStat.objects.filter(date__in=days).values("partner_id", "date", "hll", "hll_self"):
        stored[(row["partner_id"], row["date"], TREE)] = row["hll"]
        stored[(row["partner_id"], row["date"], SELF)] = row["hll_self"]
    return stored


def _merge_hlls(client: RedisClient, reads: list[uniques.HllRead], ids: dict[str, int | None]) -> list[DayUv]:
    """Merge every partner-day's HyperLogLogs in Redis (one per partition) with the one stored for its day."""
    by_name: dict[uniques.UvDay, list[bytes]] = defaultdict(list)
    for read in reads:
        for name in uniques.read_as(read.name):  # a partner's own visitors are in its subtree's too
            by_name[name].append(read.current)
    days = {name: parse_stamp_day(name.day_stamp) for name in by_name}
    stored = _stored_hlls(set(days.values()))
    names = list(by_name)
    merged = []
    for start in range(0, len(names), CHUNK):
        chunk = names[start : start + CHUNK]
        unions = [[stored.get((ids.get(n.code, -1), days[n], n.scope)), *by_name[n]] for n in chunk]
        for name, (blob, count) in zip(chunk, uniques.merged_counts(client, unions), strict=True):
            merged.append(DayUv(name, days[name], blob, count))
    return merged


def _daily_rows(touched: set[tuple[int | None, dt.date]], hlls: list[DayUv], ids: dict) -> list[dict]:
    """Recompute every touched partner-day from bucket rows and the merged HyperLogLogs."""
    rows: dict[tuple[int | None, dt.date], dict] = defaultdict(dict)
    for day in {day for _, day in touched}:
        start, end = day_bounds(day)
        partner_ids = {pid for pid, d in touched if d == day}
        sums = (
            BucketStat.objects.filter(start__gte=start, start__lt=end)
            .filter(partner_id__in=[p for p in partner_ids if p is not None])
            .values("partner_id")
            .annotate(pv=Sum("pv"), pv_self=Sum("pv_self"), bot_pv=Sum("bot_pv"))
        )
        found: list[Mapping[str, Any]] = list(sums)
        if None in partner_ids:
            site = BucketStat.objects.filter(start__gte=start, start__lt=end, partner=None).aggregate(
                pv=Sum("pv"), pv_self=Sum("pv_self"), bot_pv=Sum("bot_pv")
            )
            found.append({"partner_id": None, **site})
        for row in found:
            rows[(row["partner_id"], day)].update(
                realtime_pv=row["pv"] or 0, realtime_pv_self=row["pv_self"] or 0, bot_pv=row["bot_pv"] or 0
            )
    for uv in hlls:
        fields = rows[(ids[uv.name.code], uv.day)]
        if uv.name.scope == TREE:
            fields.update(realtime_uv=uv.count, hll=uv.merged)
        else:
            fields.update(realtime_uv_self=uv.count, hll_self=uv.merged)
    reconciled = set(
        DailyStat.objects.filter(date__in={d for _, d in rows}, reconciled_at__isnull=False).values_list(
            "partner_id", "date"
        )
    )
    result = []
    for (partner_id, day), fields in rows.items():
        daily_row: dict[str, Any] = {"partner_id": partner_id, "date": day, **fields}
        if (partner_id, day) not in reconciled:
            # Not reconciled yet: what the API shows is the realtime number.
            for shown in ("pv", "pv_self", "uv", "uv_self"):
                if f"realtime_{shown}" in fields:
                    daily_row[shown] = fields[f"realtime_{shown}"]
        else:
            daily_row.pop("bot_pv", None)
        result.append(daily_row)
    return result


def flush(*, now: dt.datetime | None = None, include_open: bool = False) -> FlushResult:
    """Flush settled buckets (and open ones with ``include_open``) and all day UVs to SQL; see module doc."""
    now = now or timezone.now()
    result = FlushResult()
    client = get_redis_connection("default")
    upgrade_layout()  # an earlier version's keys, moved before they are read
    with job_lock("flush") as lock:
        ids: dict[str, int | None] = dict(Partner.objects.values_list("code", "id"))
        ids[keys.NO_PARTNER] = None
        settled_stamp = _settled_bucket_stamp(now)
        max_score = float("inf") if include_open else settled_stamp
        hll_reads = [h for h in uniques.read_day_hlls(client) if h.name.code in ids]
        hlls = _merge_hlls(client, hll_reads, ids)
        buckets = _BucketsRead(ids)
        with lock.atomic():  # step 2, committed only while the lock is ours
            chunks = pageviews.read_indexed(client, max_score=max_score)
            upsert_chunks(BucketStat, buckets.rows(chunks), key_fields=["partner_id", "start", "generation"])
            daily = _daily_rows(buckets.touched, hlls, ids)
            upsert_rows(DailyStat, daily, key_fields=["partner_id", "date"])
        result.buckets, result.days = buckets.written(), len(daily)
        faults.reach("flush_after_commit")
        lock.ensure_held()  # step 3
        result.deleted_keys = _delete_settled(
            client, list(buckets.last.values()), hll_reads, settled_stamp=settled_stamp, now=now
        )
    logger.info(result.summary())
    return result


class _BucketsRead:
    """The buckets a flush read, as it reads them: their BucketStat rows, the last read of each key (what
    compare-and-delete checks) and the partner-days the rows touch.

    Keys of partners deleted since are left alone; empty ones (gone, still indexed) write no row and are only
    un-indexed.
    """

    def __init__(self, ids: dict[str, int | None]) -> None:
        self.ids = ids
        self.last: dict[str, pageviews.BucketRead] = {}
        self.touched: set[tuple[int | None, dt.date]] = set()
        self._starts: dict[str, tuple[dt.datetime, dt.date]] = {}  # 1,000 partners share each stamp

    def rows(self, chunks: Iterable[list[pageviews.BucketRead]]) -> Iterator[list[dict]]:
        """Yield the rows of each chunk of buckets read."""
        for chunk in chunks:
            known = [b for b in chunk if b.code in self.ids]
            self.last.update((b.key, b) for b in known)
            yield self._rows(known)

    def written(self) -> int:
        return sum(1 for b in self.last.values() if not b.missing)

    def _rows(self, buckets: list[pageviews.BucketRead]) -> list[dict]:
        ids, starts, touched = self.ids, self._starts, self.touched
        rows = []
        for bucket in buckets:
            code, stamp = bucket.code, bucket.stamp
            if bucket.missing:
                continue
            if stamp not in starts:
                start = parse_stamp_minute(stamp)
                starts[stamp] = start, local_day(start)
            start, day = starts[stamp]
            numbers = bucket.numbers()
            partner_id = ids[code]
            rows.append(
                {
                    "partner_id": partner_id,
                    "start": start,
                    "generation": numbers.generation,
                    "pv": numbers.tree,
                    "pv_self": numbers.own,
                    "bot_pv": numbers.bot,
                }
            )
            touched.add((partner_id, day))
        return rows


def _delete_settled(
    client: RedisClient,
    buckets: list[pageviews.BucketRead],
    hlls: list[uniques.HllRead],
    *,
    settled_stamp: int,
    now: dt.datetime,
) -> int:
    settled_up_to = str(settled_stamp)  # stamps are fixed-width digits: they compare as strings
    deleted = pageviews.delete_unchanged(client, [b for b in buckets if b.stamp <= settled_up_to])
    return deleted + uniques.delete_unchanged(
        client, hlls, settled=lambda day_stamp: _day_settled(parse_stamp_day(day_stamp), now)
    )
