"""Every Redis key of ``stats``: the one module that builds them (``tests/test_keys.py`` checks this picture).

``{P}`` is the shared prefix, a Redis Cluster hash tag (``cpsproject.common.redis_keys``). What a Kafka
partition's batches increment sits under that partition's own tag ``{P:pN}`` (``partition_tag``), so that it
moves in one MULTI/EXEC with the partition's offset; what every process shares sits under ``{P}``. Each line
names the module that owns the structure: it alone writes, reads and parses the values.

``NO_PARTNER`` (``~site``) stands for traffic with no partner wherever a partner code is expected: in keys, in
the archive and in day counts (partner codes start with a letter or digit, so it cannot collide).

Shared bookkeeping::

    {P}:partitions                   set    Kafka partitions that ever wrote counters (pipeline.partitions)
    {P}:layout                       string the key layout's version, once an upgrade ran (jobs.layout)
    {P:pN}:offset:{group}:{topic}    string the partition's next offset to read, set with its counters: the
                                            key an apply WATCHes (pipeline.offsets)
    {P:pN}:version                   string a token every write to the partition's counters replaces
                                            (pipeline.partitions)
    {P:pN}:deadletters               hash   reason -> dead letters counted (pipeline.dead_letter_counts)
    {P}:kafka:ends:{topic}           hash   partition -> its end offset as last seen, and when (pipeline.lag)
    {P}:kafka:probe                  hash   when the last live lag probe ran, and its error (pipeline.lag)

PV and UV (first design document)::

    {P:pN}:pv:{code}:{yyyyMMddHHmm}      hash   the partner's 5-minute bucket: subtree, own and bot counts, and
                                                the batch that created the key (counters.pageviews)
    {P:pN}:pv:index                      zset   bucket keys, score yyyyMMddHHmm (what flush walks)
    {P:pN}:uv:{code}:{yyyyMMdd}:{scope}  HLL    openids of the day; scope "self" (its own views) or "below"
                                                (its descendants'), "tree" as an earlier version wrote it
                                                (counters.uniques)
    {P:pN}:uv:index:{yyyyMMdd}           set    the UV keys of that day
    {P:pN}:uv:days                       zset   days that have UV keys, score yyyyMMdd

Final days, a cache of what only a reconcile changes (jobs.final_days)::

    {P}:final:gen                    string generation of the cache; reconcile INCRs it after each commit
    {P}:final:{partner_id}:{yyyyMM}  string a month of the partner's final days, tagged with its generation
    {P}:final:{partner_id}:uv:{scope}:{yyyyMMdd}-{yyyyMMdd}  string  a run of final days' HLLs merged, tagged

Rankings (second design document; counters.rankings)::

    {P:pN}:rank:{window}:{scope}:slot:{epoch}  hash  partner code -> PV in that slot
    {P:pN}:rank:{window}:{scope}:slots         zset  slot keys, score slot start epoch

Time series (third design document; counters.series)::

    {P:pN}:series:known                 zset   "{precision}:{counter}" members, score 0; counters: "all"
                                               (every human PV) and "p:{code}" (a partner's subtree PV)
    {P:pN}:series:{precision}:{counter} hash   sample start epoch -> count
    {P}:series:cleaned                  hash   precision -> epoch of the last clean

Pipeline metrics (pipeline.metrics; read at scrape time by read.pipeline_status)::

    {P:pN}:metrics:counted           hash   "{type}:{source}" -> events counted (in the partition's MULTI/EXEC)
    {P}:metrics:batch_seconds        hash   the batch-duration histogram
    {P}:metrics:members:{group}      hash   consumer ("host:pid") -> since when it has held no partition, and
                                            when it last reported

Version 1 put every key under ``{P}``; the ``version1_*`` helpers at the end are what the upgrade
(``stats.jobs.layout``) knows of it.
"""

import functools
import itertools
from typing import NamedTuple

from redis.crc import REDIS_CLUSTER_HASH_SLOTS as SLOTS
from redis.crc import key_slot

from cpsproject.common.redis_keys import prefix
from stats.conf import stats_setting

NO_PARTNER = "~site"

# Safety TTLs: every key is renewed on each write and lives far beyond the job that moves or trims it, so a
# key that job forgets cannot live forever.
DAY = 86400
# Offsets, dead-letter counts and the series index: a year of silence.
LONG_TTL = 400 * DAY


def realtime_ttl() -> int:
    """PV buckets, UV HyperLogLogs and their indexes: flushed every minute, re-created by late events."""
    return stats_setting("MAX_LATENESS_SECONDS") + 30 * DAY


