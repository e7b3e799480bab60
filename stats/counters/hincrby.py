"""Many hash increments in one command: what keeps a batch's Redis apply one cheap round trip.

A batch of 2,000 events touches thousands of (hash, field) pairs; the 1-second and 5-second series alone give
nearly one pair per event and counter. Sent as HINCRBYs, packing and parsing them cost more than Redis spends
on them. One script call carries them all, inside the same MULTI/EXEC as the offset, with every key declared
(and sharing the prefix's hash tag) so it runs on Redis Cluster too.
"""

from collections.abc import Callable, Mapping

# KEYS: the hashes. ARGV: one safety TTL per key (seconds), then (index into KEYS, field, amount) triples.
_HINCRBY_MANY = """
local n = #KEYS
for i = n + 1, #ARGV, 3 do
  redis.call('HINCRBY', KEYS[tonumber(ARGV[i])], ARGV[i + 1], ARGV[i + 2])
end
for i = 1, n do
  redis.call('EXPIRE', KEYS[i], ARGV[i])
end
return (#ARGV - n) / 3
"""

# Bounds one call's argument list; a larger batch simply makes several calls in the same transaction.
MAX_PER_CALL = 20_000


def queue_hincrby_many(
    pipe, hashes: Mapping[str, Mapping[str | int, int]], *, ttl: Callable[[str], int]
) -> None:
    """Queue ``HINCRBY key field amount`` for every ``key -> {field: amount}`` as few script calls.

    Every key touched gets (again) the safety TTL ``ttl(key)``, far beyond the job that consumes it.
    """
    script = pipe.register_script(_HINCRBY_MANY)
    key_list: list[str] = []
    triples: list[int | str] = []
    for key, fields in hashes.items():
        number = len(key_list) + 1
        for field, amount in fields.items():
            if amount:
                triples += (number, field, amount)
        key_list.append(key)
        if len(triples) >= 3 * MAX_PER_CALL:
            script(keys=key_list, args=[*map(ttl, key_list), *triples], client=pipe)
            key_list, triples = [], []
    if triples:
        script(keys=key_list, args=[*map(ttl, key_list), *triples], client=pipe)
