"""Flush Redis PV buckets and UV HyperLogLogs to the SQL tables, idempotently.

Order of work, so that a crash anywhere leaves numbers a re-run repairs:

1. read the day HyperLogLogs;
2. in one transaction, read the buckets (absolute counts since their key was created) a chunk at a time and
   upsert their rows with those absolute values (on MySQL the next chunk is read from Redis while MariaDB
   inserts the last one), recompute the touched days from bucket rows, and merge each day's HyperLogLog into
   the one stored with the day (a union: idempotent);
3. after the commit, delete each settled key only if it still holds what was written (a compare-and-delete
   script), so an increment that raced the flush stays in Redis for the next one.

The ``flush`` job lock is renewed while the flush runs and checked before step 2 opens, before it commits and
before step 3: a flush that lost its lock stops (``LockLost``) instead of writing beside another one.
"""

import datetime as dt
import logging
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import starmap
from typing import NamedTuple

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
from cpsproject.common.upsert import upsert_chunks, upsert_rows
from partners.models import Partner
from stats import keys
from stats.conf import stats_setting
from stats.counters.pageviews import BOT, GEN, SELF, TREE, bucket_start, queue_hll_union
from stats.models import BucketStat, DailyStat

logger = logging.getLogger(__name__)

CHUNK = 1000
# Index members fetched per ZRANGE, their buckets read by one pipeline of script calls: few round trips to a
# busy Redis, and no command holding it for more than a few milliseconds.
INDEX_PAGE = 10 * CHUNK
# Buckets per compare-and-delete script call: one call holds Redis for 5-10 ms, as a read of CHUNK buckets does.
DELETE_CHUNK = 1000

_BUCKET_FIELDS = (SELF, TREE, BOT, GEN)
_MISSING = "\t" * (len(_BUCKET_FIELDS) - 1)  # the line of a bucket whose hash is gone

# KEYS = buckets. Returns one string, a line per bucket of its tab-separated fields (empty when missing): a
# thousand buckets come back as one reply instead of a thousand parsed ones.
_READ_BUCKETS = """
local lines = {}
for k = 1, #KEYS do
  local v = redis.call('HMGET', KEYS[k], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
  lines[k] = (v[1] or '') .. '\\t' .. (v[2] or '') .. '\\t' .. (v[3] or '') .. '\\t' .. (v[4] or '')
end
return table.concat(lines, '\\n')
"""

