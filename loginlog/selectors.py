"""The seven login queries of the fourth design document, plus DAU/WAU/MAU.

Redis is read first; a month (per user) or a day (per population) that Redis no longer holds comes from
``LoginMonth``. Range edges are exact: every answer is masked to the days from ``start`` to ``end`` inclusive.
"""

import calendar
import datetime as dt
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db.models import F
from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common import redis_keys
from cpsproject.common.timeutil import local_day, months_touched, stamp_day, stamp_month
from loginlog import keys
from loginlog.bitmaps import month_bits_to_mask, set_bits
from loginlog.models import LoginMonth
from loginlog.validation import user_types


def _range_mask(month: dt.date, start: dt.date, end: dt.date) -> int:
    """Bits (d-1) for the days of ``month`` that fall within [start, end]."""
    last = calendar.monthrange(month.year, month.month)[1]
    first_day = start.day if (start.year, start.month) == (month.year, month.month) else 1
    last_day = end.day if (end.year, end.month) == (month.year, month.month) else last
    return sum(1 << (d - 1) for d in range(first_day, last_day + 1))


def login_days(*, user_type: str, user_id: int, start: dt.date, end: dt.date) -> list[dt.date]:
    """Query 5: the days from ``start`` to ``end`` the user logged in."""
    months = months_touched(start, end)
    client = get_redis_connection("default")
    pipe = client.pipeline(transaction=False)
    for month in months:
        pipe.get(keys.login_month(user_type, user_id, stamp_month(month)))
    masks = {
        month: month_bits_to_mask(bitmap)
        for month, bitmap in zip(months, pipe.execute(), strict=True)
        if bitmap
    }
    missing = [m for m in months if m not in masks]
    if missing:
        rows = LoginMonth.objects.filter(user_type=user_type, user_id=user_id, month__in=missing)
        masks.update(dict(rows.values_list("month", "days")))
    days = []
    for month in months:
        mask = masks.get(month, 0) & _range_mask(month, start, end)
        days.extend(month.replace(day=d) for d in range(1, 32) if mask >> (d - 1) & 1)
    return days


def logged_in_between(*, user_type: str, user_id: int, start: dt.date, end: dt.date) -> bool:
    """Query 4: did the user log in at all from ``start`` to ``end``."""
    return bool(login_days(user_type=user_type, user_id=user_id, start=start, end=end))


def logged_in_on(*, user_type: str, user_id: int, day: dt.date) -> bool:
    """Query 2: did the user log in on ``day``."""
    return logged_in_between(user_type=user_type, user_id=user_id, start=day, end=day)


def logged_in_in_month(*, user_type: str, user_id: int, year: int, month: int) -> bool:
    """Query 3: did the user log in during the month."""
    first = dt.date(year, month, 1)
    last = first.replace(day=calendar.monthrange(year, month)[1])
    return logged_in_between(user_type=user_type, user_id=user_id, start=first, end=last)


def retention_cutoff(today: dt.date | None = None) -> dt.date:
    """The oldest day whose login keys the weekly sync keeps in Redis."""
    days = max(31, int(settings.CPS_LOGINS["RETENTION_DAYS"]))
    return (today or local_day(timezone.now())) - dt.timedelta(days=days)


# --- Active users -------------------------------------------------------------------------------------
#
# Per type, the day bitmaps of the range are ORed into a scratch key (plus, for days that expired from Redis,
# a bitmap built from ``LoginMonth``). BITCOUNT gives the exact count; a page is read from the scratch key by
# finding the byte that holds its first id with BITCOUNTs over narrowing ranges, then GETRANGE from there.
# A page holds no more than one read chunk and the page, whatever the number of active users; the whole
# list (query 6) is one GET decoded into an int64 array.

