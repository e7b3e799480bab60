"""Moving login keys of layout version 1 (every key on ``{P}``) to the blocks of ``loginlog.keys``, in place.

Bits are ORed into the new keys, never copied over them: a login the new consumer wrote meanwhile stays, and a
run interrupted and started again only sets bits already set. An old key is deleted after its bits are in
the new ones; the old month list goes last, so a run started again finds every month it had not finished.
The same commands work on a single Redis and on a cluster (each touches one slot). Run it with every consumer
of the earlier version stopped: a bit such a consumer sets in an old key after it was read is lost.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from typing import TYPE_CHECKING, cast

from cpsproject.common.timeutil import parse_stamp_month, stamp_day
from loginlog import keys
from loginlog.bitmaps import month_bits_to_mask, split_bitmap
from loginlog.validation import user_types

if TYPE_CHECKING:  # the types only: stats is imported once the apps are ready
    from stats.plugins import RedisClient

logger = logging.getLogger(__name__)

CHUNK = 1000


def upgrade_login_layout(client: RedisClient) -> int:
    """Move every login key of layout version 1 to its block; return how many old keys were moved."""
    moved = 0
    for stamp in cast(list[bytes], client.zrange(keys.old_login_months(), 0, -1)):
        moved += _move_month(client, stamp.decode())
    moved += client.delete(keys.old_login_months())
    if moved:
        logger.info("moved %d login keys to the block layout", moved)
    return moved


def _move_month(client: RedisClient, stamp: str) -> int:
    """Move the user-months, the day bitmaps and the index of one month."""
    ttl = keys.login_ttl()
    moved = 0
    chunk: list[bytes] = []
    index = keys.old_login_index(stamp)
    types = set(user_types())
    for member in client.sscan_iter(index, count=CHUNK):
        chunk.append(member)
        if len(chunk) >= CHUNK:
            moved += _move_users(client, stamp, chunk, ttl, types)
            chunk = []
    if chunk:
        moved += _move_users(client, stamp, chunk, ttl, types)
    month = parse_stamp_month(stamp)
    day = month
    while day.month == month.month:
        for user_type in sorted(types):
            moved += _move_day(client, user_type, stamp, stamp_day(day), ttl)
        day += dt.timedelta(days=1)
    return moved + client.delete(index)


def _move_users(client: RedisClient, stamp: str, members: list[bytes], ttl: int, types: set[str]) -> int:
    users = []
    for member in members:
        user_type, user_id = member.decode().split(":")
        users.append((user_type, int(user_id)))
        types.add(user_type)
    return _move_user_months(client, stamp, users, ttl)


def _move_user_months(client: RedisClient, stamp: str, users: list[tuple[str, int]], ttl: int) -> int:
    pipe = client.pipeline(transaction=False)
    for user_type, user_id in users:
        pipe.get(keys.old_login_month(user_type, user_id, stamp))
    bitmaps = pipe.execute()
    pipe = client.pipeline(transaction=False)
    blocks: dict[str, int] = {}
    for (user_type, user_id), bits in zip(users, bitmaps, strict=True):
        mask = month_bits_to_mask(bits)
        if not mask:
            continue
        block = keys.block_of(user_type, user_id)
        new = keys.login_month(user_type, user_id, stamp)
        for day in range(1, 32):
            if mask >> (day - 1) & 1:
                pipe.setbit(new, day, 1)
        pipe.expire(new, ttl)
        pipe.sadd(keys.login_index(block, stamp), user_id)
        pipe.expire(keys.login_index(block, stamp), ttl)
        blocks[keys.blocks_member(stamp, block)] = int(stamp)
    if blocks:
        pipe.zadd(keys.login_blocks(), blocks)
        pipe.expire(keys.login_blocks(), ttl)
    if len(pipe):
        pipe.execute()
    # Only once the bits are in the new keys.
    pipe = client.pipeline(transaction=False)
    for user_type, user_id in users:
        pipe.delete(keys.old_login_month(user_type, user_id, stamp))
    return sum(pipe.execute())


def _move_day(client: RedisClient, user_type: str, month_stamp: str, day_stamp: str, ttl: int) -> int:
    """OR each block's byte range of an old day bitmap into the block's day bitmap (a scratch key in the
    block's slot carries the bytes to BITOP)."""
    old = keys.old_login_day(user_type, day_stamp)
    bitmap = cast(bytes | None, client.get(old))
    if bitmap is None:
        return 0
    token = uuid.uuid4().hex
    pipe = client.pipeline(transaction=False)
    blocks: dict[str, int] = {}
    for number, chunk in split_bitmap(bitmap).items():
        block = keys.Block(user_type, number)
        scratch, new = keys.login_scratch(block, token), keys.login_day(block, day_stamp)
        pipe.set(scratch, chunk, px=60_000)
        pipe.execute_command("BITOP", "OR", new, new, scratch)
        pipe.delete(scratch)
        pipe.expire(new, ttl)
        blocks[keys.blocks_member(month_stamp, block)] = int(month_stamp)
    if blocks:
        pipe.zadd(keys.login_blocks(), blocks)
        pipe.expire(keys.login_blocks(), ttl)
        pipe.execute()
    return client.delete(old)
