"""Day UV HyperLogLogs (first design document): the one module that knows their keys.

Per Kafka partition, partner, business day and scope one HyperLogLog (``keys.uv_day``), indexed per partition
and day: ``self``, the visitors of the partner's own views; ``below``, those of its descendants' views. A
partner's subtree UV (scope ``tree``) is the union of the two, made when it is read or flushed: a view is added
to its own partner's ``self`` and to each ancestor's ``below``, one HyperLogLog fewer than the ``tree`` of every
partner of its chain that an earlier version wrote (still read, and flushed into the same row). The consumer
adds a batch's visitors in its partition's MULTI/EXEC (``queue_uniques``); a partner-day's UV is the union over
the partitions. Unions across slots are made where Redis allows them: the bytes of each HyperLogLog (a plain
string) are copied into scratch keys sharing one hash tag and merged there (``union_counts``). Flush reads them
(``read_day_hlls``) and deletes what it flushed (``delete_unchanged``).
"""

import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeAlias, cast

import orjson

from cpsproject.common import redis_keys
from cpsproject.common.lua import LuaScript
from stats import keys
from stats.counters.tally import PageViewTally
from stats.pipeline.partitions import known_partitions
from stats.pipeline.registry import CounterWrites, RedisClient

SELF, TREE = "self", "tree"
BELOW = "below"  # stored only: a subtree's UV is read as the union of SELF and BELOW (and an earlier TREE)

_ADD = LuaScript(__file__, "uniques_add.lua")
_DELETE_IF_UNCHANGED = LuaScript(__file__, "uniques_delete_if_unchanged.lua")
_MERGE = LuaScript(__file__, "uniques_merge.lua")

HLLS_PER_CALL = 2000  # bounds one script call's arguments
READ_CHUNK = 1000


# A stored HyperLogLog's bytes, as the database driver returns a binary column.
Blob: TypeAlias = bytes | memoryview


class UvDay(NamedTuple):
    """One partner-day's visitors, whichever partitions hold them."""

    code: str
    day_stamp: str  # yyyyMMdd
    scope: str  # SELF or TREE when read; SELF, BELOW or (an earlier version's) TREE when stored


def queue_uniques(writes: CounterWrites, tally: PageViewTally) -> None:
    """Queue the PFADDs of ``tally``'s visitors on ``writes.fenced``: each for its own partner (``self``) and
    for every ancestor (``below``)."""
    visitors: defaultdict[UvDay, set[str]] = defaultdict(set)
    no_partner = (keys.NO_PARTNER,)
    for (lineage, day), openids in tally.visitors.items():
        chain = lineage.codes if lineage else no_partner
        visitors[UvDay(chain[-1], day, SELF)].update(openids)
        for code in chain[:-1]:
            visitors[UvDay(code, day, BELOW)].update(openids)
    if not visitors:
        return
    partition, pipe = writes.partition, writes.fenced
    ttl = keys.realtime_ttl()
    items = [(keys.uv_day(partition, *name), name, openids) for name, openids in visitors.items()]
    for first in range(0, len(items), HLLS_PER_CALL):
        chunk = items[first : first + HLLS_PER_CALL]
        _ADD.queue(
            pipe,
            keys=[key for key, _, _ in chunk],
            args=[ttl, orjson.dumps([list(openids) for _, _, openids in chunk])],
        )
    by_day: defaultdict[str, list[str]] = defaultdict(list)
    for key, name, _ in items:
        by_day[name.day_stamp].append(key)
    for day_stamp, uv_keys in by_day.items():
        pipe.sadd(keys.uv_index(partition, day_stamp), *uv_keys)
        pipe.zadd(keys.uv_days(partition), {day_stamp: int(day_stamp)})
        pipe.expire(keys.uv_index(partition, day_stamp), ttl)
    pipe.expire(keys.uv_days(partition), ttl)


def merged_counts(client: RedisClient, unions: Sequence[Sequence[Blob | None]]) -> list[tuple[bytes, int]]:
    """Return the merged bytes and the PFCOUNT of each list of HyperLogLog blobs, in one round trip.

    One script call per union, on scratch keys of its own slot (no transaction spans the unions): the blobs
    go as arguments, where a SET per blob, a PFMERGE, a GET, a PFCOUNT and the DELs each cost a command.
    """
    pipe = client.pipeline(transaction=False)
    for union in unions:
        blobs = [bytes(blob) for blob in union if blob]
        target = redis_keys.scratch(uuid.uuid4().hex)
        parts = [redis_keys.scratch_part(target, n) for n in range(1, len(blobs))]
        _MERGE.queue(pipe, keys=[target, *parts], args=blobs)
    return [(merged or b"", count) for merged, count in pipe.execute()] if unions else []


