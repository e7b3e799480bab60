"""Moving a Redis written by an earlier version to the current key layout, in place, losing nothing.

Up to version 1 every key sat under the one hash tag ``{P}``. Now what a Kafka partition's batches increment
sits under that partition's tag (``stats.keys.partition_tag``). The increments of the old keys cannot be
told apart by partition any more, so they all move to partition 0's tag, where every read adds them up with
the rest; the stored offsets move to their own partitions' keys. Apps move their own keys through the upgrade
they register (``stats.plugins.register_layout_upgrade``).

Each key moves by DUMP, RESTORE under the new name, DEL: the same on a single Redis and on a cluster (a rename
cannot cross slots). Run again after a crash, a key already restored is only deleted from the old name. Sets and
sorted sets that index other keys by name get the new names. ``{P}:layout`` records the version once done, so
every later start costs one GET. Run it with every consumer of the earlier version stopped: ``consume`` and
``flush`` run it before they count or read, and ``manage.py upgrade_redis_layout`` runs it on its own.
"""

import logging
from typing import cast

from django_redis import get_redis_connection
from redis.exceptions import ResponseError

from cpsproject.common.locks import job_lock
from stats import keys
from stats.pipeline import offsets
from stats.pipeline.partitions import known_partitions, queue_new_version, queue_register
from stats.pipeline.registry import RedisClient, layout_upgrades

logger = logging.getLogger(__name__)

LAYOUT_VERSION = b"2"


def _move(client: RedisClient, old: str, new: str) -> bool:
    """Move one key; return whether it moved (False: it is gone, or its new name holds something else)."""
    dumped, ttl = client.dump(old), client.pttl(old)
    if dumped is None:
        return False
    try:
        client.restore(new, max(ttl, 0), dumped)
    except ResponseError as exc:  # BUSYKEY: restored before a crash, or written since
        if "BUSYKEY" not in str(exc) or client.dump(new) != dumped:
            logger.error("%s not moved: %s already holds other data", old, new)
            return False
    client.delete(old)
    return True


def _move_index(client: RedisClient, old: str, new: str) -> bool:
    """Move a set or sorted set of key names, renaming its members."""
    if client.type(old) == b"zset":
        read = cast(list[tuple[bytes, float]], client.zrange(old, 0, -1, withscores=True))
        scored = {keys.version1_moved(m.decode()): s for m, s in read}
        if scored:
            client.zadd(new, scored)
    else:
        members = [keys.version1_moved(m.decode()) for m in cast(set[bytes], client.smembers(old))]
        if members:
            client.sadd(new, *members)
    ttl = client.ttl(old)
    if ttl > 0:
        client.expire(new, ttl)
    client.delete(old)
    return True


def _move_stats_keys(client: RedisClient) -> int:
    moved = 0
    for raw in client.scan_iter(match=keys.version1_pattern(), count=1000):
        old = raw.decode()
        found = keys.version1_key(old)
        if found.kind == keys.VERSION1_OFFSETS:
            moved += _move_offsets(client, old, group=found.group, topic=found.topic)
        elif found.kind == keys.VERSION1_FENCE:
            client.delete(old)  # the offset key is the fence now
        elif found.kind == keys.VERSION1_INDEX:
            moved += _move_index(client, old, keys.version1_moved(old))
        elif found.kind == keys.VERSION1_MOVED:
            moved += _move(client, old, keys.version1_moved(old))
    if moved:
        _register(client, 0)
    return moved


def _register(client: RedisClient, partition: int) -> None:
    pipe = client.pipeline(transaction=False)
    queue_register(pipe, partition)
    pipe.execute()


def _move_offsets(client: RedisClient, old: str, *, group: str, topic: str) -> int:
    """The hash partition -> next offset becomes one key per partition (the partition's fence too)."""
    for partition, offset in client.hgetall(old).items():
        offsets.store_if_absent(
            client, group=group, source=topic, partition=int(partition), offset=int(offset)
        )
    client.delete(old)
    return 1


def upgrade_layout(*, wait_seconds: float = 120) -> int:
    """Move what an earlier version left in Redis to the current layout, once; return the keys moved."""
    client = get_redis_connection("default")
    if client.get(keys.layout_version()) == LAYOUT_VERSION:
        return 0
    with job_lock("redis-layout", wait_seconds=wait_seconds):
        if client.get(keys.layout_version()) == LAYOUT_VERSION:  # another process just did it
            return 0
        moved = _move_stats_keys(client)
        for name, upgrade in layout_upgrades().items():
            moved += upgrade(client)
            logger.debug("layout upgrade of %s done", name)
        if moved:  # counters appeared under the partitions' tags: what readers derived before is stale
            pipe = client.pipeline(transaction=False)
            for partition in known_partitions(client):
                queue_new_version(pipe, partition)
            pipe.execute()
        client.set(keys.layout_version(), LAYOUT_VERSION, ex=keys.LONG_TTL)
    if moved:
        logger.info(
            "moved %d Redis keys to the per-partition layout (version %s)", moved, LAYOUT_VERSION.decode()
        )
    return moved
