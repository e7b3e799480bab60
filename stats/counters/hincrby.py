"""Many hash increments in one command: what keeps a batch's Redis apply one cheap round trip.

A batch touches tens of thousands of (hash, field) pairs; the 1-second and 5-second series alone give nearly
one pair per event and counter. Sent as HINCRBYs, packing and parsing them cost more than Redis spends on
them; sent as script arguments, redis-py still encodes each one in Python. So the increments travel as one
argument, a space-separated string the script walks with ``string.gmatch``: a JSON of numbers cost Redis a
strtod for each number and a printf (``%.17g``) to turn it back into text for HINCRBY: taking text cut the
series' Redis instructions by a fifth (``bench/README.md``, the Redis cost rows). They go inside the same MULTI/EXEC as the offset,
with every key declared (and sharing the partition's hash tag) so it runs on Redis Cluster too.
"""

from collections.abc import Sequence

import numpy as np
import orjson

from cpsproject.common.lua import LuaScript
from stats.pipeline.registry import CommandQueue

_HINCRBY_MANY = LuaScript(__file__, "hincrby_many.lua")


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
    hash of every batch. Integer fields are stored as their decimal digits, as HINCRBY would.
    """
    args = [
        ttl,
        index_ttl,
        renew_after,
        # Text, not JSON numbers (see the script): orjson's array with spaces for commas, 10x faster than
        # str.join over the numbers.
        orjson.dumps(
            np.ascontiguousarray(triples, dtype=np.int64).ravel(), option=orjson.OPT_SERIALIZE_NUMPY
        )[1:-1].replace(b",", b" "),
        orjson.dumps(list(members)),
    ]
    _HINCRBY_MANY.queue(pipe, keys=[*hashes, index], args=args)
