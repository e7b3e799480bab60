"""Which Kafka partitions have counters in Redis: what every read that combines the partitions walks.

Each partition's increments live under its own hash tag (``stats.keys.partition_tag``); this set, on the
shared prefix, names the partitions that ever wrote any. A batch adds its partition before its transaction
(SADD: a replay changes nothing), so a reader that finds a partition's counters also finds it here.
"""

from collections import Counter
from collections.abc import Callable

from stats import keys


def queue_register(pipe, partition: int) -> None:
    pipe.sadd(keys.partitions(), partition)
    pipe.expire(keys.partitions(), keys.LONG_TTL)


def known_partitions(client) -> list[int]:
    return sorted(int(member) for member in client.smembers(keys.partitions()))


def summed_hashes(client, key_of: Callable[[int], str]) -> Counter[str]:
    """Field -> the sum of its value over every partition's hash ``key_of(partition)``, in one round trip."""
    partitions = known_partitions(client)
    pipe = client.pipeline(transaction=False)
    for partition in partitions:
        pipe.hgetall(key_of(partition))
    total: Counter[str] = Counter()
    for reply in pipe.execute() if partitions else []:
        for field, value in reply.items():
            total[field.decode()] += int(value)
    return total
