"""Many hash increments in one command: what keeps a batch's Redis apply one cheap round trip.

A batch touches tens of thousands of (hash, field) pairs; the 1-second and 5-second series alone give nearly
one pair per event and counter. Sent as HINCRBYs, packing and parsing them cost more than Redis spends on
them; sent as script arguments, redis-py still encodes each one in Python. So the increments travel as one
JSON argument (``orjson`` writes it in C, numpy arrays included; the script reads it with Redis' built-in
``cjson``), inside the same MULTI/EXEC as the offset, with every key declared (and sharing the prefix's hash
tag) so it runs on Redis Cluster too.
"""

from collections.abc import Sequence

import numpy as np
import orjson

# KEYS: the hashes, then an index of them. ARGV: JSON [ttl per hash], JSON [hash number, field, amount, ...]
# (flat triples), JSON [the index member of each hash], the index's TTL.
_HINCRBY_MANY = """
local index = KEYS[#KEYS]
local ttls, triples, members = cjson.decode(ARGV[1]), cjson.decode(ARGV[2]), cjson.decode(ARGV[3])
local created = {}
for i = 1, #triples, 3 do
  local amount = triples[i + 2]
  if redis.call('HINCRBY', KEYS[triples[i]], triples[i + 1], amount) == amount then
    created[triples[i]] = true
  end
end
for k in pairs(created) do
  redis.call('EXPIRE', KEYS[k], ttls[k])
  redis.call('ZADD', index, 0, members[k])
end
redis.call('EXPIRE', index, ARGV[4])
return #triples / 3
"""


def queue_hincrby_many(
    pipe,
    hashes: Sequence[str],
    triples: np.ndarray,
    *,
    ttls: Sequence[int],
    index: str,
    members: Sequence[str],
    index_ttl: int,
) -> None:
    """Queue ``HINCRBY hashes[k - 1] field amount`` for each row ``(k, field, amount)`` of ``triples``.

    Amounts are positive. A hash in which an increment creates a field gets (again) its safety TTL
    ``ttls[k - 1]``, far beyond the job that consumes it, and its entry ``members[k - 1]`` (score 0) in the
    sorted set ``index``, where the cleaner finds it; so does a hash the increments create. A hash whose
    increments only add to fields it has keeps its TTL: the series' fields are samples, and a hash that is
    written to gains a sample every precision, well inside its TTL. Doing it for every hash on every call was
    most of Redis' work for the series: per partition and batch, two calls for each of ~1,000 counters at each
    of 7 precisions. Integer fields are stored as their decimal digits, as HINCRBY would.
    """
    script = pipe.register_script(_HINCRBY_MANY)
    args = [
        orjson.dumps(list(ttls)),
        orjson.dumps(
            np.ascontiguousarray(triples, dtype=np.int64).ravel(), option=orjson.OPT_SERIALIZE_NUMPY
        ),
        orjson.dumps(list(members)),
        index_ttl,
    ]
    script(keys=[*hashes, index], args=args, client=pipe)
