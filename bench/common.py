"""Every import of the product's insides that the benchmarks make, and nothing else.

When the product's modules move, this is the one file to fix. Everything else in ``bench/`` drives the product
through its external contract (``manage.py`` commands, HTTP) or through the functions below.

Importing this module sets Django up with the environment the runner prepared (``harness.Environment``):
``DATABASE_URL``, ``REDIS_URL`` and ``CPS_REDIS_PREFIX`` must be set first.
"""

import contextlib
import datetime as dt
import os
import random
import sys
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cpsproject.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import override_settings  # noqa: E402
from django.utils import timezone  # noqa: E402
from django_redis import get_redis_connection  # noqa: E402
from numpy import ndarray  # noqa: E402

from conversions.models import Order  # noqa: E402
from cpsproject.common import redis_keys  # noqa: E402
from cpsproject.common.timeutil import (  # noqa: E402
    day_bounds,
    local_day,
    parse_stamp_minute,
    stamp_day,
    stamp_minute,
    stamp_month,
)
from loginlog import keys as login_keys  # noqa: E402
from loginlog.bitmaps import month_bits_to_mask, split_bitmap  # noqa: E402
from loginlog.selectors import active_page as _active_page  # noqa: E402
from loginlog.selectors import active_user_ids as _active_user_ids  # noqa: E402
from partners.models import Partner  # noqa: E402
from partners.services import portal_token_issue  # noqa: E402
from stats import keys  # noqa: E402
from stats.counters import pageviews  # noqa: E402
from stats.counters.pageviews import bucket_start, numbers_of_hash, queue_page_views  # noqa: E402
from stats.counters.tally import PageViewTally  # noqa: E402
from stats.counters.uniques import SELF, queue_uniques  # noqa: E402
from stats.devtools.simulate import simulate_events  # noqa: E402
from stats.jobs.flush import flush as _flush  # noqa: E402
from stats.models import DailyStat  # noqa: E402
from stats.pipeline.archive import get_archive  # noqa: E402
from stats.pipeline.events import Rejected, parse_event  # noqa: E402
from stats.pipeline.ingest import Message, PartnerDirectory, process_batch, unfenced_writes  # noqa: E402
from stats.pipeline.registry import queue_counters  # noqa: E402
from stats.read.selectors import uv_between as _uv_between  # noqa: E402


def wsgi_application():
    from django.core.wsgi import get_wsgi_application

    return get_wsgi_application()


def now() -> dt.datetime:
    return timezone.now()


def today() -> dt.date:
    """The business day (settings time zone) of now."""
    return local_day(timezone.now())


@contextlib.contextmanager
def redis_prefix(prefix: str) -> Iterator[None]:
    """Point every product key at ``{prefix}:`` while the block runs (what a stage's subprocess gets by env)."""
    overrides = {"CPS_REDIS_PREFIX": prefix}
    if "KEY_PREFIX" in settings.CPS_STATS:  # the API throttle's copy, while it lasts
        overrides["CPS_STATS"] = {**settings.CPS_STATS, "KEY_PREFIX": prefix}
    with override_settings(**overrides):
        yield


def redis():
    return get_redis_connection("default")


def database_vendor() -> str:
    return connection.vendor


# --- Partners -----------------------------------------------------------------------------------------


def partner_codes() -> list[str]:
    """Every partner code, in code order (the order ``simulate`` ranks them by traffic)."""
    return list(Partner.objects.order_by("code").values_list("code", flat=True))


def partner_chains() -> dict[str, list[str]]:
    """Each partner code -> its chain of codes, root first."""
    rows = list(Partner.objects.values_list("id", "code", "path"))
    code_by_id = {pk: code for pk, code, _ in rows}
    return {code: [code_by_id[int(p)] for p in path.strip("/").split("/") if p] for _, code, path in rows}


def portal_tokens(codes: Iterable[str]) -> dict[str, str]:
    """An API token per partner code (a partner portal that sees that partner's subtree)."""
    partners = Partner.objects.in_bulk(list(codes), field_name="code")
    return {code: portal_token_issue(partner=partner) for code, partner in partners.items()}


# --- Ingest: the pipeline, its stages, and the first design document's pattern ------------------------


