"""Flush Redis PV buckets and UV HyperLogLogs to the SQL tables, idempotently.

Order of work, so that a crash anywhere leaves numbers a re-run repairs:

1. read the buckets (absolute counts since their key was created) and the day HyperLogLogs;
2. in one transaction, upsert bucket rows with those absolute values, recompute the touched days from
   bucket rows, and merge each day's HyperLogLog into the one stored with the day (a union: idempotent);
3. after the commit, delete each settled key only if it still holds what was written (a compare-and-delete
   script), so an increment that raced the flush stays in Redis for the next one.

The ``flush`` job lock is renewed while the flush runs and checked before step 2 opens, before it commits and
before step 3: a flush that lost its lock stops (``LockLost``) instead of writing beside another one.
"""

import datetime as dt
import logging
import uuid
from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Sum
from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common import faults, redis_keys
from cpsproject.common.locks import job_lock
from cpsproject.common.timeutil import (
    day_bounds,
    local_day,
    parse_stamp_day,
    parse_stamp_minute,
    stamp_day,
    stamp_minute,
)
from cpsproject.common.upsert import upsert_rows
from partners.models import Partner
from stats import keys
from stats.conf import stats_setting
from stats.counters.pageviews import BOT, GEN, SELF, TREE, bucket_start, queue_hll_union
from stats.models import BucketStat, DailyStat

logger = logging.getLogger(__name__)

CHUNK = 1000
# Buckets per compare-and-delete script call: long enough to spare round trips and argument packing, short
# enough not to hold Redis for more than a millisecond or so.
DELETE_CHUNK = 200

_BUCKET_FIELDS = (SELF, TREE, BOT, GEN)

# KEYS = buckets. Returns one string, a line per bucket of its tab-separated fields (empty when missing): a
# thousand buckets come back as one reply, where HGETALLs cost redis-py (no hiredis) 8 parsed strings each.
_READ_BUCKETS = """
local lines = {}
for k = 1, #KEYS do
  local v = redis.call('HMGET', KEYS[k], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
  lines[k] = (v[1] or '') .. '\\t' .. (v[2] or '') .. '\\t' .. (v[3] or '') .. '\\t' .. (v[4] or '')
end
return table.concat(lines, '\\n')
"""

# KEYS = the bucket index, then buckets; ARGV = 4 expected values per bucket. One call settles a whole chunk.
_DELETE_BUCKETS_IF_UNCHANGED = """
local deleted = 0
for k = 2, #KEYS do
  local now = redis.call('HMGET', KEYS[k], 'self', 'tree', 'bot', 'gen')
  local base, same = (k - 2) * 4, true
  for i = 1, 4 do
    if (now[i] or '') ~= ARGV[base + i] then same = false break end
  end
  if same then
    redis.call('DEL', KEYS[k])
    redis.call('ZREM', KEYS[1], KEYS[k])
    deleted = deleted + 1
  end
end
return deleted
"""

_DELETE_HLL_IF_UNCHANGED = """
if redis.call('EXISTS', KEYS[1]) == 1 and redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], KEYS[1])
if redis.call('SCARD', KEYS[2]) == 0 then redis.call('ZREM', KEYS[3], ARGV[2]) end
return 1
"""


@dataclass
class FlushResult:
    buckets: int = 0
    days: int = 0
    deleted_keys: int = 0

    def summary(self) -> str:
        return f"flushed {self.buckets} buckets into {self.days} partner-days; deleted {self.deleted_keys} settled keys"


@dataclass(frozen=True)
class BucketRead:
    key: str
    code: str
    stamp: str  # yyyyMMddHHmm, the key's suffix
    start: dt.datetime
    values: dict[str, str]


@dataclass(frozen=True)
class HllRead:
    key: str
    code: str
    day: dt.date
    scope: str
    current: bytes  # the key's bytes when read (what compare-and-delete checks)
    merged: bytes  # stored day HLL ∪ current
    count: int


