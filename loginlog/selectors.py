"""The seven login queries of the fourth design document, plus DAU/WAU/MAU.

Redis is read first; a month (per user) or a day (per population) that Redis no longer holds comes from
``LoginMonth``. Range edges are exact: every answer is masked to the days from ``start`` to ``end`` inclusive.
"""

from __future__ import annotations

import calendar
import datetime as dt
import struct
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np
from django.conf import settings
from django.db.models import F
from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common import redis_keys
from cpsproject.common.lua import LuaScript
from cpsproject.common.timeutil import local_day, months_touched, stamp_day, stamp_month
from loginlog import keys
from loginlog.bitmaps import month_bits_to_mask, set_bits, split_bitmap
from loginlog.models import LoginMonth
from loginlog.validation import user_types

if TYPE_CHECKING:  # the types only: stats is imported once the apps are ready
    from stats.plugins import CommandRecorder, RedisClient

_DAY_LENGTHS = LuaScript(__file__, "day_lengths.lua")


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
    days: list[dt.date] = []
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
# User ids fall in blocks of 65,536 per type, each under a hash tag of its own (``loginlog.keys``). Per block,
# the day bitmaps of the range are ORed into a scratch key in the block's slot (plus, for days that expired
# from Redis, the block's share of a bitmap built from ``LoginMonth``). The counts of the blocks add up to the
# answer; their ids, each block's offsets plus its base, in block order are the ascending list. A page reads
# only the blocks that hold it (at most 8 KB each), found from the blocks' counts.

_SCRATCH_MS = 60_000  # a request that dies leaves its scratch keys for a minute at most
_BITOP_FANOUT = 16  # the most sources Redis' BITOP ORs a word at a time (see _queue_union)
_EXPORT_BLOCKS = 8  # blocks read per round trip of an export: at most 524,288 ids, a 4 MB array
_RENEW_SECONDS = 10  # an export renews the expiry of the blocks it has not read yet this often


@dataclass(frozen=True)
class BlockBitmap:
    """The users of one block active over a range, as a scratch bitmap in the block's slot."""

    block: keys.Block
    key: str
    count: int


@dataclass(frozen=True)
class ActiveBitmap:
    """The users of one type active over a range: one scratch bitmap per block that has any, in block order."""

    user_type: str
    blocks: tuple[BlockBitmap, ...]

    @property
    def count(self) -> int:
        return sum(b.count for b in self.blocks)

    @property
    def keys(self) -> list[str]:
        return [b.key for b in self.blocks]


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


def _queue_union(pipe: CommandRecorder, dest: str, sources: list[tuple[int, str]]) -> None:
    """Queue BITOP ORs that leave in ``dest`` the union of ``sources`` (``(length in bytes, key)``, none empty,
    all in ``dest``'s slot).

    Redis ORs word by word only with at most ``_BITOP_FANOUT`` sources and only as far as the shortest of them;
    past either limit it goes byte by byte through every source. So the sources go in groups of sixteen,
    longest first, each group into a part key beside ``dest`` (parts from 1 on; deleted in the same round
    trip), and the groups' unions are ORed the same way until one BITOP is left.
    """
    # BITOP and a DEL of several keys through ``execute_command``: redis-py's cluster pipeline refuses the
    # methods (it cannot tell that the keys share a slot), and sends the command to the keys' slot.
    ordered = [key for _, key in sorted(sources, reverse=True)]
    parts: list[str] = []
    while len(ordered) > _BITOP_FANOUT:
        level = []
        for first in range(0, len(ordered), _BITOP_FANOUT):
            level.append(redis_keys.scratch_part(dest, len(parts) + 1))
            parts.append(level[-1])
            pipe.execute_command("BITOP", "OR", level[-1], *ordered[first : first + _BITOP_FANOUT])
        # Each group holds shorter keys than the one before it, so its union is no longer: still longest first.
        ordered = level
    if ordered:
        pipe.execute_command("BITOP", "OR", dest, *ordered)
    if parts:
        pipe.execute_command("DEL", *parts)


def _blocks_between(
    client: RedisClient, *, user_types: list[str], start: dt.date, end: dt.date
) -> dict[str, list[keys.Block]]:
    """The blocks of each type that have keys in a month from ``start`` to ``end``, in block order."""
    stamps = [int(stamp_month(month)) for month in months_touched(start, end)]
    found: dict[str, set[keys.Block]] = {t: set() for t in user_types}
    for member in cast(list[bytes], client.zrangebyscore(keys.login_blocks(), min(stamps), max(stamps))):
        _, block = keys.parse_blocks_member(member.decode())
        if block.user_type in found:
            found[block.user_type].add(block)
    return {t: sorted(blocks) for t, blocks in found.items()}


def _day_lengths(
    client: RedisClient, blocks: list[keys.Block], stamps: list[str]
) -> dict[keys.Block, tuple[int, ...]]:
    """Per block, the length in bytes of each day's bitmap (0: none), in the order of ``stamps``; one round trip,
    one script reply a block (``day_lengths.lua``)."""
    pipe = client.pipeline(transaction=False)
    for block in blocks:
        _DAY_LENGTHS.queue(pipe, [keys.login_day(block, stamp) for stamp in stamps])
    return {
        block: struct.unpack(f">{len(stamps)}I", packed)
        for block, packed in zip(blocks, pipe.execute(), strict=True)
    }