def simulate_values(
    *, events: int, seed: int, users: int, day: dt.date | None = None, rate: float | None = None
) -> list[bytes]:
    """Synthetic message values over every partner, as ``manage.py simulate`` makes them (1% bad ones).

    With ``rate``, live traffic: timestamps rise at ``rate`` events/s up to now (``simulate --rate``).
    """
    moment = timezone.now()
    values, _ = simulate_events(
        events=events, day=day or local_day(moment), users=users, until=moment, seed=seed, rate=rate
    )
    return values


class Ingest:
    """The consumer's work on in-memory batches, whole (``process``) or stage by stage."""

    def __init__(self) -> None:
        self.directory = PartnerDirectory()
        self.now = timezone.now()
        self.group = f"bench-{uuid.uuid4().hex[:8]}"
        self.source = f"bench-{uuid.uuid4().hex[:8]}"

    def parse(self, values: Sequence[bytes]) -> list[object]:
        """The valid events among ``values`` (the invalid ones would be dead letters)."""
        lineages = self.directory.lineages()
        parsed = []
        for value in values:
            try:
                parsed.append(parse_event(value, lineages=lineages, now=self.now))
            except Rejected:
                continue
        return parsed

    def archive(self, events: Sequence[object]) -> None:
        """The archive stage of one batch: one transaction, one bulk insert (as ``process_batch`` does it)."""
        with transaction.atomic():
            get_archive().store(events)

    def count(self, values: Sequence[bytes], *, partition: int = 0) -> None:
        """The counting stage of one batch from one partition: parse, pre-aggregate, one MULTI/EXEC.

        A poll of a few thousand records mostly holds one partition's (the producer fills one partition's
        batch at a time), so each in-process batch is one partition's, as ``process`` makes it.
        """
        events = self.parse(values)
        # Not a transaction: the partition registry the writes add sits in a slot of its own on a cluster.
        pipe = redis().pipeline(transaction=False)
        queue_counters(unfenced_writes(pipe, partition), events, now=self.now)
        pipe.set(keys.offset(self.group, self.source, partition), len(values))
        pipe.execute()

    def process(self, values: Sequence[bytes], *, first_offset: int, partition: int = 0) -> int:
        """The whole pipeline on one batch (``process_batch``, as ``consume`` calls it); return events counted."""
        messages = [
            Message(self.source, partition, first_offset + n, value) for n, value in enumerate(values)
        ]
        return process_batch(
            messages, group=self.group, directory=self.directory, now=self.now, archive_concurrently=True
        ).counted

    def design_doc_events(self, values: Sequence[bytes]) -> None:
        """The first design document's consumer on ``values``: per event, insert one document, then INCR,
        ZADD and PFADD, each its own round trip.

        The inserts of one call share a transaction: MongoDB acknowledges an ``insert_one`` without waiting
        for its journal, so a commit (an fsync) per event would charge the pattern for something the
        document's MongoDB does not do. Run it under a Redis prefix of its own: its bucket counters are
        plain strings (INCR), not the product's hashes.
        """
        lineages = self.directory.lineages()
        archive = get_archive()
        client = redis()
        with transaction.atomic():
            for value in values:
                try:
                    event = parse_event(value, lineages=lineages, now=self.now)
                except Rejected:
                    continue
                archive.store([event])
                if getattr(event, "lineage", None) is None or event.is_bot:
                    continue
                stamp = stamp_minute(bucket_start(event.ts))
                bucket = keys.pv_bucket(0, event.lineage.code, stamp)
                client.incr(bucket)
                client.zadd(keys.pv_index(0), {bucket: int(stamp)})
                client.pfadd(
                    keys.uv_day(0, event.lineage.code, stamp_day(local_day(event.ts)), SELF), event.openid
                )


def order_count() -> int:
    return Order.objects.count()


def view_memory(prefix: str) -> tuple[int, int, int]:
    """Return the bytes of the attribution views' hashes under ``prefix``, the buyers and the fields they hold."""
    client = redis()
    used = fields = 0
    buyers: set[bytes] = set()
    for key in client.scan_iter(match="{" + prefix + ":views:*", count=1000):
        if key.endswith(b":partitions}"):
            continue
        used += client.memory_usage(key, samples=0) or 0
        if client.type(key) == b"zset":  # the sorted set per buyer of 111e10d, measured for the "before" row
            fields += 1
            buyers.add(key)
            continue
        names = client.hkeys(key)
        fields += len(names)
        buyers.update(name.rsplit(b"\x1f", 1)[0] for name in names)
    return used, len(buyers), fields


