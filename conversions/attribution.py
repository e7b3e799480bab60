"""Who sold an order: the buyer's last partner page view before it, within the attribution window.

Every partner page view with a buyer is remembered in Redis (``keys.views``): a hash per generation (the views
whose ts falls in one attribution window) and shard of buyers, field "{openid}\\x1f{partition}", value the last
``VIEWS_KEPT`` views of that buyer read from that Kafka partition, newest first. Several views are kept, not
one, because events arrive out of order: an order takes the latest view at or before its own ``ts``, not the
latest to arrive.

Why this shape (bench/README.md, "attribution views"): a sorted set per buyer cost three commands per buyer per
batch (ZADD, trim, EXPIRE), two thirds of the consumer's Redis commands and most of its CPU. Here a batch
reads its buyers' fields with one HMGET per hash, merges in Python and writes one HSET per hash; the TTL is the
hash's (one EXPIREAT per hash per batch), never a buyer's. A merge in a Lua script was measured at 3.4 µs of
Redis CPU a view, and blind writes without the read would lose the views of earlier batches.

The read and the write are one step of the batch (a recorder on ``pv`` events, ``remember_views``), which runs
after the batch before was applied; each field has one writer, the consumer of its partition, so no merge
overwrites another's (a consumer that lost its partition while it merged may still write once: the pipeline
drops a partition it knows to be stale before the recorders run, and the fence comes after them). A batch read
again merges the same views again: nothing changes. A batch's own views are also merged in memory when its
orders are attributed, whichever recorder runs first.
"""

import datetime as dt
import zlib
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from django_redis import get_redis_connection

from conversions import keys
from conversions.conf import conversion_setting
from cpsproject.common.timeutil import UTC
from stats.plugins import Event, Refusal

# Views kept per buyer and partition: enough for views that arrive after an order that came later than them.
VIEWS_KEPT = 4
# Characters of a view's URL kept to explain an order.
URL_LIMIT = 300
_FIELD = "\x1f"  # between a view's fields, and between a buyer and a partition; identifiers hold no control
_VIEW = "\x1e"  # between a buyer's views
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
_MS = dt.timedelta(milliseconds=1)
_DAY_MS = 86_400_000
# The partitions set lives as long as the longest product key: a consumer rewrites it every batch.
_PARTITIONS_TTL = 365 * 86_400


@dataclass(frozen=True, slots=True)
class View:
    """A partner page view that can attribute an order."""

    partner: str  # its partner code
    event_id: str
    url: str
    ts_ms: int

    @property
    def ts(self) -> dt.datetime:
        return _EPOCH + self.ts_ms * _MS

    @classmethod
    def from_record(cls, record: str) -> "View":
        ts, event_id, partner, url = record.split(_FIELD, 3)
        return cls(partner, event_id, url, int(ts))


def window() -> dt.timedelta:
    return dt.timedelta(days=conversion_setting("ATTRIBUTION_WINDOW_DAYS"))


def generation(ts_ms: int) -> int:
    """The generation of a view at ``ts_ms``: its epoch day divided by the window's days."""
    return ts_ms // (_DAY_MS * conversion_setting("ATTRIBUTION_WINDOW_DAYS"))


def shard(openid: str) -> int:
    return zlib.crc32(openid.encode()) % keys.VIEW_SHARDS


def field(openid: str, partition: int) -> str:
    return f"{openid}{_FIELD}{partition}"


def _url_of(payload: str) -> str:
    if '"url"' not in payload:  # most views carry none: no need to parse the payload
        return ""
    url = orjson.loads(payload).get("url")
    return url if isinstance(url, str) else ""


def partner_views(events: Iterable[Event], *, of: Container[str]) -> list[tuple[str, int, View]]:
    """Return (buyer, partition, view) for the page views that can attribute, of the buyers ``of``: a partner's,
    not a bot's. The buyers are checked first: a batch's orders have a few hundred buyers among its thousands
    of views, and a ``View`` built for each of them was a tenth of recording the orders."""
    views = []
    for event in events:
        openid: str = getattr(event, "openid", "")
        if openid not in of:
            continue
        lineage: Any = getattr(event, "lineage", None)
        if lineage is None or getattr(event, "is_bot", False):
            continue
        ts_ms = (event.ts - _EPOCH) // _MS
        url: str | None = getattr(event, "url", None)
        if url is None:  # an event shaped elsewhere (reconcile's archived views) carries only its payload
            url = _url_of(event.payload)
        view = View(lineage.code, event.event_id, url[:URL_LIMIT], ts_ms)
        views.append((openid, getattr(event, "partition", -1), view))
    return views


def _merged(records: str | list[str], stored: bytes | None) -> str:
    """The last ``VIEWS_KEPT`` of a batch's records (one, or a list) and the stored ones, newest first, each
    once."""
    if stored is None:
        if type(records) is str:
            return records
        return _VIEW.join(sorted(set(records), reverse=True)[:VIEWS_KEPT])
    ours = [records] if type(records) is str else records
    return _VIEW.join(sorted({*ours, *stored.decode().split(_VIEW)}, reverse=True)[:VIEWS_KEPT])


