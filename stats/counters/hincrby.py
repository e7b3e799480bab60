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


def queue_hincrby_many(pipe, increments: Mapping[tuple[str, str], int], *, ttl: Callable[[str], int]) -> None:
    """Queue ``HINCRBY key field amount`` for every ``(key, field) -> amount`` as few script calls.

    Every key touched gets (again) the safety TTL ``ttl(key)``, far beyond the job that consumes it.
    """
    items = [(target, amount) for target, amount in increments.items() if amount]
    script = pipe.register_script(_HINCRBY_MANY)
    for start in range(0, len(items), MAX_PER_CALL):
        key_index: dict[str, int] = {}
        args: list[int | str] = []
        for (key, field), amount in items[start : start + MAX_PER_CALL]:
            args += (key_index.setdefault(key, len(key_index) + 1), field, amount)
        key_list = list(key_index)
        script(keys=key_list, args=[ttl(key) for key in key_list] + args, client=pipe)