def archive_simulated(*, day: dt.date, events: int, users: int, batch: int, chunk: int = 100_000) -> int:
    """Archive ``events`` simulated messages of ``day`` in-process (parse, then the archive's ``store`` per
    batch), for a reconcile run without the consume benchmark before it. Return the raw events stored."""
    ingest = Ingest()
    for seed, start in enumerate(range(0, events, chunk), start=100):
        values = simulate_values(events=min(chunk, events - start), seed=seed, users=users, day=day)
        for first in range(0, len(values), batch):
            ingest.archive(ingest.parse(values[first : first + batch]))
    return raw_event_count(day)


def raw_event_count(day: dt.date | None = None) -> int:
    archive = get_archive()
    return sum(1 for _ in archive.events(day)) if day else archive.count_events()


# --- Flush --------------------------------------------------------------------------------------------


def queue_dirty_buckets(*, day: dt.date, buckets: int, users: int = 200) -> int:
    """Make every partner's own 5-minute buckets ``0..buckets-1`` of ``day`` dirty, through the ingest code.

    One page view per partner and bucket (its ancestors' buckets are the same keys), so the flush finds
    partners x buckets dirty bucket hashes, plus each partner's day HyperLogLogs. Return the dirty bucket count.
    """
    now = timezone.now()
    lineages = PartnerDirectory().lineages()
    start = day_bounds(day)[0]
    client = redis()
    views = []
    rng = random.Random(3)

    def send() -> None:
        pipe = client.pipeline(transaction=False)
        tally = PageViewTally.of(views)
        writes = unfenced_writes(pipe)
        queue_page_views(writes, tally, now=now)
        queue_uniques(writes, tally)
        pipe.execute()
        views.clear()

    for bucket in range(buckets):
        ts = int((start + dt.timedelta(minutes=5 * bucket, seconds=17)).timestamp() * 1000)
        for code in lineages:
            value = (
                f'{{"event_id":"flush-{code}-{bucket}","type":"pv","ts":{ts},"partner":"{code}",'
                f'"openid":"o-{rng.randrange(users)}"}}'
            ).encode()
            views.append(parse_event(value, lineages=lineages, now=now))
            if len(views) >= 5000:
                send()
    if views:
        send()
    return dirty_bucket_count()


def dirty_bucket_count() -> int:
    return pageviews.pending_count(redis())


def flush_row_by_row(*, budget_seconds: float) -> tuple[int, int, float]:
    """The baseline flush: per dirty bucket, read its hash, then ``UPDATE … SET pv = pv + n`` on its day row.

    Runs in one transaction that is rolled back (Redis is only read), so the real flush finds the same state
    afterwards. Stops after ``budget_seconds``; return ``(buckets done, buckets dirty, seconds)``.
    """
    import time

    client = redis()
    members = [m.decode() for m in client.zrange(keys.pv_index(0), 0, -1)]  # queue_dirty_buckets' partition
    ids = dict(Partner.objects.values_list("code", "id"))
    table = connection.ops.quote_name(DailyStat._meta.db_table)
    sql = f"UPDATE {table} SET pv = pv + %s, pv_self = pv_self + %s WHERE partner_id = %s AND date = %s"
    done = 0
    with transaction.atomic():
        days = {local_day(parse_stamp_minute(m.rsplit(":", 1)[1])) for m in members}
        DailyStat.objects.bulk_create(
            [DailyStat(partner_id=pk, date=day) for pk in ids.values() for day in days],
            ignore_conflicts=True,
            batch_size=1000,
        )
        start = time.perf_counter()
        with connection.cursor() as cursor:
            for member in members:
                numbers = numbers_of_hash(client.hgetall(member))
                code, stamp = keys.parse_pv_bucket(member)
                day = local_day(parse_stamp_minute(stamp))
                cursor.execute(
                    sql,
                    [
                        numbers.tree,
                        numbers.own,
                        ids.get(code),
                        day,
                    ],
                )
                done += 1
                if done % 1000 == 0 and time.perf_counter() - start > budget_seconds:
                    break
        seconds = time.perf_counter() - start
        transaction.set_rollback(True)
    return done, len(members), seconds