def stored_as(name: UvDay) -> tuple[UvDay, ...]:
    """The stored HyperLogLogs whose union is ``name``'s UV (see the module's docstring)."""
    if name.scope == TREE:
        return (name._replace(scope=SELF), name._replace(scope=BELOW), name)
    return (name,)


def read_as(stored: UvDay) -> tuple[UvDay, ...]:
    """The UVs (SELF, TREE) a stored HyperLogLog is part of: the inverse of ``stored_as``."""
    if stored.scope == SELF:
        return (stored, stored._replace(scope=TREE))
    if stored.scope == BELOW:
        return (stored._replace(scope=TREE),)
    return (stored,)


def _read_blobs(
    client: RedisClient, names: list[UvDay], partitions: list[int] | None
) -> dict[UvDay, list[bytes]]:
    """The bytes of every partition's HyperLogLogs that make up each of ``names``, in one round trip."""
    if partitions is None:
        partitions = known_partitions(client) if names else []
    pipe = client.pipeline(transaction=False)
    for name in names:
        for stored in stored_as(name):
            for partition in partitions:
                pipe.get(keys.uv_day(partition, *stored))
    replies = iter(pipe.execute() if names and partitions else [])
    return {
        name: [blob for _ in stored_as(name) for _ in partitions if (blob := next(replies))] for name in names
    }


def union_counts(
    client: RedisClient,
    unions: Sequence[tuple[Iterable[Blob | None], Iterable[UvDay]]],
    *,
    partitions: list[int] | None = None,
) -> list[int]:
    """Return the UV of each union of stored HyperLogLog blobs and live partner-days held in Redis.

    ``partitions``: ``known_partitions``, when the caller has already read them for this request.
    """
    listed: list[tuple[list[Blob | None], list[UvDay]]] = [
        (list(blobs), list(names)) for blobs, names in unions
    ]
    live = _read_blobs(client, list({name for _, names in listed for name in names}), partitions)
    return [
        count
        for _, count in merged_counts(
            client, [blobs + [blob for name in names for blob in live[name]] for blobs, names in listed]
        )
    ]


@dataclass(frozen=True)
class HllRead:
    partition: int
    key: str
    name: UvDay
    current: bytes  # the key's bytes when read (what compare-and-delete checks)


def read_day_hlls(client: RedisClient) -> list[HllRead]:
    """Every day HyperLogLog Redis holds, with its bytes."""
    named: list[tuple[int, str, UvDay]] = []
    for partition in known_partitions(client):
        for day_stamp in client.zrange(keys.uv_days(partition), 0, -1):
            for member in client.sscan_iter(
                keys.uv_index(partition, cast(bytes, day_stamp).decode()), count=1000
            ):
                key = member.decode()
                named.append((partition, key, UvDay(*keys.parse_uv_day(key))))
    reads = []
    for start in range(0, len(named), READ_CHUNK):
        chunk = named[start : start + READ_CHUNK]
        pipe = client.pipeline(transaction=False)
        for _, key, _ in chunk:
            pipe.get(key)
        for (partition, key, name), current in zip(chunk, pipe.execute(), strict=True):
            reads.append(HllRead(partition, key, name, current or b""))
    return reads


def delete_unchanged(client: RedisClient, reads: list[HllRead], *, settled: Callable[[str], bool]) -> int:
    """Delete each HyperLogLog of ``reads`` whose day is ``settled`` and that still holds the bytes read."""
    pipe = client.pipeline(transaction=False)
    queued = 0
    for read in reads:
        if settled(read.name.day_stamp):
            day_stamp = read.name.day_stamp
            _DELETE_IF_UNCHANGED.queue(
                pipe,
                keys=[read.key, keys.uv_index(read.partition, day_stamp), keys.uv_days(read.partition)],
                args=[read.current, day_stamp],
            )
            queued += 1
    return sum(pipe.execute()) if queued else 0


def pending_count(client: RedisClient) -> int:
    """How many day HyperLogLogs wait in Redis for a flush, over every partition."""
    indexes = [
        keys.uv_index(partition, cast(bytes, stamp).decode())
        for partition in known_partitions(client)
        for stamp in client.zrange(keys.uv_days(partition), 0, -1)
    ]
    pipe = client.pipeline(transaction=False)
    for index in indexes:
        pipe.scard(index)
    return sum(pipe.execute()) if indexes else 0
