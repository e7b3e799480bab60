"""Recording logins and the weekly sync of login bitmaps to ``LoginMonth`` with safe expiry."""

import datetime as dt
import logging
from dataclasses import dataclass

from django.db import connection
from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common.locks import job_lock
from cpsproject.common.timeutil import local_day, parse_stamp_month, stamp_day, stamp_month
from loginlog import keys
from loginlog.bitmaps import month_bits_to_mask, queue_login
from loginlog.models import LoginMonth
from loginlog.selectors import retention_cutoff
from loginlog.validation import user_types, validate_login

logger = logging.getLogger(__name__)

CHUNK = 1000
UNIQUE = ["user_type", "user_id", "month"]

# Delete a month key only if it still holds the bits confirmed in MySQL (a login may have raced the sync).
_DELETE_IF_UNCHANGED = """
local now = redis.call('GET', KEYS[1])
if now and now ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[2])
return 1
"""


def login_record(*, user_type: str, user_id: int, day: dt.date | None = None) -> None:
    """Record that the user logged in on ``day`` (default today, business time)."""
    user_type, user_id = validate_login(user_type=user_type, user_id=user_id)
    pipe = get_redis_connection("default").pipeline(transaction=True)
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


def _read_month(client, month: dt.date, members: list[bytes]) -> list[tuple[str, int, bytes]]:
    stamp = stamp_month(month)
    parsed = []
    for member in members:
        user_type, user_id = member.decode().split(":")
        parsed.append((user_type, int(user_id)))
    pipe = client.pipeline(transaction=False)
    for user_type, user_id in parsed:
        pipe.get(keys.login_month(user_type, user_id, stamp))
    return [(t, u, bits or b"") for (t, u), bits in zip(parsed, pipe.execute(), strict=True)]


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


def _walk_month(client, month: dt.date):
    """Yield chunks of the month's index members (SSCAN, never KEYS)."""
    chunk = []
    for member in client.sscan_iter(keys.login_index(stamp_month(month)), count=CHUNK):
        chunk.append(member)
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def sync_logins(*, now: dt.datetime | None = None) -> SyncResult:
    """Upsert the user-month bitmaps of the months due, then expire months past retention (synced first)."""
    now = now or timezone.now()
    today = local_day(now)
    client = get_redis_connection("default")
    result = SyncResult()
    with job_lock("sync_logins") as lock:
        for month in months_to_sync(today):
            for members in _walk_month(client, month):
                lock.ensure_held()
                result.synced_rows += _upsert_months(month, _read_month(client, month, members))
        cutoff = retention_cutoff(today)
        for stamp in client.zrangebyscore(keys.login_months(), "-inf", "+inf"):
            month = parse_stamp_month(stamp.decode())
            next_month = (month + dt.timedelta(days=32)).replace(day=1)
            if next_month > cutoff:
                continue  # some day of this month is still within retention
            lock.ensure_held()
            result.deleted_keys += _expire_month(client, month)
    logger.info(result.summary())
    return result


def _expire_month(client, month: dt.date) -> int:
    """Make sure every user-month of ``month`` is in MySQL, then delete its Redis keys, logging each first."""
    stamp = stamp_month(month)
    delete = client.register_script(_DELETE_IF_UNCHANGED)
    deleted = 0
    for members in _walk_month(client, month):
        bitmaps = _read_month(client, month, members)
        _upsert_months(month, bitmaps)
        confirmed = dict(
            ((t, u), days)
            for t, u, days in LoginMonth.objects.filter(
                month=month, user_id__in=[u for _, u, _ in bitmaps]
            ).values_list("user_type", "user_id", "days")
        )
        pipe = client.pipeline(transaction=False)
        for user_type, user_id, bits in bitmaps:
            if bits and confirmed.get((user_type, user_id)) != month_bits_to_mask(bits):
                logger.error("login %s:%s %s not confirmed in MySQL; key kept", user_type, user_id, stamp)
                continue
            key = keys.login_month(user_type, user_id, stamp)
            logger.info("expiring %s (days %s, confirmed in MySQL)", key, confirmed.get((user_type, user_id)))
            delete(keys=[key, keys.login_index(stamp)], args=[bits, f"{user_type}:{user_id}"], client=pipe)
        deleted += sum(pipe.execute())
    if client.scard(keys.login_index(stamp)) == 0:
        day = month
        day_keys = []
        while day.month == month.month:
            day_keys += [keys.login_day(t, stamp_day(day)) for t in user_types()]
            day += dt.timedelta(days=1)
        logger.info("expiring the day bitmaps of %s (%d keys)", stamp, len(day_keys))
        deleted += client.delete(*day_keys)
        client.zrem(keys.login_months(), stamp)
    return deleted
