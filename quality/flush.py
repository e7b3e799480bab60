"""Flush each partner-day's signals from Redis into ``QualityDay`` rows, idempotently.

1. walk the index (SSCAN) and group its members by partner-day: the partitions that hold a share of it;
2. read every share (the signals hash, the address sorted set) and add them up: Redis holds each day's running
   totals, so a row is written with absolute values and a flush run twice writes the same row; add each
   partner's orders paid that day from ``conversions.public`` (click to order);
3. in one transaction, upsert the rows of the days not reconciled yet (a reconciled day is final) and judge
   their rules (``rules.judge_days``);
4. after the commit, delete the keys of reconciled days (the recount replaced them), index member first.

The ``quality flush`` job lock keeps two flushes, and a flush and the recount, from writing at once.
"""

import bisect
import datetime as dt
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone
from django_redis import get_redis_connection
from redis.client import Redis
from redis.cluster import RedisCluster

from conversions.public import PaidOrder, orders_paid_on
from cpsproject.common.locks import job_lock
from cpsproject.common.timeutil import parse_stamp_day
from cpsproject.common.upsert import upsert_rows
from partners.models import Partner
from quality import keys
from quality.conf import quality_setting
from quality.models import ORDER_SECONDS_BINS, QualityDay
from quality.rules import judge_days
from quality.signals import network_of
from quality.tally import DayTally

LOCK = "quality flush"
# One Redis, or a Redis Cluster (REDIS_CLUSTER=1).
RedisClient = Redis | RedisCluster


@dataclass
class QualityFlushResult:
    days: int = 0
    findings: int = 0
    deleted_days: int = 0

    def summary(self) -> str:
        return (
            f"flushed traffic quality of {self.days} partner-days ({self.findings} rules broken); "
            f"deleted the keys of {self.deleted_days} reconciled partner-days"
        )


def _index(client: RedisClient) -> dict[tuple[str, str], list[str]]:
    """Return (day stamp, code) -> the tags of the partitions holding a share of that partner-day."""
    shares: dict[tuple[str, str], list[str]] = defaultdict(list)
    for member in client.sscan_iter(keys.index(), count=1000):
        day, tag, code = keys.parse_index_member(member.decode() if isinstance(member, bytes) else member)
        shares[(day, code)].append(tag)
    return shares


def read_day(client: RedisClient, day: str, code: str, tags: list[str]) -> DayTally:
    """Add up every partition's share of one partner-day (repeats come counted)."""
    pipe = client.pipeline(transaction=False)
    for tag in tags:
        pipe.hgetall(keys.signals(tag, code, day))
        pipe.hgetall(keys.addresses(tag, code, day))
        pipe.zrange(keys.addresses_sorted(tag, code, day), 0, -1, withscores=True)
    replies = pipe.execute()
    tally = DayTally()
    for counts, hashed, ranked in zip(replies[::3], replies[1::3], replies[2::3], strict=True):
        numbers = {k.decode(): int(v) for k, v in counts.items()}
        tally.pv += numbers.get("pv", 0)
        tally.automated += numbers.get("automated", 0)
        tally.listed += numbers.get("listed", 0)
        tally.repeats += numbers.get("repeats", 0)
        for quarter in range(96):
            tally.quarters[quarter] += numbers.get(keys.quarter_field(quarter), 0)
        for address, views in [*hashed.items(), *ranked]:
            tally.addresses[address.decode()] += int(views)
    return tally


def day_row(tally: DayTally, *, repeats: int) -> dict:
    """The ``QualityDay`` fields of a partner-day's tally."""
    top = sorted(tally.addresses.items(), key=lambda item: (-item[1], item[0]))[
        : quality_setting("TOP_ADDRESSES")
    ]
    return {
        "pv": tally.pv,
        "automated_pv": tally.automated,
        "repeat_pv": repeats,
        "addressed_pv": sum(tally.addresses.values()),
        "distinct_ips": len(tally.addresses),
        "distinct_networks": len(Counter(network_of(address) for address in tally.addresses)),
        "top_addresses": [[address, views] for address, views in top],
        "top_addresses_pv": sum(views for _, views in top),
        "listed_pv": tally.listed,
        "quarters": [tally.quarters.get(quarter, 0) for quarter in range(96)],
    }