_SCRATCH_MS = 60_000  # a request that dies leaves its scratch keys for a minute at most
_BITOP_FANOUT = 16  # the most sources Redis' BITOP ORs a word at a time (see _queue_union)
_SEEK_FANOUT = 64  # BITCOUNT ranges per round trip while seeking
_SEEK_BYTES = 4096  # seeking stops at a range this small; the first read covers it
_READ_BYTES = (4096, 1024 * 1024)  # first and largest GETRANGE while reading a page (1 MB: 8 M ids)
_EXPORT_BYTES = 64 * 1024  # one GETRANGE of an export: at most 524,288 ids, a 4 MB array


@dataclass(frozen=True)
class ActiveBitmap:
    """The users of one type active over a range, as a scratch bitmap in Redis."""

    user_type: str
    key: str
    length: int  # bytes
    count: int


def _days(start: dt.date, end: dt.date) -> list[dt.date]:
    return [start + dt.timedelta(days=n) for n in range((end - start).days + 1)]


def _sql_bitmap(*, user_type: str, days: list[dt.date]) -> bytes:
    """The users of ``user_type`` who logged in on any of ``days`` according to ``LoginMonth``, as a bitmap."""
    masks: dict[dt.date, int] = {}
    for day in days:
        month = day.replace(day=1)
        masks[month] = masks.get(month, 0) | 1 << (day.day - 1)
    bitmap = bytearray()
    for month, mask in masks.items():
        rows = LoginMonth.objects.filter(user_type=user_type, month=month).annotate(
            hit=F("days").bitand(mask)
        )
        for user_id in rows.filter(hit__gt=0).values_list("user_id", flat=True).iterator(chunk_size=10_000):
            byte = user_id >> 3
            if byte >= len(bitmap):
                bitmap.extend(bytes(byte + 1 - len(bitmap)))
            bitmap[byte] |= 0x80 >> (user_id & 7)
    return bytes(bitmap)


def _queue_union(pipe, dest: str, sources: list[tuple[int, str]]) -> None:
    """Queue BITOP ORs that leave in ``dest`` the union of ``sources`` (``(length in bytes, key)``, none empty).

    Redis ORs word by word only with at most ``_BITOP_FANOUT`` sources and only as far as the shortest of them;
    past either limit it goes byte by byte through every source (thirty 1.25 MB days: 70-130 ms in one BITOP,
    3 ms per sixteen). So the sources go in groups of sixteen, longest first, each group into a part key beside
    ``dest`` (parts from 1 on; deleted in the same transaction), and the groups' unions are ORed the same way
    until one BITOP is left.
    """
    ordered = [key for _, key in sorted(sources, reverse=True)]
    parts: list[str] = []
    while len(ordered) > _BITOP_FANOUT:
        level = []
        for first in range(0, len(ordered), _BITOP_FANOUT):
            level.append(redis_keys.scratch_part(dest, len(parts) + 1))
            parts.append(level[-1])
            pipe.bitop("OR", level[-1], *ordered[first : first + _BITOP_FANOUT])
        # Each group holds shorter keys than the one before it, so its union is no longer: still longest first.
        ordered = level
    if ordered:
        pipe.bitop("OR", dest, *ordered)
    if parts:
        pipe.delete(*parts)