def final_days_ttl() -> int:
    """A final-days entry: a reconcile supersedes it at once; the TTL bounds what nothing else announces."""
    return 3600


def ranking_ttl(slot_seconds: int, slots: int) -> int:
    """A window's slots and totals: rotation drops a slot once the window has passed it."""
    return slot_seconds * slots + DAY


def series_ttl(precision: int, samples: int) -> int:
    """A series hash: the cleaner trims samples older than the retention."""
    return precision * samples + DAY


# --- Kafka partitions ---------------------------------------------------------------------------------

# Where in the slot space each partition's tag lands, in twelfths, and in an order that spreads the first 2,
# 3, 4, 6 or 12 partitions evenly over as many masters holding equal slot ranges (what ``redis-cli --cluster
# create`` makes). Hashed as they come, ``{cps:p0}``…``{cps:p5}`` put three partitions on one of three masters
# and one on another: CRC16 of names a digit apart lands about a quarter of the slots apart.
_TWELFTHS = (0, 6, 10, 3, 5, 8, 1, 7, 11, 4, 2, 9)


@functools.lru_cache(maxsize=4096)
def _partition_tag(shared_tag: str, partition: int) -> str:
    base = shared_tag[1:-1]  # "{P}" -> "P"
    twelfth = _TWELFTHS[partition % len(_TWELFTHS)]
    low, high = twelfth * SLOTS // 12, (twelfth + 1) * SLOTS // 12
    for attempt in itertools.count():
        name = f"{base}:p{partition}" + (f".{attempt}" if attempt else "")
        if low <= key_slot(name.encode()) < high:
            return "{" + name + "}"
    raise AssertionError("unreachable")


def partition_tag(partition: int) -> str:
    """The hash tag of every key a Kafka partition's batches increment: ``{P:p7}``, or ``{P:p7.n}`` for the
    first ``n`` that puts it in the partition's share of the slots (see ``_TWELFTHS``)."""
    # Keyed by the cached prefix, not the setting: reading a setting through Django's lazy object cost more
    # than the rest of a key, and the API and the consumer build thousands of keys at a time.
    return _partition_tag(prefix(), partition)


def partitions() -> str:
    return f"{prefix()}:partitions"


def layout_version() -> str:
    return f"{prefix()}:layout"


def offset(group: str, topic: str, partition: int) -> str:
    return f"{partition_tag(partition)}:offset:{group}:{topic}"


def counters_version(partition: int) -> str:
    """A token that every write to the partition's counters replaces (``stats.pipeline.partitions``)."""
    return f"{partition_tag(partition)}:version"


def dead_letter_counts(partition: int) -> str:
    return f"{partition_tag(partition)}:deadletters"


# --- PV / UV ------------------------------------------------------------------------------------------


def pv_bucket(partition: int, code: str, stamp: str) -> str:
    return f"{partition_tag(partition)}:pv:{code}:{stamp}"


def parse_pv_bucket(key: str) -> tuple[str, str]:
    """Return ``(code, yyyyMMddHHmm)`` of a bucket key."""
    code, stamp = key.rsplit(":", 2)[-2:]
    return code, stamp


def pv_index(partition: int) -> str:
    return f"{partition_tag(partition)}:pv:index"


def uv_day(partition: int, code: str, day_stamp: str, scope: str) -> str:
    return f"{partition_tag(partition)}:uv:{code}:{day_stamp}:{scope}"


def parse_uv_day(key: str) -> tuple[str, str, str]:
    """Return ``(code, yyyyMMdd, scope)`` of a UV key."""
    code, day_stamp, scope = key.rsplit(":", 3)[-3:]
    return code, day_stamp, scope


def uv_index(partition: int, day_stamp: str) -> str:
    return f"{partition_tag(partition)}:uv:index:{day_stamp}"


def uv_days(partition: int) -> str:
    return f"{partition_tag(partition)}:uv:days"


def kafka_end_offsets(topic: str) -> str:
    return f"{prefix()}:kafka:ends:{topic}"


def kafka_probe() -> str:
    return f"{prefix()}:kafka:probe"


# --- Final days ---------------------------------------------------------------------------------------


def final_days_generation() -> str:
    return f"{prefix()}:final:gen"


def final_days(partner_id: int, month_stamp: str) -> str:
    return f"{prefix()}:final:{partner_id}:{month_stamp}"


def final_union(partner_id: int, scope: str, first_stamp: str, last_stamp: str) -> str:
    return f"{prefix()}:final:{partner_id}:uv:{scope}:{first_stamp}-{last_stamp}"


