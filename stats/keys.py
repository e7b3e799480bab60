"""Every Redis key of ``stats``, on the shared prefix ``{P}`` (see ``cpsproject.common.redis_keys``).

``NO_PARTNER`` (``~site``) stands for traffic with no partner wherever a partner code is expected: in keys, in
the archive and in day counts (partner codes start with a letter or digit, so it cannot collide).

PV and UV (first design document)::

    {P}:pv:{code}:{yyyyMMddHHmm}     hash   self, tree, bot -> counts in the 5-minute bucket; gen -> batch id
                                            that created the key (a key re-created after a flush is a new row)
    {P}:pv:index                     zset   bucket keys, score yyyyMMddHHmm (what flush walks)
    {P}:uv:{code}:{yyyyMMdd}:{scope} HLL    openids of the day; scope "self" or "tree"
    {P}:uv:index:{yyyyMMdd}          set    the UV keys of that day
    {P}:uv:days                      zset   days that have UV keys, score yyyyMMdd
    {P}:offsets:{group}:{topic}      hash   Kafka partition -> next offset to read (moves with the counters)
    {P}:fence:{group}:{topic}:{partition}  string  that partition's next offset again: the key an apply
                                            WATCHes, so a stale consumer's batch is refused (one key per
                                            partition: applies of other partitions do not disturb it)
    {P}:deadletters                  hash   reason -> dead letters counted
    {P}:kafka:ends:{topic}           hash   partition -> "{end} {first or -} {epoch}": the partition's end offset
                                            (and first offset) as a consumer's fetch or the lag probe last saw
                                            them, and when (``stats.pipeline.lag``)
    {P}:kafka:probe                  hash   at -> epoch of the last live lag probe; error -> "" if Kafka answered

Final days, a cache of what only a reconcile changes (``stats.read.selectors.partner_days``)::

    {P}:final:gen                    string generation of the cache; reconcile INCRs it after each commit, so no
                                            entry filled before that commit is read again
    {P}:final:{partner_id}:{yyyyMM}  string "{generation}|{JSON}": per day of the month the reconciled
                                            [pv, uv, pv_self, uv_self], 0 for a day that ended beyond the
                                            lateness horizon with no row, null for any other day (read from SQL)

Rankings (second design document)::

    {P}:rank:{window}:{scope}:slot:{epoch}  hash  partner code -> PV in that slot
    {P}:rank:{window}:{scope}:slots         zset  slot keys, score slot start epoch
    {P}:rank:{window}:{scope}:total         zset  partner code -> PV over the live slots

Time series (third design document)::

    {P}:series:known                 zset   "{precision}:{counter}" members, score 0; counters: "all"
                                            (every human PV) and "p:{code}" (a partner's subtree PV)
    {P}:series:{precision}:{counter} hash   sample start epoch -> count
    {P}:series:cleaned               hash   precision -> epoch of the last clean

Pipeline metrics (``stats.pipeline.metrics``; read at scrape time by ``stats.read.pipeline_status``)::

    {P}:metrics:counted              hash   "{type}:{source}" -> events counted (in the partition's MULTI/EXEC)
    {P}:metrics:batch_seconds        hash   bucket upper bound ("0.05", …, "+Inf") -> batches that took at most
                                            that long and more than the previous bound; "sum", "count"
    {P}:metrics:members:{group}      hash   consumer ("host:pid") -> "{since}|{reported}": Unix times since when
                                            it has held no partition ("-" while it holds some), and of its
                                            last report (every few seconds; an entry not renewed is a dead one)
"""

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


# --- PV / UV ------------------------------------------------------------------------------------------


def pv_bucket(code: str, stamp: str) -> str:
    return f"{prefix()}:pv:{code}:{stamp}"


def parse_pv_bucket(key: str) -> tuple[str, str]:
    """Return ``(code, yyyyMMddHHmm)`` of a bucket key."""
    code, stamp = key.rsplit(":", 2)[-2:]
    return code, stamp


def pv_index() -> str:
    return f"{prefix()}:pv:index"


def uv_day(code: str, day_stamp: str, scope: str) -> str:
    return f"{prefix()}:uv:{code}:{day_stamp}:{scope}"


def parse_uv_day(key: str) -> tuple[str, str, str]:
    """Return ``(code, yyyyMMdd, scope)`` of a UV key."""
    code, day_stamp, scope = key.rsplit(":", 3)[-3:]
    return code, day_stamp, scope


def uv_index(day_stamp: str) -> str:
    return f"{prefix()}:uv:index:{day_stamp}"


def uv_days() -> str:
    return f"{prefix()}:uv:days"


def offsets(group: str, topic: str) -> str:
    return f"{prefix()}:offsets:{group}:{topic}"


def offset_fence(group: str, topic: str, partition: int) -> str:
    return f"{prefix()}:fence:{group}:{topic}:{partition}"


def dead_letter_counts() -> str:
    return f"{prefix()}:deadletters"


def kafka_end_offsets(topic: str) -> str:
    return f"{prefix()}:kafka:ends:{topic}"


def kafka_probe() -> str:
    return f"{prefix()}:kafka:probe"


# --- Final days ---------------------------------------------------------------------------------------


def final_days_generation() -> str:
    return f"{prefix()}:final:gen"


def final_days(partner_id: int, month_stamp: str) -> str:
    return f"{prefix()}:final:{partner_id}:{month_stamp}"


# --- Rankings -----------------------------------------------------------------------------------------


def ranking_slot(window: str, scope: str, slot_epoch: int) -> str:
    return f"{prefix()}:rank:{window}:{scope}:slot:{slot_epoch}"


def ranking_slots(window: str, scope: str) -> str:
    return f"{prefix()}:rank:{window}:{scope}:slots"


def ranking_total(window: str, scope: str) -> str:
    return f"{prefix()}:rank:{window}:{scope}:total"


# --- Time series --------------------------------------------------------------------------------------


def series_known() -> str:
    return f"{prefix()}:series:known"


def series_member(precision: int, counter: str) -> str:
    return f"{precision}:{counter}"


def series_hash(precision: int, counter: str) -> str:
    return f"{prefix()}:series:{precision}:{counter}"


def series_hash_of_member(member: str) -> str:
    precision, counter = member.split(":", 1)
    return series_hash(int(precision), counter)


def series_cleaned() -> str:
    return f"{prefix()}:series:cleaned"


# --- Pipeline metrics ---------------------------------------------------------------------------------


def metrics_counted() -> str:
    return f"{prefix()}:metrics:counted"


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