@contextmanager
def active_bitmaps(*, user_types: list[str], start: dt.date, end: dt.date) -> Iterator[list[ActiveBitmap]]:
    """OR each type's day bitmaps from ``start`` to ``end`` into a scratch key; delete them on leaving.

    Days with no bitmap in Redis (the weekly sync expired them) come from ``LoginMonth``. Two round trips to
    Redis, whatever the number of users.
    """
    client = get_redis_connection("default")
    days = _days(start, end)
    day_keys = {t: [keys.login_day(t, stamp_day(d)) for d in days] for t in user_types}
    pipe = client.pipeline(transaction=False)
    for user_type in user_types:
        for key in day_keys[user_type]:
            pipe.strlen(key)
    lengths = iter(pipe.execute())
    token = uuid.uuid4().hex
    scratch = {t: redis_keys.scratch_part(redis_keys.scratch(token), n) for n, t in enumerate(user_types)}
    pipe = client.pipeline(transaction=True)
    replies_at: dict[str, int] = {}
    for user_type in user_types:
        sources, missing = [], []
        for day, key in zip(days, day_keys[user_type], strict=True):
            length = next(lengths)
            # An empty source sends BITOP byte by byte (it is the shortest): leave empty days out. A day's
            # first login landing between the two round trips shows from the next answer on.
            if length:
                sources.append((length, key))
            else:
                missing.append(day)
        # A day Redis has no bitmap for may be one the weekly sync expired after writing it to LoginMonth:
        # whether it did is in the data, not in a cutoff from today's date (which, read at another moment than
        # the sync's, left expired days out). A day with no login at all costs a query that finds nothing.
        from_sql = _sql_bitmap(user_type=user_type, days=missing) if missing else b""
        if from_sql:
            sources.append((len(from_sql), redis_keys.scratch_part(scratch[user_type], 0)))
            pipe.set(sources[-1][1], from_sql, px=_SCRATCH_MS)
        _queue_union(pipe, scratch[user_type], sources)
        if from_sql:
            pipe.delete(redis_keys.scratch_part(scratch[user_type], 0))
        pipe.pexpire(scratch[user_type], _SCRATCH_MS)
        replies_at[user_type] = len(pipe)
        pipe.strlen(scratch[user_type])
        pipe.bitcount(scratch[user_type])
    replies = pipe.execute()
    bitmaps = [
        ActiveBitmap(t, scratch[t], int(replies[replies_at[t]]), int(replies[replies_at[t] + 1]))
        for t in user_types
    ]
    try:
        yield bitmaps
    finally:
        client.delete(*scratch.values())


