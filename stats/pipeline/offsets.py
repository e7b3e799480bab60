"""Each Kafka partition's next offset, stored in Redis with its counters: the one module that knows the key.

One string per consumer group, source and partition (``keys.offset``): the next offset to read. A batch moves
it in the same MULTI/EXEC as the counters, dead-letter counts and counters version of that partition
(``apply_with_offset``), WATCHing it first: so a batch counts exactly once, and a consumer that lost its
partition while it held a batch finds the offset moved on and leaves the batch to the new owner. On
(re)start and on every assignment the consumer seeks to these offsets (``stored_offsets``); the Kafka commit
only feeds lag monitoring.
"""

from collections import Counter

from django_redis import get_redis_connection
from redis.exceptions import WatchError

from stats import keys
from stats.pipeline import dead_letter_counts
from stats.pipeline.batch import Partition
from stats.pipeline.partitions import known_partitions, queue_new_version, queue_register
from stats.pipeline.registry import CounterWrites, RedisClient


def _past(stored: bytes | str | None, first_offset: int) -> int | None:
    """Return the stored offset if it is past ``first_offset`` (a batch from there is stale), else None."""
    if stored is not None and int(stored) > first_offset:
        return int(stored)
    return None


def stale_partitions(
    client: RedisClient, *, group: str, first_offsets: dict[Partition, int]
) -> dict[Partition, int]:
    """Return the partitions whose stored offset is past the batch's first offset, with it; one round trip."""
    partitions = list(first_offsets)
    pipe = client.pipeline(transaction=False)
    for source, number in partitions:
        pipe.get(keys.offset(group, source, number))
    found = (
        (p, _past(stored, first_offsets[p])) for p, stored in zip(partitions, pipe.execute(), strict=True)
    )
    return {partition: stored for partition, stored in found if stored is not None}


def apply_with_offset(
    client: RedisClient,
    *,
    group: str,
    partition: Partition,
    first_offset: int,
    next_offset: int,
    writes: CounterWrites,
    dead: Counter[str],
) -> int | None:
    """Apply a batch's share of one partition: its idempotent writes, then one MULTI/EXEC of its counters,
    dead-letter counts and next offset.

    Return None once applied, or the stored offset instead when it is past ``first_offset``: the batch is
    stale. The MULTI/EXEC WATCHes the partition's offset key and reads it first, so a consumer that lost its
    partitions while frozen with a polled batch (a stopped VM, a swap storm) finds the offset moved on, and one
    whose apply races another's has its EXEC refused (WatchError) and looks again. Each attempt reads the
    stored offset again: after a dropped connection, a transaction that ran is not sent twice. The idempotent
    writes (a replay changes nothing) go first, in whichever slots their keys live: once the offset has moved
    they are all in.
    """
    source, number = partition
    offset_key = keys.offset(group, source, number)
    while True:
        if writes.idempotent:
            anywhere = client.pipeline(transaction=False)
            writes.idempotent.queue_on(anywhere)
            anywhere.execute()
        pipe = client.pipeline(transaction=True)
        try:
            pipe.watch(offset_key)
            stored = _past(pipe.get(offset_key), first_offset)
            if stored is not None:
                return stored
            pipe.multi()
            writes.fenced.queue_on(pipe)
            dead_letter_counts.queue_add(pipe, number, dead)
            pipe.set(offset_key, next_offset, ex=keys.LONG_TTL)
            queue_new_version(pipe, number)
            pipe.execute()
            return None
        except WatchError:
            continue
        finally:
            pipe.reset()  # gives the watching connection back to the pool


def stored_offsets(*, group: str, source: str) -> dict[int, int]:
    """Return the next offset to read per partition, as stored with the counters."""
    client = get_redis_connection("default")
    partitions = known_partitions(client)
    pipe = client.pipeline(transaction=False)
    for number in partitions:
        pipe.get(keys.offset(group, source, number))
    stored = pipe.execute() if partitions else []
    return {
        number: int(offset) for number, offset in zip(partitions, stored, strict=True) if offset is not None
    }


def store_if_absent(client: RedisClient, *, group: str, source: str, partition: int, offset: int) -> None:
    """Store ``partition``'s next offset unless one is stored (the layout upgrade's carry-over), and list it."""
    client.set(keys.offset(group, source, partition), offset, ex=keys.LONG_TTL, nx=True)
    pipe = client.pipeline(transaction=False)
    queue_register(pipe, partition)
    pipe.execute()
