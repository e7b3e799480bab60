"""PV buckets (first design document): the one module that knows their hash's layout.

Per Kafka partition, partner and 5-minute bucket one hash (``keys.pv_bucket``): ``tree`` (the partner's
subtree), ``self`` (its own), ``bot`` (its own bots) and ``gen``, the batch that created the key (a key
re-created after a flush is a new ``BucketStat`` row). Each partition indexes its buckets by stamp
(``keys.pv_index``). The consumer writes them in its partition's MULTI/EXEC (``queue_page_views``), flush reads
the settled ones and deletes what it flushed (``read_indexed``, ``delete_unchanged``), the API reads the live
ones (``read_live``). A partner-bucket's count is the sum over the partitions' keys (each has its own ``gen``).
The Lua sources sit beside this file.
"""

import datetime as dt
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from functools import partial
from itertools import starmap
from typing import NamedTuple, cast

from cpsproject.common.lua import LuaScript
from cpsproject.common.timeutil import floor_local
from partners.selectors import Lineage
from stats import keys
from stats.conf import stats_setting
from stats.counters.tally import PageViewTally
from stats.pipeline.partitions import known_partitions
from stats.pipeline.registry import CounterWrites, RedisClient

_ADD = LuaScript(__file__, "pageviews_add.lua")
_READ = LuaScript(__file__, "pageviews_read.lua")
_DELETE_IF_UNCHANGED = LuaScript(__file__, "pageviews_delete_if_unchanged.lua")

# Bounds one script call's arguments; a bigger batch makes several calls in the same transaction.
BUCKETS_PER_CALL = 5000
# Buckets per read or compare-and-delete call: a script blocks Redis while it runs, so each call stays short
# enough for the consumers' transactions to pass between two.
READ_CHUNK = 1000
# Index members fetched per ZRANGE, their buckets read by one pipeline of script calls: few round trips to a
# busy Redis, and no command holding it for more than a few milliseconds.
INDEX_PAGE = 10 * READ_CHUNK

_MISSING = "\t" * 3  # the line the read script returns for a bucket whose hash is gone


class BucketNumbers(NamedTuple):
    """What one partition's key of a bucket holds: the hash's fields, in the order every script uses."""

    tree: int  # the partner's subtree's views
    own: int  # the partner's own views (the hash's ``self`` field)
    bot: int  # the partner's own bot views
    generation: str  # the batch that created the key: ``BucketStat.generation``


# Makes a BucketNumbers from a tuple in C (the generated ``__new__`` is a Python call): the API reads every live
# bucket of a day per request that its cache misses.
_new_numbers = partial(tuple.__new__, BucketNumbers)


def _numbers(line: str) -> BucketNumbers:
    """A bucket's line as the read script returns it: ``tree``, ``self``, ``bot`` and ``gen``, tab-separated."""
    tree, own, bot, generation = line.split("\t")
    return _new_numbers((int(tree or 0), int(own or 0), int(bot or 0), generation))


def numbers_of_hash(fields: dict[bytes, bytes]) -> BucketNumbers:
    """A bucket's hash as HGETALL returns it (the bench's row-by-row baseline reads buckets that way)."""
    return BucketNumbers(
        int(fields.get(b"tree", 0)),
        int(fields.get(b"self", 0)),
        int(fields.get(b"bot", 0)),
        fields.get(b"gen", b"").decode(),
    )


class _Increments:
    """One bucket's increments in a batch, in the order the add script takes them."""

    __slots__ = ("tree", "own", "bot")

    def __init__(self) -> None:
        self.tree = self.own = self.bot = 0


def bucket_start(moment: dt.datetime) -> dt.datetime:
    return floor_local(moment, stats_setting("BUCKET_SECONDS"))


def queue_page_views(writes: CounterWrites, tally: PageViewTally, *, now: dt.datetime) -> None:
    """Queue one script call per few thousand buckets on ``writes.fenced``: the PV buckets of ``tally``.

    Each view counts for its own partner (``self``) and for the partner and every ancestor (``tree``);
    bot traffic only in ``bot`` of its own partner. Traffic with no partner counts under ``keys.NO_PARTNER``.
    """
    clock = tally.clock
    period = stats_setting("BUCKET_SECONDS")
    no_partner = (keys.NO_PARTNER,)
    bucket_of = {seconds: clock.floor(seconds, period) for seconds in tally.seconds()}
    # A batch spans a bucket or two: count per partner and bucket first, so the fan-out to ancestors runs once
    # per partner-bucket rather than once per partner-second.
    humans: Counter[tuple[Lineage | None, int]] = Counter()
    for (lineage, seconds), n in tally.humans.items():
        humans[(lineage, bucket_of[seconds])] += n
    bots: Counter[tuple[Lineage | None, int]] = Counter()
    for (lineage, seconds), n in tally.bots.items():
        bots[(lineage, bucket_of[seconds])] += n

    buckets: defaultdict[tuple[str, int], _Increments] = defaultdict(_Increments)  # by (code, bucket start)
    for (lineage, start), n in bots.items():
        buckets[((lineage.codes if lineage else no_partner)[-1], start)].bot += n
    for (lineage, start), n in humans.items():
        chain = lineage.codes if lineage else no_partner
        buckets[(chain[-1], start)].own += n
        for code in chain:
            buckets[(code, start)].tree += n
    if not buckets:
        return
    partition = writes.partition
    generation = uuid.uuid4().hex[:12]  # the batch that creates a key (see BucketStat.generation)
    ttl = keys.realtime_ttl()
    items = list(buckets.items())
    for first in range(0, len(items), BUCKETS_PER_CALL):
        bucket_keys: list[str] = []
        numbers: list[str] = []
        for (code, start), added in items[first : first + BUCKETS_PER_CALL]:
            stamp = clock.stamp_minute(start)
            bucket_keys.append(keys.pv_bucket(partition, code, stamp))
            numbers.append(f"{stamp} {added.tree} {added.own} {added.bot}")
        _ADD.queue(
            writes.fenced,
            keys=[*bucket_keys, keys.pv_index(partition)],
            args=[generation, ttl, " ".join(numbers)],
        )