def order_fields(orders: list[PaidOrder]) -> dict:
    """The ``QualityDay`` order fields of one partner's orders paid that day."""
    seconds = sorted(o.seconds_to_order for o in orders if o.seconds_to_order is not None)
    histogram = [0] * (len(ORDER_SECONDS_BINS) + 1)
    for value in seconds:
        histogram[bisect.bisect_right(ORDER_SECONDS_BINS, value)] += 1
    return {
        "orders": len(orders),
        "orders_by_view": sum(1 for o in orders if o.by_view),
        "order_seconds": histogram,
        "median_seconds_to_order": statistics.median(seconds) if seconds else None,
    }


def with_orders(rows: list[dict], dates: set[dt.date], *, skip: set[tuple[int, dt.date]]) -> list[dict]:
    """Return ``rows`` with each partner-day's order fields, and rows of order fields alone for the partners
    that sold on those ``dates`` with no views there; partner-days in ``skip`` (reconciled) are left out."""
    by_key = {(row["partner_id"], row["date"]): row for row in rows}
    paid = orders_paid_on(sorted(dates))
    codes = {order.partner for orders in paid.values() for order in orders}
    ids = dict(Partner.objects.filter(code__in=codes).values_list("code", "id"))
    for date, orders in paid.items():
        by_partner: dict[int, list[PaidOrder]] = {}
        for order in orders:
            by_partner.setdefault(ids[order.partner], []).append(order)
        for partner_id, own in by_partner.items():
            if (partner_id, date) not in skip:
                by_key.setdefault((partner_id, date), {"partner_id": partner_id, "date": date})
                by_key[(partner_id, date)].update(order_fields(own))
    empty = order_fields([])
    for row in by_key.values():
        if "orders" not in row:
            row.update(empty)  # its orders may have been refunded away: nothing sold that day
    return list(by_key.values())


def written_days(rows: list[dict]) -> list[QualityDay]:
    """Return the ``QualityDay`` rows of ``rows`` (partner_id, date) as stored."""
    wanted = {(row["partner_id"], row["date"]) for row in rows}
    stored = QualityDay.objects.filter(
        partner_id__in={pid for pid, _ in wanted}, date__in={date for _, date in wanted}
    )
    return [day for day in stored if (day.partner_id, day.date) in wanted]


def _delete_days(
    client: RedisClient, shares: dict[tuple[str, str], list[str]], done: list[tuple[str, str]]
) -> None:
    if not done:
        return
    # The index members first, in a round trip of their own (a cluster pipeline sends each node its commands
    # in parallel): a key left without its member would never be flushed nor deleted.
    unlisted = client.pipeline(transaction=False)
    for day, code in done:
        for tag in shares[(day, code)]:
            unlisted.srem(keys.index(), keys.index_member(day, tag, code))
    unlisted.execute()
    deleted = client.pipeline(transaction=False)
    for day, code in done:
        for tag in shares[(day, code)]:
            # One key a DELETE: redis-py's cluster pipeline refuses a multi-key one.
            deleted.delete(keys.signals(tag, code, day))
            deleted.delete(keys.addresses(tag, code, day))
            deleted.delete(keys.addresses_sorted(tag, code, day))
            deleted.delete(keys.last_views(tag, code, day))
    deleted.execute()


def flush_quality(*, now: dt.datetime | None = None) -> QualityFlushResult:
    """Write every partner-day's signals Redis holds to ``QualityDay`` (see the module's steps)."""
    now = now or timezone.now()
    client = get_redis_connection("default")
    result = QualityFlushResult()
    with job_lock(LOCK) as lock:
        shares = _index(client)  # step 1
        ids = dict(Partner.objects.filter(code__in={code for _, code in shares}).values_list("code", "id"))
        reconciled = set(
            QualityDay.objects.filter(
                reconciled_at__isnull=False, date__in={parse_stamp_day(d) for d, _ in shares}
            ).values_list("partner_id", "date")
        )
        rows, done = [], []
        for (day, code), tags in sorted(shares.items()):
            partner_id, date = ids.get(code), parse_stamp_day(day)
            if partner_id is None or (partner_id, date) in reconciled:
                done.append((day, code))
                continue
            tally = read_day(client, day, code, tags)  # step 2
            rows.append({"partner_id": partner_id, "date": date, **day_row(tally, repeats=tally.repeats)})
        rows = with_orders(rows, {parse_stamp_day(d) for d, _ in shares}, skip=reconciled)
        lock.ensure_held()
        with transaction.atomic():  # step 3
            upsert_rows(QualityDay, rows, key_fields=["partner_id", "date"])
            result.findings = judge_days(written_days(rows))
        lock.ensure_held()
        _delete_days(client, shares, done)  # step 4
    result.days, result.deleted_days = len(rows), len(done)
    return result