# KEYS = the bucket index, then buckets; ARGV = the fields, then the buckets' lines as _READ_BUCKETS returned
# them, joined by newlines: one argument per chunk, not four per bucket. A bucket is deleted only if its line
# is still the one that was written to SQL; the deleted ones leave the index in one ZREM.
_DELETE_BUCKETS_IF_UNCHANGED = """
local expected, from, gone = ARGV[5], 1, {}
for k = 2, #KEYS do
  local to = string.find(expected, '\\n', from, true) or (#expected + 1)
  local v = redis.call('HMGET', KEYS[k], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
  local now = (v[1] or '') .. '\\t' .. (v[2] or '') .. '\\t' .. (v[3] or '') .. '\\t' .. (v[4] or '')
  if now == string.sub(expected, from, to - 1) then gone[#gone + 1] = KEYS[k] end
  from = to + 1
end
if #gone > 0 then
  redis.call('DEL', unpack(gone))
  redis.call('ZREM', KEYS[1], unpack(gone))
end
return #gone
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


class BucketRead(NamedTuple):  # a tuple: a flush reads 100,000 of them
    key: str
    code: str
    stamp: str  # yyyyMMddHHmm, the key's suffix
    line: str  # the hash's self, tree, bot and gen fields as read, tab-separated ('' when missing)


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


def _read_buckets(client, *, max_score: float) -> Iterator[list[BucketRead]]:
    """Yield every indexed bucket whose stamp is at most ``max_score``, a chunk at a time, walking the index by rank.

    The ``ZCOUNT`` fixes how many to read: a consumer adding a lower stamp meanwhile shifts ranks up, so a
    bucket may be read twice (the flush keeps its last read) or wait for the next flush, never skipped for good.
    Walking by rank costs Redis log(N) per chunk, where ``LIMIT offset`` walked past every earlier member.
    """
    read_chunk = client.register_script(_READ_BUCKETS)
    index = keys.pv_index()
    total = client.zcount(index, "-inf", max_score)
    for rank in range(0, total, INDEX_PAGE):
        members = client.zrange(index, rank, min(rank + INDEX_PAGE, total) - 1)
        if not members:
            return
        chunks = [members[at : at + CHUNK] for at in range(0, len(members), CHUNK)]
        pipe = client.pipeline(transaction=False)
        for chunk in chunks:
            read_chunk(keys=chunk, args=_BUCKET_FIELDS, client=pipe)
        for chunk, reply in zip(chunks, pipe.execute(), strict=True):
            lines = reply.decode().split("\n")
            bucket_keys = list(map(bytes.decode, chunk))
            codes, stamps = zip(*map(keys.parse_pv_bucket, bucket_keys), strict=True)
            yield list(starmap(BucketRead, zip(bucket_keys, codes, stamps, lines, strict=True)))


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
        day = parse_stamp_day(day_stamp)
        for member in client.sscan_iter(keys.uv_index(day_stamp), count=1000):
            key = member.decode()
            code, _, scope = keys.parse_uv_day(key)
            uv_keys.append((key, code, day, scope))
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
        hlls = [h for h in _read_hlls(client, ids) if h.code in ids]
        buckets = _BucketsRead(ids)
        with lock.atomic():  # step 2, committed only while the lock is ours
            chunks = _read_buckets(client, max_score=max_score)
            upsert_chunks(BucketStat, buckets.rows(chunks), key_fields=["partner_id", "start", "generation"])
            daily = _daily_rows(buckets.touched, hlls, ids)
            upsert_rows(DailyStat, daily, key_fields=["partner_id", "date"])
        result.buckets, result.days = buckets.written(), len(daily)
        faults.reach("flush_after_commit")
        lock.ensure_held()  # step 3
        result.deleted_keys = _delete_settled(
            client, list(buckets.last.values()), hlls, settled_stamp=settled_stamp, now=now
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
        self.last: dict[str, BucketRead] = {}
        self.touched: set[tuple[int | None, dt.date]] = set()
        self._starts: dict[str, tuple[dt.datetime, dt.date]] = {}  # 1,000 partners share each stamp

    def rows(self, chunks: Iterable[list[BucketRead]]) -> Iterator[list[dict]]:
        """Yield the rows of each chunk of buckets read."""
        for chunk in chunks:
            known = [b for b in chunk if b.code in self.ids]
            self.last.update((b.key, b) for b in known)
            yield self._rows(known)

    def written(self) -> int:
        return sum(1 for b in self.last.values() if b.line != _MISSING)

    def _rows(self, buckets: list[BucketRead]) -> list[dict]:
        ids, starts, touched = self.ids, self._starts, self.touched
        rows = []
        for _, code, stamp, line in buckets:
            if line == _MISSING:
                continue
            if stamp not in starts:
                start = parse_stamp_minute(stamp)
                starts[stamp] = start, local_day(start)
            start, day = starts[stamp]
            own, tree, bot, generation = line.split("\t")  # the order of _BUCKET_FIELDS
            partner_id = ids[code]
            rows.append(
                {
                    "partner_id": partner_id,
                    "start": start,
                    "generation": generation,
                    "pv": int(tree or 0),
                    "pv_self": int(own or 0),
                    "bot_pv": int(bot or 0),
                }
            )
            touched.add((partner_id, day))
        return rows


def _delete_settled(
    client, buckets: list[BucketRead], hlls: list[HllRead], *, settled_stamp: int, now
) -> int:
    delete_buckets = client.register_script(_DELETE_BUCKETS_IF_UNCHANGED)
    delete_hll = client.register_script(_DELETE_HLL_IF_UNCHANGED)
    pipe = client.pipeline(transaction=False)
    settled_up_to = str(settled_stamp)  # stamps are fixed-width digits: they compare as strings
    settled = [b for b in buckets if b.stamp <= settled_up_to]
    for start in range(0, len(settled), DELETE_CHUNK):
        chunk = settled[start : start + DELETE_CHUNK]
        delete_buckets(
            keys=[keys.pv_index(), *(b.key for b in chunk)],
            args=[*_BUCKET_FIELDS, "\n".join(b.line for b in chunk)],
            client=pipe,
        )
    for h in hlls:
        if _day_settled(h.day, now):
            day_stamp = stamp_day(h.day)
            delete_hll(
                keys=[h.key, keys.uv_index(day_stamp), keys.uv_days()],
                args=[h.current, day_stamp],
                client=pipe,
            )
    return sum(pipe.execute())
