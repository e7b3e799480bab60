"""Recording logins and the weekly sync of login bitmaps to ``LoginMonth`` with safe expiry."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from django.db import connection
from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common.locks import job_lock
from cpsproject.common.lua import LuaScript
from cpsproject.common.timeutil import local_day, parse_stamp_month, stamp_day, stamp_month
from loginlog import keys
from loginlog.bitmaps import month_bits_to_mask, queue_login
from loginlog.models import LoginMonth
from loginlog.selectors import retention_cutoff
from loginlog.validation import validate_login

if TYPE_CHECKING:  # the types only: stats is imported once the apps are ready
    from stats.plugins import RedisClient

logger = logging.getLogger(__name__)

CHUNK = 1000
UNIQUE = ["user_type", "user_id", "month"]

# Delete a month key only if it still holds the bits confirmed in MySQL (a login may have raced the sync).
_DELETE_IF_UNCHANGED = LuaScript(__file__, "login_delete_if_unchanged.lua")


def login_record(*, user_type: str, user_id: int, day: dt.date | None = None) -> None:
    """Record that the user logged in on ``day`` (default today, business time)."""
    user_type, user_id = validate_login(user_type=user_type, user_id=user_id)
    # Its keys sit in two slots (the user's block and the blocks list): not a transaction, and need none (a
    # bit set twice is one bit).
    pipe = get_redis_connection("default").pipeline(transaction=False)
    queue_login(pipe, user_type=user_type, user_id=user_id, day=day or local_day(timezone.now()))
    pipe.execute()


def months_to_sync(today: dt.date) -> list[dt.date]:
    """The document's rule: from the 8th on only this month, before it this month and the last."""
    this_month = today.replace(day=1)
    if today.day >= 8:
        return [this_month]
    return [(this_month - dt.timedelta(days=1)).replace(day=1), this_month]


@dataclass
class SyncResult:
    synced_rows: int = 0
    deleted_keys: int = 0

    def summary(self) -> str:
        return f"synced {self.synced_rows} user-months; deleted {self.deleted_keys} expired login keys"


def month_blocks(client: RedisClient) -> dict[dt.date, list[keys.Block]]:
    """Every month with login keys in Redis, and the blocks that have keys in it."""
    months: dict[dt.date, list[keys.Block]] = {}
    for member in cast(list[bytes], client.zrange(keys.login_blocks(), 0, -1)):
        stamp, block = keys.parse_blocks_member(member.decode())
        months.setdefault(parse_stamp_month(stamp), []).append(block)
    return months


def _read_month(
    client: RedisClient, month: dt.date, block: keys.Block, members: list[bytes]
) -> list[tuple[str, int, bytes]]:
    stamp = stamp_month(month)
    user_ids = [int(member) for member in members]
    pipe = client.pipeline(transaction=False)
    for user_id in user_ids:
        pipe.get(keys.login_month(block.user_type, user_id, stamp))
    return [(block.user_type, u, bits or b"") for u, bits in zip(user_ids, pipe.execute(), strict=True)]


def _upsert_months(month: dt.date, bitmaps: list[tuple[str, int, bytes]]) -> int:
    rows = [
        LoginMonth(user_type=t, user_id=u, month=month, days=month_bits_to_mask(bits))
        for t, u, bits in bitmaps
        if bits
    ]
    LoginMonth.objects.bulk_create(
        rows,
        batch_size=CHUNK,
        update_conflicts=True,
        # MySQL upserts on any unique key and refuses a target list; SQLite needs one.
        unique_fields=UNIQUE if connection.features.supports_update_conflicts_with_target else None,
        update_fields=["days", "synced_at"],
    )
    return len(rows)


def _walk_month(client: RedisClient, month: dt.date, block: keys.Block) -> Iterator[list[bytes]]:
    """Yield chunks of the block's month index members (SSCAN, never KEYS)."""
    chunk = []
    for member in client.sscan_iter(keys.login_index(block, stamp_month(month)), count=CHUNK):
        chunk.append(member)
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def sync_logins(*, now: dt.datetime | None = None) -> SyncResult:
    """Upsert the user-month bitmaps of the months due, then expire months past retention (synced first).

    Each month is read block by block (``loginlog.keys``): a block's keys share one slot.
    """
    now = now or timezone.now()
    today = local_day(now)
    client = get_redis_connection("default")
    result = SyncResult()
    with job_lock("sync_logins") as lock:
        months = month_blocks(client)
        for month in months_to_sync(today):
            for block in months.get(month, []):
                for members in _walk_month(client, month, block):
                    lock.ensure_held()
                    result.synced_rows += _upsert_months(month, _read_month(client, month, block, members))
        cutoff = retention_cutoff(today)
        for month, blocks in sorted(months.items()):
            next_month = (month + dt.timedelta(days=32)).replace(day=1)
            if next_month > cutoff:
                continue  # some day of this month is still within retention
            lock.ensure_held()
            result.deleted_keys += _expire_month(client, month, blocks)
    logger.info(result.summary())
    return result


def _expire_block_month(client: RedisClient, month: dt.date, block: keys.Block) -> int:
    """Make sure every user-month of the block is in MySQL, then delete its keys, logging each first."""
    stamp = stamp_month(month)
    index = keys.login_index(block, stamp)
    deleted = 0
    for members in _walk_month(client, month, block):
        bitmaps = _read_month(client, month, block, members)
        _upsert_months(month, bitmaps)
        confirmed = dict(
            LoginMonth.objects.filter(
                month=month, user_type=block.user_type, user_id__in=[u for _, u, _ in bitmaps]
            ).values_list("user_id", "days")
        )
        # EVAL, not EVALSHA: a cluster pipeline cannot load scripts, and a promoted replica has none cached.
        pipe = client.pipeline(transaction=False)
        for user_type, user_id, bits in bitmaps:
            if bits and confirmed.get(user_id) != month_bits_to_mask(bits):
                logger.error("login %s:%s %s not confirmed in MySQL; key kept", user_type, user_id, stamp)
                continue
            key = keys.login_month(user_type, user_id, stamp)
            logger.info("expiring %s (days %s, confirmed in MySQL)", key, confirmed.get(user_id))
            _DELETE_IF_UNCHANGED.queue(pipe, keys=[key, index], args=[bits, user_id])
        deleted += sum(pipe.execute())
    return deleted


def _expire_month(client: RedisClient, month: dt.date, blocks: list[keys.Block]) -> int:
    """Expire every block's user-months of ``month``; once no block holds one, its day bitmaps and its entries
    in the blocks list go too (all blocks at once: a day is in Redis for every block or for none, which is
    how a read tells a day the sync expired)."""
    stamp = stamp_month(month)
    deleted = sum(_expire_block_month(client, month, block) for block in blocks)
    pipe = client.pipeline(transaction=False)
    for block in blocks:
        pipe.scard(keys.login_index(block, stamp))
    if any(pipe.execute()):
        return deleted
    days = []
    day = month
    while day.month == month.month:
        days.append(stamp_day(day))
        day += dt.timedelta(days=1)
    logger.info("expiring the day bitmaps of %s (%d blocks)", stamp, len(blocks))
    pipe = client.pipeline(transaction=False)
    for block in blocks:
        pipe.execute_command("DEL", *(keys.login_day(block, day_stamp) for day_stamp in days))
    deleted += sum(pipe.execute())
    client.zrem(keys.login_blocks(), *(keys.blocks_member(stamp, block) for block in blocks))
    return deleted