# --- Rankings -----------------------------------------------------------------------------------------


def ranking_slot(partition: int, window: str, scope: str, slot_epoch: int) -> str:
    return f"{partition_tag(partition)}:rank:{window}:{scope}:slot:{slot_epoch}"


def ranking_slots(partition: int, window: str, scope: str) -> str:
    return f"{partition_tag(partition)}:rank:{window}:{scope}:slots"


# --- Time series --------------------------------------------------------------------------------------


def series_known(partition: int) -> str:
    return f"{partition_tag(partition)}:series:known"


def series_member(precision: int, counter: str) -> str:
    return f"{precision}:{counter}"


def series_hash(partition: int, precision: int, counter: str) -> str:
    return f"{partition_tag(partition)}:series:{precision}:{counter}"


def series_hash_of_member(partition: int, member: str) -> str:
    precision, counter = member.split(":", 1)
    return series_hash(partition, int(precision), counter)


def series_cleaned() -> str:
    return f"{prefix()}:series:cleaned"


# --- Pipeline metrics ---------------------------------------------------------------------------------


def metrics_counted(partition: int) -> str:
    return f"{partition_tag(partition)}:metrics:counted"


def metrics_counted_field(event_type: str, source: str) -> str:
    return f"{event_type}:{source}"


def parse_metrics_counted_field(field: str) -> tuple[str, str]:
    """Return ``(type, source)`` of a counted field (event types have no colon; sources may: file:PATH)."""
    event_type, source = field.split(":", 1)
    return event_type, source


def metrics_batch_seconds() -> str:
    return f"{prefix()}:metrics:batch_seconds"


def metrics_members(group: str) -> str:
    return f"{prefix()}:metrics:members:{group}"


# --- Version 1 (every key under the one tag {P}): what ``stats.jobs.layout`` moves -------------------------
#
#   {P}:offsets:{group}:{topic}             hash    partition -> next offset: one offset key per partition now
#   {P}:fence:{group}:{topic}:{partition}   string  the offset again, WATCHed: the offset key is the fence now
#   {P}:pv:index, {P}:uv:index:{yyyyMMdd}, {P}:rank:…:slots    indexes whose members name other keys
#   {P}:pv:…, {P}:uv:…, {P}:rank:…, {P}:series:… (not series:cleaned), {P}:metrics:counted, {P}:deadletters
#                                                   increments: they move under partition 0's tag
#
# Everything else stayed under {P}: locks, jobs, the final-days cache, Kafka end offsets, the batch histogram
# and members, series:cleaned.

_VERSION1_MOVED = ("pv:", "uv:", "rank:", "series:known", "series:", "metrics:counted", "deadletters")
_VERSION1_STAYS = ("series:cleaned",)


class Version1Key(NamedTuple):
    """What a key of version 1 is to the upgrade: one of the ``VERSION1_*`` kinds below."""

    kind: str
    group: str = ""  # an offsets hash's consumer group and topic
    topic: str = ""


VERSION1_OFFSETS = "offsets"  # the hash partition -> next offset of a group and topic
VERSION1_FENCE = "fence"  # a partition's fence: gone, the offset key is the fence now
VERSION1_INDEX = "index"  # a set or sorted set whose members name other keys that move
VERSION1_MOVED = "moved"  # increments that move under partition 0's tag
VERSION1_STAYS = "stays"  # a key of version 1 still where it was


def version1_pattern() -> str:
    return f"{prefix()}:*"


def version1_key(key: str) -> Version1Key:
    """Return what ``key``, a key of version 1 (under ``{P}``), is to the upgrade."""
    rest = key[len(prefix()) + 1 :]
    if rest.startswith("offsets:"):
        # A source may hold colons (file:PATH); the group ids the product uses do not.
        group, topic = rest.removeprefix("offsets:").split(":", 1)
        return Version1Key(VERSION1_OFFSETS, group, topic)
    if rest.startswith("fence:"):
        return Version1Key(VERSION1_FENCE)
    if rest.startswith(_VERSION1_STAYS) or not rest.startswith(_VERSION1_MOVED):
        return Version1Key(VERSION1_STAYS)
    if (
        rest == "pv:index"
        or rest.startswith("uv:index:")
        or (rest.startswith("rank:") and rest.endswith(":slots"))
    ):
        return Version1Key(VERSION1_INDEX)
    return Version1Key(VERSION1_MOVED)


def version1_moved(key: str) -> str:
    """The name a key of version 1 that Kafka partitions increment has now: under partition 0's tag."""
    return partition_tag(0) + key[len(prefix()) :]
