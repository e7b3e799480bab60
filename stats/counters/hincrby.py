"""Many hash increments in one command: what keeps a batch's Redis apply one cheap round trip.

A batch touches tens of thousands of (hash, field) pairs; the 1-second and 5-second series alone give nearly
one pair per event and counter. Sent as HINCRBYs, packing and parsing them cost more than Redis spends on
them; sent as script arguments, redis-py still encodes each one in Python. So the increments travel as two
arguments built by numpy: each increment's hash number and amount as bytes, and the fields' digits at one
width, which the script reads with ``struct.unpack`` and ``string.sub``. A JSON of numbers cost Redis a strtod
for each number and a printf (``%.17g``) to turn it back into text for HINCRBY, and a space-separated text
walked with ``string.gmatch`` a pattern match per increment: the series' Redis instructions went 11,969 →
9,190 → 7,921 an event (``bench/redis_cost.md``). They go inside the same MULTI/EXEC as the
offset, with every key declared (and sharing the partition's hash tag) so it runs on Redis Cluster too.
"""

from collections.abc import Sequence

import numpy as np
import orjson

from cpsproject.common.lua import TO_HASHTABLE, LuaScript
from stats.pipeline.registry import CommandQueue

_HINCRBY_MANY = LuaScript(__file__, "hincrby_many.lua", include=[TO_HASHTABLE])
# 10, 100, ..., 10**18: a field's digit count is where it falls among them, plus one.
_POWERS_OF_TEN = 10 ** np.arange(1, 19, dtype=np.int64)


def queue_hincrby_many(
    pipe: CommandQueue,
    hashes: Sequence[str],
    triples: np.ndarray,
    *,
    ttl: int,
    index: str,
    members: Sequence[str],
    index_ttl: int,
    renew_after: int,
) -> None:
    """Queue ``HINCRBY hashes[k - 1] field amount`` for each row ``(k, field, amount)`` of ``triples``.

    Amounts are positive. A hash the increments create gets the safety TTL ``ttl``, far beyond the job
    that consumes it, and its entry ``members[k - 1]`` (score 0) in the sorted set ``index``, where the cleaner
    finds it. Both are renewed when an increment creates a field in a hash whose TTL has run down by more than
    ``renew_after`` seconds: the series' fields are samples, so a hash that is written to gains one every
    precision, and so keeps at least ``ttl - renew_after`` seconds to live. Renewing them for every hash on
    every call was most of Redis' work for the series (per partition and batch, two calls for each of ~1,000
    counters at each of 7 precisions); renewing them on every new field was still two writes for nearly every
    hash of every batch. A hash a call grows past ``HASHTABLE_PAST_FIELDS`` fields is made a hashtable
    (``cpsproject.common.lua``). Integer fields are stored as their decimal digits, as HINCRBY would.
    """
    triples = np.asarray(triples, dtype=np.int64)
    if len(triples) and (triples[:, 2].max() >= 2**32 or triples[:, 1].min() < 0):
        raise ValueError("hincrby_many takes amounts below 2**32 and non-negative fields")
    member_list = orjson.dumps(list(members))
    # Fields of one width per call: a batch's samples are epochs of one digit count, but nothing forbids others.
    widths = np.searchsorted(_POWERS_OF_TEN, triples[:, 1], side="right") + 1
    for width in np.unique(widths):
        rows = triples[widths == width]
        digits = rows[:, 1:2] // 10 ** np.arange(width - 1, -1, -1, dtype=np.int64) % 10 + ord("0")
        args = [
            ttl,
            index_ttl,
            renew_after,
            int(width),
            rows[:, [0, 2]].astype(">u4").tobytes(),
            digits.astype(np.uint8).tobytes(),
            member_list,
        ]
        _HINCRBY_MANY.queue(pipe, keys=[*hashes, index], args=args)