def flush() -> tuple[int, int]:
    """The product's flush (``manage.py flush``); return (bucket rows written, partner-days written)."""
    result = _flush()
    return result.buckets, result.days


# --- The read side: API history, UV over a range -----------------------------------------------------


def _hll_blobs(cardinalities: Iterable[int]) -> dict[int, bytes]:
    """Real Redis HyperLogLog bytes holding ``n`` distinct openids, for each ``n``."""
    client = redis()
    blobs = {}
    for n in sorted(set(cardinalities)):
        key = redis_keys.scratch(f"hll-{n}-{uuid.uuid4().hex[:6]}")
        for start in range(0, n, 5000):
            client.pfadd(key, *(f"o-{i}" for i in range(start, min(n, start + 5000))))
        blobs[n] = client.get(key)
        client.delete(key)
    return blobs


HLL_SIZES = (5, 20, 50, 150, 500, 1000, 1500, 5000)  # 5000 is a dense HyperLogLog (12 KB)


def seed_daily_history(*, start: dt.date, end: dt.date, partner_pv_per_day: int = 1_000_000) -> int:
    """Reconciled day rows for every partner from ``start`` to ``end``, as nightly reconciles leave them.

    Traffic per partner follows ``simulate``'s ranking (the first codes get most); each row carries real
    HyperLogLog bytes sized for its distinct users (dense 12 KB ones for the busiest partners).
    Return the rows written.
    """
    chains = partner_chains()
    codes = sorted(chains)
    harmonic = sum(1 / (rank + 1) for rank in range(len(codes)))
    pv_self = {
        code: max(1, int(partner_pv_per_day / harmonic / (rank + 1))) for rank, code in enumerate(codes)
    }
    pv_tree: defaultdict[str, int] = defaultdict(int)
    for code, chain in chains.items():
        for ancestor in chain:
            pv_tree[ancestor] += pv_self[code]

    def size_for(pv: int) -> int:
        users = int(pv * 0.6)
        return max([s for s in HLL_SIZES if s <= users], default=HLL_SIZES[0])

    blobs = _hll_blobs(HLL_SIZES)
    ids = dict(Partner.objects.values_list("code", "id"))
    rng = random.Random(11)
    written = 0
    day = start
    while day <= end:
        reconciled_at = day_bounds(day)[1] + dt.timedelta(minutes=30)
        rows = []
        for code in codes:
            swing = rng.uniform(0.8, 1.2)
            pv, own = int(pv_tree[code] * swing), int(pv_self[code] * swing)
            uv, uv_self = int(pv * 0.6), int(own * 0.6)
            rows.append(
                DailyStat(
                    partner_id=ids[code],
                    date=day,
                    pv=pv,
                    pv_self=own,
                    uv=uv,
                    uv_self=uv_self,
                    realtime_pv=pv,
                    realtime_pv_self=own,
                    realtime_uv=uv,
                    realtime_uv_self=uv_self,
                    hll=blobs[size_for(pv)],
                    hll_self=blobs[size_for(own)],
                    reconciled_at=reconciled_at,
                )
            )
        DailyStat.objects.bulk_create(rows, batch_size=250, ignore_conflicts=True)
        written += len(rows)
        day += dt.timedelta(days=1)
    return written


def uv_between(code: str, start: dt.date, end: dt.date) -> int:
    """Distinct users of a partner's subtree from ``start`` to ``end`` (stored and Redis HyperLogLogs)."""
    return _uv_between(_partner(code), start, end)


_partners: dict[str, Partner] = {}


def _partner(code: str) -> Partner:
    if code not in _partners:
        _partners[code] = Partner.objects.get(code=code)
    return _partners[code]


# --- Logins -------------------------------------------------------------------------------------------


