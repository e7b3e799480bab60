"""Every Redis key of ``quality``: the one module that builds them.

``{P}`` is the shared prefix (``cpsproject.common.redis_keys``); ``{P:pN}`` is a Kafka partition's hash tag,
handed to the counter as ``CounterWrites.tag``. A partner-day's signals are increments, so they carry the tag
of the partition they were counted from and move in its MULTI/EXEC with its offset (exactly once); a day's
figure is the sum over the partitions (addresses: the union of their hashes)::

    {P:pN}:q:{code}:{yyyyMMdd}        hash  pv, automated, repeats, listed: the partner's own views that day,
                                            those a crawler list recognises, repeats, views from listed networks;
                                            q0..q95: views per quarter hour (at most 100 fields: a listpack)
    {P:pN}:q:{code}:{yyyyMMdd}:addr   hash  client address (canonical text) -> views that day (a hash, not a
                                            sorted set: nobody reads its order, and HINCRBY costs Redis less
                                            than ZINCRBY and half the memory)
    {P:pN}:q:{code}:{yyyyMMdd}:ips    zset  the same, as written before the hash; the flush still adds and
                                            deletes it, for the days counted across the upgrade
    {P:pN}:q:{code}:{yyyyMMdd}:last   hash  openid -> epoch seconds of its latest view through the partner that
                                            day, as written before the consumer compared repeats in its own
                                            memory; written no more, deleted with the day by the flush (or by
                                            its TTL)
    {P}:q:index                       set   "{yyyyMMdd}\\x1f{tag}\\x1f{code}": which partner-days each partition
                                            holds (SADD before the transaction: a replay adds nothing); the
                                            flush walks it with SSCAN, never KEYS
"""

from cpsproject.common.redis_keys import prefix

# Safety TTL of a partner-day's keys, set when a key is created (signals.lua): they are deleted once the day is
# reconciled, the last view a day takes comes within the 7 days of lateness, and past the archive's 35 days a
# day can be recounted no more (its row holds the last flush).
DAY_TTL = 40 * 86400
# The index is written by every batch; it outlives any silence of the consumers.
INDEX_TTL = 400 * 86400

SEPARATOR = "\x1f"  # partner codes and tags hold no control character


def signals(tag: str, code: str, day: str) -> str:
    return f"{tag}:q:{code}:{day}"


def quarter_field(quarter: int) -> str:
    return f"q{quarter}"


def addresses(tag: str, code: str, day: str) -> str:
    return f"{tag}:q:{code}:{day}:addr"


def addresses_sorted(tag: str, code: str, day: str) -> str:
    """The address sorted set of the code before the hash: read and deleted by the flush, written no more."""
    return f"{tag}:q:{code}:{day}:ips"


def last_views(tag: str, code: str, day: str) -> str:
    """The buyers' latest views before the consumer kept them in memory: deleted by the flush, written no more."""
    return f"{tag}:q:{code}:{day}:last"


def index() -> str:
    return f"{prefix()}:q:index"


def index_member(day: str, tag: str, code: str) -> str:
    return SEPARATOR.join((day, tag, code))


def parse_index_member(member: str) -> tuple[str, str, str]:
    """Return (day stamp, tag, code) of an index member."""
    day, tag, code = member.split(SEPARATOR, 2)
    return day, tag, code
