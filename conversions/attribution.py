"""Who sold an order: the buyer's last partner page view before it, within the attribution window.

Every partner page view with a buyer is remembered in the buyer's sorted set (``keys.buyer_views``), scored by
the view's ``ts``: a counter on ``pv`` events queues idempotent commands (ZADD of the same member and score
changes nothing the second time), trimmed to the last ``VIEWS_KEPT`` views, with a TTL of the window. Several
views are kept, not one, because events arrive out of order: an order takes the latest view at or before its
own ``ts``, not the latest to arrive. A batch's own views are merged in memory, as the recorders run before
the batch's counters reach Redis.
"""

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from django_redis import get_redis_connection

from conversions import keys
from conversions.conf import conversion_setting
from cpsproject.common.timeutil import UTC
from stats.plugins import CounterWrites, Event

# Views kept per buyer: enough for views that arrive after an order that came later than them.
VIEWS_KEPT = 4
# Characters of a view's URL kept to explain an order.
URL_LIMIT = 300
_SEPARATOR = "\x1f"  # identifiers hold no control character
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
_MS = dt.timedelta(milliseconds=1)


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

    def member(self) -> str:
        return _SEPARATOR.join((self.partner, self.event_id, self.url))

    @classmethod
    def from_member(cls, member: bytes | str, score: float) -> "View":
        text = member.decode() if isinstance(member, bytes) else member
        partner, event_id, url = text.split(_SEPARATOR, 2)
        return cls(partner, event_id, url, int(score))


def window() -> dt.timedelta:
    return dt.timedelta(days=conversion_setting("ATTRIBUTION_WINDOW_DAYS"))


def _url(payload: str) -> str:
    if '"url"' not in payload:  # most views carry none: no need to parse the payload again
        return ""
    url = orjson.loads(payload).get("url")
    return url[:URL_LIMIT] if isinstance(url, str) else ""


def partner_views(events: Iterable[Event]) -> list[tuple[str, View]]:
    """Return (buyer, view) for the page views that can attribute: a partner's, a buyer's, not a bot's."""
    views = []
    for event in events:
        lineage: Any = getattr(event, "lineage", None)
        openid: str = getattr(event, "openid", "")
        if lineage is None or not openid or getattr(event, "is_bot", False):
            continue
        ts_ms = (event.ts - _EPOCH) // _MS
        views.append((openid, View(lineage.code, event.event_id, _url(event.payload), ts_ms)))
    return views


def queue_views(writes: CounterWrites, events: Sequence[Event], *, now: dt.datetime) -> None:
    """The ``pv`` counter: remember each partner page view of a buyer (idempotent commands)."""
    ttl = int(window().total_seconds())
    touched: set[str] = set()
    pipe = writes.idempotent
    for openid, view in partner_views(events):
        key = keys.buyer_views(openid)
        pipe.zadd(key, {view.member(): view.ts_ms})
        touched.add(key)
    for key in touched:
        pipe.zremrangebyrank(key, 0, -VIEWS_KEPT - 1)
        pipe.expire(key, ttl)


def last_views(
    orders: Sequence[tuple[str, str, dt.datetime]], batch_views: Iterable[Event]
) -> dict[str, View]:
    """Return, per order (event id, buyer, ts), the buyer's latest partner view at or before the order's ts
    and within the window, from Redis (one round trip) and the batch's own views."""
    if not orders:
        return {}
    buyers = sorted({openid for _, openid, _ in orders})
    pipe = get_redis_connection("default").pipeline(transaction=False)
    for openid in buyers:
        pipe.zrange(keys.buyer_views(openid), 0, -1, withscores=True)
    seen: dict[str, set[View]] = {
        openid: {View.from_member(m, s) for m, s in rows}
        for openid, rows in zip(buyers, pipe.execute(), strict=True)
    }
    for openid, view in partner_views(batch_views):
        if openid in seen:
            seen[openid].add(view)
    span = window() // _MS
    found = {}
    for event_id, openid, ts in orders:
        order_ms = (ts - _EPOCH) // _MS
        fitting = [v for v in seen[openid] if order_ms - span <= v.ts_ms <= order_ms]
        if fitting:
            found[event_id] = max(fitting, key=lambda v: (v.ts_ms, v.event_id))
    return found