def _settled_bucket_stamp(now: dt.datetime) -> int:
    """Return the latest bucket stamp whose bucket ended at least SETTLE_SECONDS ago."""
    lag = dt.timedelta(seconds=stats_setting("BUCKET_SECONDS") + stats_setting("SETTLE_SECONDS"))
    return int(stamp_minute(bucket_start(now - lag)))


def _day_settled(day: dt.date, now: dt.datetime) -> bool:
    return day_bounds(day)[1] + dt.timedelta(seconds=stats_setting("SETTLE_SECONDS")) <= now


def _read_buckets(client, *, max_score: float) -> list[BucketRead]:
    read_chunk = client.register_script(_READ_BUCKETS)
    reads: list[BucketRead] = []
    starts: dict[str, dt.datetime] = {}  # many partners share each bucket: parse each stamp once
    offset = 0
    while True:
        members = client.zrangebyscore(keys.pv_index(), "-inf", max_score, start=offset, num=CHUNK)
        if not members:
            return reads
        offset += len(members)
        lines = read_chunk(keys=members, args=_BUCKET_FIELDS).decode().split("\n")
        for member, line in zip(members, lines, strict=True):
            key = member.decode()
            code, stamp = keys.parse_pv_bucket(key)
            if stamp not in starts:
                starts[stamp] = parse_stamp_minute(stamp)
            values = {f: v for f, v in zip(_BUCKET_FIELDS, line.split("\t"), strict=True) if v}
            reads.append(BucketRead(key, code, stamp, starts[stamp], values))


def _stored_hlls(reads: list[tuple[str, str, dt.date, str]]) -> dict:
    stored = {}
    days = {day for _, _, day, _ in reads}
    for row in DailyStat.objects.filter(date__in=days).values("partner_id", "date", "hll", "hll_self"):
        stored[(row["partner_id"], row["date"], TREE)] = row["hll"]
        stored[(row["partner_id"], row["date"], SELF)] = row["hll_self"]
    return stored


def _read_hlls(client, ids: dict[str, int | None]) -> list[HllRead]:
    """Read every day HyperLogLog still in Redis and merge it with the one stored for its day."""
    uv_keys = []
    for day_stamp in client.zrange(keys.uv_days(), 0, -1):
        day_stamp = day_stamp.decode()
        for member in client.sscan_iter(keys.uv_index(day_stamp), count=1000):
            key = member.decode()
            code, _, scope = keys.parse_uv_day(key)
            uv_keys.append((key, code, parse_stamp_day(day_stamp), scope))
    stored = _stored_hlls(uv_keys)
    reads: list[HllRead] = []
    for start in range(0, len(uv_keys), CHUNK):
        chunk = uv_keys[start : start + CHUNK]
        pipe = client.pipeline(transaction=True)
        scratch = redis_keys.scratch(uuid.uuid4().hex)
        skips = []
        for key, code, day, scope in chunk:
            pipe.get(key)
            previous = stored.get((ids.get(code, -1), day, scope))
            skips.append(queue_hll_union(pipe, scratch, blobs=[previous], sources=[key]))
            pipe.get(scratch)
            pipe.pfcount(scratch)
        pipe.delete(scratch)
        replies, position = pipe.execute(), 0
        for (key, code, day, scope), skip in zip(chunk, skips, strict=True):
            current = replies[position]
            merged, count = replies[position + 1 + skip], replies[position + 2 + skip]
            position += skip + 3
            reads.append(HllRead(key, code, day, scope, current or b"", merged, count))
    return reads