def _seek(client, bitmap: ActiveBitmap, skip: int) -> tuple[int, int]:
    """Return ``(byte, left)``: reading from ``byte`` and skipping ``left`` ids passes the first ``skip`` ids.

    Narrows the byte range holding id number ``skip`` with BITCOUNTs, ``_SEEK_FANOUT`` ranges per round trip,
    until it is at most ``_SEEK_BYTES`` long.
    """
    low, high = 0, bitmap.length
    while high - low > _SEEK_BYTES:
        step = -(-(high - low) // _SEEK_FANOUT)
        starts = range(low, high, step)
        pipe = client.pipeline(transaction=False)
        for first in starts:
            pipe.bitcount(bitmap.key, first, min(first + step, high) - 1)
        for first, count in zip(starts, pipe.execute(), strict=True):
            if skip < count:
                low, high = first, min(first + step, high)
                break
            skip -= count
        else:
            return bitmap.length, 0
    return low, skip


def read_active_ids(bitmap: ActiveBitmap, *, skip: int = 0, limit: int | None = None) -> np.ndarray:
    """Return up to ``limit`` ids of ``bitmap`` in ascending order, after the first ``skip``, as int64.

    The whole bitmap (no ``skip``, no ``limit``) is one GET: at most ``MAX_USER_ID / 8`` bytes (2 MB). A page
    reads from the byte that holds its first id, in chunks that double from 4 KB to 1 MB (a sparse bitmap
    needs more bytes per id), jumping over runs of zero bytes with BITPOS.
    """
    client = get_redis_connection("default")
    if skip >= bitmap.count or limit == 0:
        return np.empty(0, dtype=np.int64)
    if not skip and limit is None:
        return set_bits(client.get(bitmap.key) or b"")
    byte, skip = _seek(client, bitmap, skip)
    size, chunks, wanted = _READ_BYTES[0], [], bitmap.count if limit is None else limit
    while byte < bitmap.length and wanted:
        found = set_bits(client.getrange(bitmap.key, byte, byte + size - 1), base=byte * 8)
        if skip:
            dropped = min(skip, len(found))
            found, skip = found[dropped:], skip - dropped
        chunks.append(found[:wanted])
        wanted -= len(chunks[-1])
        byte, size = byte + size, min(2 * size, _READ_BYTES[1])
        if wanted and byte < bitmap.length:
            position = client.bitpos(bitmap.key, 1, byte)
            if position < 0:
                break
            byte = position // 8
    return np.concatenate(chunks) if chunks else np.empty(0, dtype=np.int64)


def active_page(
    *, user_types: list[str], start: dt.date, end: dt.date, offset: int, limit: int
) -> tuple[int, list[tuple[str, int]]]:
    """Return how many users were active, and ``limit`` of them from ``offset`` as ``(type, id)``.

    Users are ordered by type (in the order given), then id; a page may run from one type into the next.
    """
    page: list[tuple[str, int]] = []
    with active_bitmaps(user_types=user_types, start=start, end=end) as bitmaps:
        for bitmap in bitmaps:
            if offset >= bitmap.count or len(page) == limit:
                offset = max(0, offset - bitmap.count)
                continue
            ids = read_active_ids(bitmap, skip=offset, limit=limit - len(page))
            page.extend((bitmap.user_type, user_id) for user_id in ids.tolist())
            offset = 0
        return sum(b.count for b in bitmaps), page


def every_active_user(
    *, user_types: list[str], start: dt.date, end: dt.date
) -> Iterator[tuple[str, np.ndarray]]:
    """Every user active from ``start`` to ``end`` as ``(user type, ascending int64 ids)`` chunks.

    One union, taken when the iteration starts, is read front to back: a login landing meanwhile shows in the
    next export instead of shifting the rest of this one (paging it by offset repeated a user at
    each chunk boundary, and ORed the days again per chunk). Closing the iterator early deletes the union.
    """
    client = get_redis_connection("default")
    with active_bitmaps(user_types=user_types, start=start, end=end) as bitmaps:
        for bitmap in bitmaps:
            for byte in range(0, bitmap.length, _EXPORT_BYTES):
                pipe = client.pipeline(transaction=False)
                pipe.getrange(bitmap.key, byte, byte + _EXPORT_BYTES - 1)
                # A slow reader (a large CSV to a slow client) would outlive the union's expiry: extend it.
                pipe.pexpire(bitmap.key, _SCRATCH_MS)
                chunk, alive = pipe.execute()
                if not alive:
                    raise RuntimeError(
                        f"the union of active {bitmap.user_type} users expired while it was read"
                    )
                ids = set_bits(chunk, base=byte * 8)
                if len(ids):
                    yield bitmap.user_type, ids


def active_user_ids(*, user_type: str, start: dt.date, end: dt.date) -> np.ndarray:
    """Query 6: the ids of users of ``user_type`` who logged in from ``start`` to ``end``, ascending, as int64.

    The union of the day bitmaps Redis holds; days whose bitmap has expired come from ``LoginMonth``. An array,
    not a list: a million Python ints cost more than the whole query (8 MB here, 28 MB as ints). Lists every
    id: the API pages with ``active_page`` instead.
    """
    with active_bitmaps(user_types=[user_type], start=start, end=end) as (bitmap,):
        return read_active_ids(bitmap)


def active_user_count(*, user_type: str, start: dt.date, end: dt.date) -> int:
    """How many users of ``user_type`` logged in from ``start`` to ``end``, without listing them."""
    with active_bitmaps(user_types=[user_type], start=start, end=end) as (bitmap,):
        return bitmap.count


def active_users(*, start: dt.date, end: dt.date) -> list[tuple[str, int]]:
    """Query 7: every user of every type who logged in from ``start`` to ``end``."""
    with active_bitmaps(user_types=user_types(), start=start, end=end) as bitmaps:
        return [(b.user_type, user_id) for b in bitmaps for user_id in read_active_ids(b).tolist()]


def active_counts(*, user_type: str, day: dt.date) -> dict[str, int]:
    """DAU, WAU and MAU of ``user_type`` for the day, week and 30 days ending on ``day``."""
    return {
        name: active_user_count(user_type=user_type, start=day - dt.timedelta(days=span - 1), end=day)
        for name, span in (("dau", 1), ("wau", 7), ("mau", 30))
    }
