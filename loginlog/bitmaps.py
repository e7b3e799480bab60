"""Login bitmaps in Redis (fourth design document), plus the bit arithmetic shared by reads and the sync.

Per user and month one bitmap with bit ``d`` for day ``d`` (as the document designs); per type and day one
bitmap with bit ``u`` for user ``u``, so population questions are a BITOP over days, never a key scan; per month
an index set of the user-month keys, which replaces the document's ``KEYS loginLog_*``.
"""

import datetime as dt
from collections.abc import Iterable

import numpy as np

from cpsproject.common.timeutil import local_day, stamp_day, stamp_month
from loginlog import keys
from loginlog.events import Login


def month_bits_to_mask(bitmap: bytes | None) -> int:
    """Redis month bitmap (bit d = day d, most significant bit first) -> mask with bit d-1 for day d."""
    if not bitmap:
        return 0
    mask = 0
    for day in range(1, 32):
        byte = day // 8
        if byte < len(bitmap) and bitmap[byte] & (0x80 >> (day % 8)):
            mask |= 1 << (day - 1)
    return mask


def set_bits(bitmap: bytes, *, base: int = 0) -> np.ndarray:
    """Return ``base`` + the offsets of the set bits of a Redis bitmap, ascending, as an int64 array.

    numpy unpacks the bytes most significant bit first, which is Redis' bit order. The unpacked 0/1 bytes are
    searched as booleans: ``flatnonzero`` on bool is twice as fast as on uint8 (10 M bits: 17 ms, not 35).
    """
    offsets = np.flatnonzero(np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8)).view(np.bool_))
    return offsets + base if base else offsets


def queue_logins(pipe, logins: Iterable[Login], *, now: dt.datetime) -> None:
    """Queue the bits of a batch's logins; a user logging in twice a day is one bit."""
    seen = {(login.user_type, login.user_id, local_day(login.ts)) for login in logins}
    for user_type, user_id, day in seen:
        queue_login(pipe, user_type=user_type, user_id=user_id, day=day)


def queue_login(pipe, *, user_type: str, user_id: int, day: dt.date) -> None:
    month = stamp_month(day)
    ttl = keys.login_ttl()
    written = [keys.login_month(user_type, user_id, month), keys.login_day(user_type, stamp_day(day))]
    pipe.setbit(written[0], day.day, 1)
    pipe.setbit(written[1], user_id, 1)
    pipe.sadd(keys.login_index(month), f"{user_type}:{user_id}")
    pipe.zadd(keys.login_months(), {month: int(month)})
    for key in (*written, keys.login_index(month), keys.login_months()):
        pipe.expire(key, ttl)