class BucketRead(NamedTuple):  # a tuple: a flush reads 100,000 of them
    partition: int
    key: str
    code: str
    stamp: str  # yyyyMMddHHmm, the key's suffix
    line: str  # the hash as the read script returns it: what compare-and-delete checks

    @property
    def missing(self) -> bool:
        """Whether the key was gone (still indexed): it writes no row and is only un-indexed."""
        return self.line == _MISSING

    def numbers(self) -> BucketNumbers:
        return _numbers(self.line)


def read_indexed(client: RedisClient, *, max_score: float) -> Iterator[list[BucketRead]]:
    """Yield every indexed bucket whose stamp is at most ``max_score``, a chunk at a time, partition by
    partition, walking each index by rank.

    The ``ZCOUNT`` fixes how many to read: a consumer adding a lower stamp meanwhile shifts ranks up, so a
    bucket may be read twice (the caller keeps its last read) or wait for the next flush, never skipped for
    good. Walking by rank costs Redis log(N) per chunk, where ``LIMIT offset`` walked past every earlier member.
    """
    for partition in known_partitions(client):
        index = keys.pv_index(partition)
        total = client.zcount(index, "-inf", max_score)
        for rank in range(0, total, INDEX_PAGE):
            members = client.zrange(index, rank, min(rank + INDEX_PAGE, total) - 1)
            if not members:
                break
            chunks = [members[at : at + READ_CHUNK] for at in range(0, len(members), READ_CHUNK)]
            pipe = client.pipeline(transaction=False)
            for chunk in chunks:
                _READ.queue(pipe, keys=chunk)
            for chunk, reply in zip(chunks, pipe.execute(), strict=True):
                lines = reply.decode().split("\n")
                bucket_keys = list(map(bytes.decode, cast(list[bytes], chunk)))
                codes, stamps = zip(*map(keys.parse_pv_bucket, bucket_keys), strict=True)
                yield list(
                    starmap(
                        BucketRead,
                        zip([partition] * len(chunk), bucket_keys, codes, stamps, lines, strict=True),
                    )
                )


def delete_unchanged(client: RedisClient, buckets: list[BucketRead]) -> int:
    """Delete each of ``buckets`` that still holds the line read, and its index entry; return how many went."""
    by_partition: defaultdict[int, list[BucketRead]] = defaultdict(list)
    for bucket in buckets:
        by_partition[bucket.partition].append(bucket)
    pipe = client.pipeline(transaction=False)
    for partition, reads in by_partition.items():
        for start in range(0, len(reads), READ_CHUNK):
            chunk = reads[start : start + READ_CHUNK]
            _DELETE_IF_UNCHANGED.queue(
                pipe,
                keys=[keys.pv_index(partition), *(b.key for b in chunk)],
                args=["\n".join(b.line for b in chunk)],
            )
    return sum(pipe.execute())


def read_live(
    client: RedisClient, code: str, stamps: list[str], *, partitions: list[int] | None = None
) -> list[list[BucketNumbers]]:
    """For each of ``code``'s buckets ``stamps``, what every partition's key that exists holds; one round trip
    (a script call per partition). ``partitions``: ``known_partitions``, when the caller has already read them
    for this request."""
    found: list[list[BucketNumbers]] = [[] for _ in stamps]
    if not stamps:
        return found
    if partitions is None:
        partitions = known_partitions(client)
    pipe = client.pipeline(transaction=False)
    for partition in partitions:
        _READ.queue(pipe, keys=[keys.pv_bucket(partition, code, stamp) for stamp in stamps])
    for reply in pipe.execute():
        for at, line in enumerate(reply.decode().split("\n")):
            if line != _MISSING:
                found[at].append(_numbers(line))
    return found


def pending_count(client: RedisClient) -> int:
    """How many buckets wait in Redis for a flush, over every partition."""
    partitions = known_partitions(client)
    pipe = client.pipeline(transaction=False)
    for partition in partitions:
        pipe.zcard(keys.pv_index(partition))
    return sum(pipe.execute()) if partitions else 0