@contextmanager
def active_bitmaps(*, user_types: list[str], start: dt.date, end: dt.date) -> Iterator[list[ActiveBitmap]]:
    """OR each block's day bitmaps from ``start`` to ``end`` into a scratch key; delete them on leaving.

    Days with no bitmap in any block of a type (the weekly sync expired them) come from ``LoginMonth``. Three
    round trips to Redis, whatever the number of users.
    """
    client = get_redis_connection("default")
    days = _days(start, end)
    blocks = _blocks_between(client, user_types=user_types, start=start, end=end)
    stamps = [stamp_day(day) for day in days]
    lengths = _day_lengths(client, [block for t in user_types for block in blocks[t]], stamps)
    no_bitmaps = (0,) * len(stamps)
    token = uuid.uuid4().hex
    # The scratch key holding each block's union
    unions: dict[keys.Block, str] = {}
    pipe = client.pipeline(transaction=False)
    for user_type in user_types:
        # A day Redis has no bitmap for in any block may be one the weekly sync expired after writing it to
        # LoginMonth (it expires a month's days in every block at once): whether it did is in the data, not in
        # a cutoff from today's date. A day with no login at all costs a query that finds nothing.
        missing = [day for n, day in enumerate(days) if not any(lengths[b][n] for b in blocks[user_type])]
        from_sql = split_bitmap(_sql_bitmap(user_type=user_type, days=missing)) if missing else {}
        numbers = sorted({b.number for b in blocks[user_type]} | set(from_sql))
        for number in numbers:
            block = keys.Block(user_type, number)
            # An empty source sends BITOP byte by byte (it is the shortest): leave empty days out. A day's
            # first login landing between the round trips shows from the next answer on.
            sources = [
                (length, keys.login_day(block, s))
                for length, s in zip(lengths.get(block, no_bitmaps), stamps, strict=True)
                if length
            ]
            dest = keys.login_scratch(block, token)
            sql_part = keys.login_scratch(block, token, 0)
            if number in from_sql:
                pipe.set(sql_part, from_sql[number], px=_SCRATCH_MS)
                sources.append((len(from_sql[number]), sql_part))
            _queue_union(pipe, dest, sources)
            if number in from_sql:
                pipe.delete(sql_part)
            pipe.pexpire(dest, _SCRATCH_MS)
            unions[block] = dest
    for dest in unions.values():
        pipe.bitcount(dest)
    counts = pipe.execute()[-len(unions) :] if unions else []
    by_type: dict[str, list[BlockBitmap]] = {t: [] for t in user_types}
    for (block, dest), count in zip(unions.items(), counts, strict=True):
        if count:
            by_type[block.user_type].append(BlockBitmap(block, dest, int(count)))
    try:
        yield [ActiveBitmap(t, tuple(by_type[t])) for t in user_types]
    finally:
        if unions:
            _delete(client, list(unions.values()))


def _delete(client: RedisClient, scratch: list[str]) -> None:
    """Delete keys of many slots (a DEL of several keys must stay in one slot on a cluster)."""
    pipe = client.pipeline(transaction=False)
    for key in scratch:
        pipe.delete(key)
    pipe.execute()


def _read_blocks(client: RedisClient, blocks: list[BlockBitmap]) -> list[np.ndarray]:
    """The ids of each of ``blocks``, in one round trip."""
    pipe = client.pipeline(transaction=False)
    for block in blocks:
        pipe.get(block.key)
    return [
        set_bits(bitmap or b"", base=b.block.base) for b, bitmap in zip(blocks, pipe.execute(), strict=True)
    ]


def read_active_ids(bitmap: ActiveBitmap, *, skip: int = 0, limit: int | None = None) -> np.ndarray:
    """Return up to ``limit`` ids of ``bitmap`` in ascending order, after the first ``skip``, as int64.

    Reads only the blocks that hold the ids wanted (the blocks' counts say which), each a GET of at most 8 KB,
    all in one round trip.
    """
    if skip >= bitmap.count or limit == 0:
        return np.empty(0, dtype=np.int64)
    wanted = bitmap.count - skip if limit is None else limit
    chosen: list[BlockBitmap] = []
    covered = 0  # ids in the chosen blocks, from the first one to read
    for block in bitmap.blocks:
        if not chosen and skip >= block.count:
            skip -= block.count
            continue
        chosen.append(block)
        covered += block.count
        if covered - skip >= wanted:
            break
    ids = np.concatenate(_read_blocks(get_redis_connection("default"), chosen))
    return ids[skip : skip + wanted]


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
        unread = [block for bitmap in bitmaps for block in bitmap.blocks]
        renewed = time.monotonic()
        for bitmap in bitmaps:
            for first in range(0, len(bitmap.blocks), _EXPORT_BLOCKS):
                chunk = bitmap.blocks[first : first + _EXPORT_BLOCKS]
                del unread[: len(chunk)]
                pipe = client.pipeline(transaction=False)
                for block in chunk:
                    pipe.get(block.key)
                    pipe.pexpire(block.key, _SCRATCH_MS)  # tells whether it expired before this read
                # A slow reader (a large CSV to a slow client) would outlive the unions' expiry: extend it.
                if time.monotonic() - renewed > _RENEW_SECONDS:
                    for block in unread:
                        pipe.pexpire(block.key, _SCRATCH_MS)
                    renewed = time.monotonic()
                replies = pipe.execute()
                if not all(replies[1 : 2 * len(chunk) : 2]):
                    raise RuntimeError(
                        f"the union of active {bitmap.user_type} users expired while it was read"
                    )
                ids = np.concatenate(
                    [
                        set_bits(bits or b"", base=block.block.base)
                        for block, bits in zip(chunk, replies[0 : 2 * len(chunk) : 2], strict=True)
                    ]
                )
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