def _daily_rows(touched: set[tuple[int | None, dt.date]], hlls: list[HllRead], ids: dict) -> list[dict]:
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
        found = list(sums)
        if None in partner_ids:
            site = BucketStat.objects.filter(start__gte=start, start__lt=end, partner=None).aggregate(
                pv=Sum("pv"), pv_self=Sum("pv_self"), bot_pv=Sum("bot_pv")
            )
            found.append({"partner_id": None, **site})
        for row in found:
            rows[(row["partner_id"], day)].update(
                realtime_pv=row["pv"] or 0, realtime_pv_self=row["pv_self"] or 0, bot_pv=row["bot_pv"] or 0
            )
    for read in hlls:
        fields = rows[(ids[read.code], read.day)]
        if read.scope == TREE:
            fields.update(realtime_uv=read.count, hll=read.merged)
        else:
            fields.update(realtime_uv_self=read.count, hll_self=read.merged)
    reconciled = set(
        DailyStat.objects.filter(date__in={d for _, d in rows}, reconciled_at__isnull=False).values_list(
            "partner_id", "date"
        )
    )
    result = []
    for (partner_id, day), fields in rows.items():
        row = {"partner_id": partner_id, "date": day, **fields}
        if (partner_id, day) not in reconciled:
            # Not reconciled yet: what the API shows is the realtime number.
            for shown in ("pv", "pv_self", "uv", "uv_self"):
                if f"realtime_{shown}" in fields:
                    row[shown] = fields[f"realtime_{shown}"]
        else:
            row.pop("bot_pv", None)
        result.append(row)
    return result


def flush(*, now: dt.datetime | None = None, include_open: bool = False) -> FlushResult:
    """Flush settled buckets (and open ones with ``include_open``) and all day UVs to SQL; see module doc."""
    now = now or timezone.now()
    result = FlushResult()
    client = get_redis_connection("default")
    with job_lock("flush") as lock:
        ids: dict[str, int | None] = dict(Partner.objects.values_list("code", "id"))
        ids[keys.NO_PARTNER] = None
        settled_stamp = _settled_bucket_stamp(now)
        max_score = float("inf") if include_open else settled_stamp
        # Keys of partners deleted since are left alone; empty ones (gone, still indexed) are only un-indexed.
        buckets = [b for b in _read_buckets(client, max_score=max_score) if b.code in ids]
        hlls = [h for h in _read_hlls(client, ids) if h.code in ids]
        bucket_rows = [
            {
                "partner_id": ids[b.code],
                "start": b.start,
                "generation": b.values.get(GEN, ""),
                "pv": int(b.values.get(TREE, 0)),
                "pv_self": int(b.values.get(SELF, 0)),
                "bot_pv": int(b.values.get(BOT, 0)),
            }
            for b in buckets
            if b.values
        ]
        touched = {(row["partner_id"], local_day(row["start"])) for row in bucket_rows}
        with lock.atomic():  # step 2, committed only while the lock is ours
            upsert_rows(BucketStat, bucket_rows, key_fields=["partner_id", "start", "generation"])
            daily = _daily_rows(touched, hlls, ids)
            upsert_rows(DailyStat, daily, key_fields=["partner_id", "date"])
        result.buckets, result.days = len(bucket_rows), len(daily)
        faults.reach("flush_after_commit")
        lock.ensure_held()  # step 3
        result.deleted_keys = _delete_settled(client, buckets, hlls, settled_stamp=settled_stamp, now=now)
    logger.info(result.summary())
    return result


def _delete_settled(
    client, buckets: list[BucketRead], hlls: list[HllRead], *, settled_stamp: int, now
) -> int:
    delete_buckets = client.register_script(_DELETE_BUCKETS_IF_UNCHANGED)
    delete_hll = client.register_script(_DELETE_HLL_IF_UNCHANGED)
    pipe = client.pipeline(transaction=False)
    settled = [b for b in buckets if int(b.stamp) <= settled_stamp]
    for start in range(0, len(settled), DELETE_CHUNK):
        chunk = settled[start : start + DELETE_CHUNK]
        expected = [b.values.get(f, "") for b in chunk for f in _BUCKET_FIELDS]
        delete_buckets(keys=[keys.pv_index(), *(b.key for b in chunk)], args=expected, client=pipe)
    for h in hlls:
        if _day_settled(h.day, now):
            day_stamp = stamp_day(h.day)
            delete_hll(
                keys=[h.key, keys.uv_index(day_stamp), keys.uv_days()],
                args=[h.current, day_stamp],
                client=pipe,
            )
    return sum(pipe.execute())