def load_logins(
    *, user_type: str, id_space: int, active: int, days: Sequence[dt.date], seed: int = 5
) -> set[int]:
    """Write the Redis login keys of ``active`` users (ids drawn from ``0..id_space-1``) over ``days``.

    Each active user logs in on 1 to 5 of the days. Written as the product lays them out (one bitmap per
    type and day, bit u = user u; one per user and month, bit d = day d; a month index of users) but with
    whole-value writes, so 10 M ids load in seconds. Return the active user ids (the expected answer).
    """
    rng = random.Random(seed)
    users = rng.sample(range(id_space), active)
    size = (id_space + 7) // 8
    day_bits = {day: bytearray(size) for day in days}
    month_masks: defaultdict[tuple[int, str], int] = defaultdict(int)
    for user in users:
        for day in rng.sample(list(days), rng.randint(1, min(5, len(days)))):
            day_bits[day][user >> 3] |= 0x80 >> (user & 7)
            month_masks[(user, stamp_month(day))] |= 1 << day.day
    client = redis()
    for day, bits in day_bits.items():
        for number, block_bits in split_bitmap(bytes(bits)).items():
            block = login_keys.Block(user_type, number)
            client.set(login_keys.login_day(block, stamp_day(day)), block_bits)
            client.zadd(
                login_keys.login_blocks(),
                {login_keys.blocks_member(stamp_month(day), block): int(stamp_month(day))},
            )
    by_block_month: defaultdict[tuple[login_keys.Block, str], list[tuple[int, int]]] = defaultdict(list)
    for (user, month), mask in month_masks.items():
        by_block_month[(login_keys.block_of(user_type, user), month)].append((user, mask))
    pipe = client.pipeline(transaction=False)
    for (block, month), entries in by_block_month.items():
        # Bit d of a month bitmap is day d, most significant bit of byte 0 first (SETBIT's order).
        for user, mask in entries:
            pipe.set(login_keys.login_month(user_type, user, month), _month_bitmap(mask))
        pipe.sadd(login_keys.login_index(block, month), *(user for user, _ in entries))
        if len(pipe) > 10_000:
            pipe.execute()
    pipe.execute()
    return set(users)


def _month_bitmap(mask: int) -> bytes:
    out = bytearray(4)
    for day in range(32):
        if mask >> day & 1:
            out[day >> 3] |= 0x80 >> (day & 7)
    return bytes(out[: max(d for d in range(32) if mask >> d & 1) // 8 + 1])


def active_user_ids(*, user_type: str, start: dt.date, end: dt.date) -> ndarray:
    """Query 6 of the fourth design document: ids of users active from ``start`` to ``end`` (an int64 array)."""
    return _active_user_ids(user_type=user_type, start=start, end=end)


def active_page(
    *, user_type: str, start: dt.date, end: dt.date, offset: int, limit: int
) -> tuple[int, list[int]]:
    """What ``GET logins/active/`` serves: the count of active users and one page of their ids."""
    count, page = _active_page(user_types=[user_type], start=start, end=end, offset=offset, limit=limit)
    return count, [user_id for _, user_id in page]


def active_users_by_key_scan(*, user_type: str, start: dt.date, end: dt.date) -> int:
    """The baseline: walk each month's index of per-user keys (SSCAN) and GET every key; count the active."""
    client = redis()
    wanted_days = {start + dt.timedelta(days=n) for n in range((end - start).days + 1)}
    months = sorted({stamp_month(day) for day in wanted_days})
    active: set[int] = set()
    blocks = {
        login_keys.parse_blocks_member(m.decode())
        for m in client.zrangebyscore(login_keys.login_blocks(), int(months[0]), int(months[-1]))
    }
    for month, block in sorted(blocks):
        if block.user_type != user_type:
            continue
        mask = sum(1 << (d.day - 1) for d in wanted_days if stamp_month(d) == month)
        members = [int(m) for m in client.sscan_iter(login_keys.login_index(block, month), count=10_000)]
        for offset in range(0, len(members), 10_000):
            chunk = members[offset : offset + 10_000]
            pipe = client.pipeline(transaction=False)
            for user in chunk:
                pipe.get(login_keys.login_month(user_type, user, month))
            active.update(
                u for u, bits in zip(chunk, pipe.execute(), strict=True) if month_bits_to_mask(bits) & mask
            )
    return len(active)


# --- Replays of a simulated file against a private Redis (counter_cost.py, quality_cost.py) ---------------


def redis_cpu_seconds(client) -> float:
    """The server's CPU so far (``INFO cpu``, user and system): the whole server's, so use a private one."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def parsed_events(path: Path) -> list:
    """The events of a ``manage.py simulate --to file:`` file as the consumer parses them; dead letters left out."""
    lineages = PartnerDirectory().lineages()
    now = timezone.now()
    events = []
    with path.open("rb") as lines:
        for line in lines:
            with contextlib.suppress(Rejected):
                events.append(parse_event(line.rstrip(b"\n"), lineages=lineages, now=now))
    return events
