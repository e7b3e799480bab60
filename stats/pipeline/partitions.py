"""Which Kafka partitions have counters in Redis, and which version of them: what every read that combines
the partitions walks.

Each partition's increments live under its own hash tag (``stats.keys.partition_tag``); this set, on the
shared prefix, names the partitions that ever wrote any. A batch adds its partition before its transaction
(SADD: a replay changes nothing), so a reader that finds a partition's counters also finds it here.

Each partition's version (``keys.counters_version``) is a random token that every write to its counters
replaces, in the same transaction. A reader may keep what it derived from the counters for as long as the
versions it read them at are still current: a flush moves counts from Redis to SQL without changing any sum
a reader makes of the two, so only a write makes such a result stale. Random, not a counter, so that a Redis
restarted empty cannot bring an old version back.
"""

import uuid
from collections import Counter
from collections.abc import Callable

from stats import keys
from stats.pipeline.registry import CommandQueue, RedisClient


def queue_register(pipe: CommandQueue, partition: int) -> None:
    pipe.sadd(keys.partitions(), partition)
    pipe.expire(keys.partitions(), keys.LONG_TTL)


def known_partitions(client: RedisClient) -> list[int]:
    return sorted(int(member) for member in client.smembers(keys.partitions()))


def queue_new_version(pipe: CommandQueue, partition: int) -> None:
    """Queue the write of a new version of ``partition``'s counters, with (in the transaction of) the writes."""
    pipe.set(keys.counters_version(partition), uuid.uuid4().hex, ex=keys.LONG_TTL)


def counter_versions(client: RedisClient, partitions: list[int]) -> tuple[bytes | None, ...]:
    """The current version of each of ``partitions``' counters, in one round trip."""
    pipe = client.pipeline(transaction=False)
    for partition in partitions:
        pipe.get(keys.counters_version(partition))
    return tuple(pipe.execute()) if partitions else ()


def summed_hashes(client: RedisClient, key_of: Callable[[int], str]) -> Counter[str]:
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
