"""Every Redis key of the login bitmaps (fourth design document).

User ids fall in blocks of ``BLOCK_IDS`` (65,536) per user type; each block has a hash tag of its own,
``{P:login:{type}:b{block}}`` (``P`` is ``settings.CPS_REDIS_PREFIX``), so logins spread over a cluster's slots
while every multi-key command (BITOP over days, the sync's compare-and-delete) stays in one block's slot::

    {P:login:{type}:b{block}}:{user_id}:{yyyyMM}   bitmap  bit d = the user logged in on day d (bit 0 unused)
    {P:login:{type}:b{block}}:day:{yyyyMMdd}       bitmap  bit u - block * 65536 = user u logged in that day
                                                           (at most 8 KB)
    {P:login:{type}:b{block}}:index:{yyyyMM}       set     user ids of the block with a month key
    {P:login:{type}:b{block}}:tmp:{token}[:{part}] bitmap  scratch unions of the block's days, deleted by the
                                                           read that made them (a minute's TTL at most)
    {P}:login:blocks                               zset    "{yyyyMM}:{type}:{block}" for every block with keys
                                                           in that month, score yyyyMM

A population answer combines the blocks: counts add up, ids are each block's offsets plus its base.

Up to layout version 1 every key sat on ``{P}`` (``loginlog.layout`` moves them)::

    {P}:login:{type}:{user_id}:{yyyyMM}   {P}:login:day:{type}:{yyyyMMdd}
    {P}:login:index:{yyyyMM} ("{type}:{user_id}")   {P}:login:months (zset, score yyyyMM)
"""

from typing import NamedTuple

from django.conf import settings

from cpsproject.common.redis_keys import prefix, scratch_part
from loginlog.conf import login_setting

DAY = 86400
BLOCK_BITS = 16
BLOCK_IDS = 1 << BLOCK_BITS  # user ids per block: a block's day bitmap is at most 8 KB
BLOCK_BYTES = BLOCK_IDS // 8


class Block(NamedTuple):
    """The ids ``number * BLOCK_IDS`` to ``(number + 1) * BLOCK_IDS - 1`` of one user type."""

    user_type: str
    number: int

    @property
    def base(self) -> int:
        return self.number * BLOCK_IDS


def block_of(user_type: str, user_id: int) -> Block:
    return Block(user_type, user_id >> BLOCK_BITS)


def login_ttl() -> int:
    """Safety TTL of every login key, renewed by each write: a month key is written until its month ends, kept
    for the retention after that, and must outlive several missed weekly syncs (the fourth design document's
    warning: a TTL that beats the sync loses logins)."""
    return (31 + int(login_setting("RETENTION_DAYS")) + 5 * 7) * DAY


def block_tag(block: Block) -> str:
    return "{" + f"{settings.CPS_REDIS_PREFIX}:login:{block.user_type}:b{block.number}" + "}"


def login_month(user_type: str, user_id: int, month_stamp: str) -> str:
    return f"{block_tag(block_of(user_type, user_id))}:{user_id}:{month_stamp}"


def login_day(block: Block, day_stamp: str) -> str:
    return f"{block_tag(block)}:day:{day_stamp}"


def login_index(block: Block, month_stamp: str) -> str:
    return f"{block_tag(block)}:index:{month_stamp}"


def login_scratch(block: Block, token: str, part: int | None = None) -> str:
    """A scratch key in ``block``'s slot (BITOP needs its destination beside its sources)."""
    key = f"{block_tag(block)}:tmp:{token}"
    return key if part is None else scratch_part(key, part)


def login_blocks() -> str:
    return f"{prefix()}:login:blocks"


def blocks_member(month_stamp: str, block: Block) -> str:
    return f"{month_stamp}:{block.user_type}:{block.number}"


def parse_blocks_member(member: str) -> tuple[str, Block]:
    """``"{yyyyMM}:{type}:{block}"`` -> ``(month stamp, Block)``."""
    month_stamp, user_type, number = member.split(":")
    return month_stamp, Block(user_type, int(number))


# --- Layout version 1, read only by ``loginlog.layout`` to move its keys ---------------------------------


def old_login_month(user_type: str, user_id: int, month_stamp: str) -> str:
    return f"{prefix()}:login:{user_type}:{user_id}:{month_stamp}"


def old_login_day(user_type: str, day_stamp: str) -> str:
    return f"{prefix()}:login:day:{user_type}:{day_stamp}"


def old_login_index(month_stamp: str) -> str:
    return f"{prefix()}:login:index:{month_stamp}"


def old_login_months() -> str:
    return f"{prefix()}:login:months"