def _expires_at(generation: int) -> int:
    """Epoch seconds a window and a day after the generation ends: no order can take its views any more."""
    days = conversion_setting("ATTRIBUTION_WINDOW_DAYS")
    return ((generation + 2) * days + 1) * 86_400


def _batch_records(
    events: Sequence[Event],
) -> tuple[dict[tuple[int, int], dict[str, str | list[str]]], set[int]]:
    """Return the batch's partner views as records per hash (generation, shard) and field (one record, or a
    list of them), and the partitions they were read from. The loop of every view of a batch, measured at
    0.6 µs a page view: no object per view, and a list only for a buyer's second view."""
    span = _DAY_MS * conversion_setting("ATTRIBUTION_WINDOW_DAYS")
    grouped: dict[tuple[int, int], dict[str, str | list[str]]] = {}
    partitions = set()
    crc32, shards = zlib.crc32, keys.VIEW_SHARDS
    view: Any
    for view in events:
        lineage, openid = view.lineage, view.openid
        if lineage is None or not openid or view.is_bot:
            continue
        ts_ms = view.seconds * 1000 + view.ts.microsecond // 1000
        # ts first (13 digits from 2001 to 2286), so that records sort as (ts, event id): the newest first
        record = f"{ts_ms}{_FIELD}{view.event_id}{_FIELD}{lineage.code}{_FIELD}{view.url[:URL_LIMIT]}"
        where = (ts_ms // span, crc32(openid.encode()) % shards)
        fields = grouped.get(where)
        if fields is None:
            fields = grouped[where] = {}
        name = f"{openid}{_FIELD}{view.partition}"
        found = fields.get(name)
        if found is None:
            fields[name] = record
        elif isinstance(found, str):
            fields[name] = [found, record]
        else:
            found.append(record)
        partitions.add(view.partition)
    return grouped, partitions


def remember_views(events: Sequence[Event], *, batch: object = None) -> list[Refusal]:
    """The recorder on ``pv`` events: merge each partner view of a buyer into its field; refuse nothing."""
    grouped, partitions = _batch_records(events)
    if not grouped:
        return []
    client = get_redis_connection("default")
    reading = client.pipeline(transaction=False)
    for (gen, number), fields in grouped.items():
        reading.execute_command("HMGET", keys.views(gen, number), *fields)
    writing = client.pipeline(transaction=False)
    for ((gen, number), fields), stored in zip(grouped.items(), reading.execute(), strict=True):
        changed: list[str] = []
        for (name, records), old in zip(fields.items(), stored, strict=True):
            value = _merged(records, old)
            if old is None or value != old.decode():
                changed += (name, value)
        if changed:
            writing.execute_command("HSET", keys.views(gen, number), *changed)
            writing.expireat(keys.views(gen, number), _expires_at(gen))
    writing.sadd(keys.view_partitions(), *sorted(partitions))
    writing.expire(keys.view_partitions(), _PARTITIONS_TTL)
    writing.execute()
    return []


def _stored_views(buyers: dict[str, set[int]]) -> dict[str, set[View]]:
    """Return the remembered views of each buyer, from every partition, in the given generations; two round
    trips (the partitions, then one HMGET per hash)."""
    client = get_redis_connection("default")
    partitions = sorted(int(p) for p in client.smembers(keys.view_partitions()))
    seen: dict[str, set[View]] = {openid: set() for openid in buyers}
    if not partitions:
        return seen
    wanted: dict[tuple[int, int], list[str]] = {}
    for openid, generations in buyers.items():
        for gen in generations:
            wanted.setdefault((gen, shard(openid)), []).extend(field(openid, p) for p in partitions)
    pipe = client.pipeline(transaction=False)
    for (gen, number), fields in wanted.items():
        pipe.hmget(keys.views(gen, number), fields)
    for fields, values in zip(wanted.values(), pipe.execute(), strict=True):
        for name, value in zip(fields, values, strict=True):
            if value is not None:
                openid = name.rsplit(_FIELD, 1)[0]
                seen[openid].update(View.from_record(r) for r in value.decode().split(_VIEW))
    return seen


def last_views(
    orders: Sequence[tuple[str, str, dt.datetime]], batch_views: Iterable[Event]
) -> dict[str, View]:
    """Return, per order (event id, buyer, ts), the buyer's latest partner view at or before the order's ts
    and within the window, from Redis and the batch's own views."""
    if not orders:
        return {}
    span = window() // _MS
    buyers: dict[str, set[int]] = {}
    for _, openid, ts in orders:
        order_ms = (ts - _EPOCH) // _MS
        buyers.setdefault(openid, set()).update(range(generation(order_ms - span), generation(order_ms) + 1))
    seen = _stored_views(buyers)
    for openid, _, view in partner_views(batch_views, of=seen):
        seen[openid].add(view)
    found = {}
    for event_id, openid, ts in orders:
        order_ms = (ts - _EPOCH) // _MS
        fitting = [v for v in seen[openid] if order_ms - span <= v.ts_ms <= order_ms]
        if fitting:
            found[event_id] = max(fitting, key=lambda v: (v.ts_ms, v.event_id))
    return found
