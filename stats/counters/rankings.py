"""Sliding-window partner rankings (second design document), without its races.

Per window and scope: one hash per time slot (partner -> PV in the slot), a zset of totals over the live
slots, and a zset indexing the slot keys by start. Increments touch slot and totals in the consumer's
MULTI/EXEC; expiring a slot (subtract its counts, drop members at ≤ 0, delete it) is one Lua script, so
``totals == sum of live slots`` holds between any two commands. Rotation runs in every consumer batch (cheap:
one ZRANGEBYSCORE when nothing expired), every minute from django-q2, and before every read, so a window whose
consumer sat idle for days is still right.
"""

import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common.timeutil import epoch, floor_local
from stats import keys
from stats.conf import stats_setting
from stats.counters.hincrby import queue_hincrby_many
from stats.pipeline.events import PageView

SCOPES = ("tree", "self")

# KEYS: slot index, totals. ARGV: oldest live slot start. Slot keys come from the index (same hash tag).
_EXPIRE_SLOTS = """
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])
for _, slot in ipairs(expired) do
  local counts = redis.call('HGETALL', slot)
  for i = 1, #counts, 2 do
    local left = tonumber(redis.call('ZINCRBY', KEYS[2], -tonumber(counts[i + 1]), counts[i]))
    if left <= 0 then redis.call('ZREM', KEYS[2], counts[i]) end
  end
  redis.call('DEL', slot)
  redis.call('ZREM', KEYS[1], slot)
end
return #expired
"""


@dataclass(frozen=True)
class Window:
    name: str
    slot_seconds: int
    slots: int

    def slot_of(self, moment: dt.datetime) -> int:
        return epoch(floor_local(moment, self.slot_seconds))

    def oldest_live_slot(self, now: dt.datetime) -> int:
        return self.slot_of(now) - (self.slots - 1) * self.slot_seconds


def windows() -> dict[str, Window]:
    return {name: Window(name, *spec) for name, spec in stats_setting("RANKING_WINDOWS").items()}


def _expire_script(client):
    return client.register_script(_EXPIRE_SLOTS)


def queue_rankings(pipe, views: Iterable[PageView], *, now: dt.datetime) -> None:
    """Queue slot and total increments for every window and scope; expire due slots first."""
    expire = _expire_script(pipe)
    counts: Counter[tuple[str, str, int, str]] = Counter()
    views = [v for v in views if v.lineage and not v.is_bot]
    for window in windows().values():
        oldest = window.oldest_live_slot(now)
        for scope in SCOPES:
            expire(
                keys=[keys.ranking_slots(window.name, scope), keys.ranking_total(window.name, scope)],
                args=[oldest],
                client=pipe,
            )
        for view in views:
            slot = window.slot_of(view.ts)
            if slot < oldest:
                continue  # already outside the window
            counts[(window.name, "self", slot, view.lineage.code)] += 1
            for code in view.lineage.codes:
                counts[(window.name, "tree", slot, code)] += 1
    slot_increments: dict[tuple[str, str], int] = {}
    totals: Counter[tuple[str, str, str]] = Counter()
    slots: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for (window_name, scope, slot, code), amount in counts.items():
        slot_key = keys.ranking_slot(window_name, scope, slot)
        slot_increments[(slot_key, code)] = amount
        totals[(window_name, scope, code)] += amount
        slots[(window_name, scope)][slot_key] = slot
    # Slot hashes and totals move in the same MULTI/EXEC, so totals always equal the sum of live slots.
    ttls = {name: keys.ranking_ttl(w.slot_seconds, w.slots) for name, w in windows().items()}
    # A slot key is "{P}:rank:{window}:...": its window names its TTL.
    queue_hincrby_many(
        pipe, slot_increments, ttl=lambda key: ttls[key.split(":rank:", 1)[1].split(":", 1)[0]]
    )
    for (window_name, scope, code), amount in totals.items():
        pipe.zincrby(keys.ranking_total(window_name, scope), amount, code)
    for (window_name, scope), slot_scores in slots.items():
        pipe.zadd(keys.ranking_slots(window_name, scope), slot_scores)
        pipe.expire(keys.ranking_slots(window_name, scope), ttls[window_name])
        pipe.expire(keys.ranking_total(window_name, scope), ttls[window_name])


def rotate(window: Window, *, now: dt.datetime | None = None, client=None) -> int:
    """Expire every slot of ``window`` that fell out of it; return how many slots were expired."""
    client = client or get_redis_connection("default")
    oldest = window.oldest_live_slot(now or timezone.now())
    expire = _expire_script(client)
    return sum(
        expire(keys=[keys.ranking_slots(window.name, s), keys.ranking_total(window.name, s)], args=[oldest])
        for s in SCOPES
    )


def rotate_all(*, now: dt.datetime | None = None) -> str:
    expired = sum(rotate(w, now=now) for w in windows().values())
    return f"expired {expired} ranking slots"


@dataclass(frozen=True)
class RankedPartner:
    rank: int
    partner: str
    pv: int


def top_partners(
    *,
    window: str,
    scope: str = "tree",
    limit: int = 10,
    among: set[str] | None = None,
    now: dt.datetime | None = None,
) -> list[RankedPartner]:
    """Return the top ``limit`` partners by PV over ``window`` (optionally only codes in ``among``)."""
    spec = windows()[window]
    client = get_redis_connection("default")
    rotate(spec, now=now, client=client)
    totals = [
        (member.decode(), int(score))
        for member, score in client.zrange(keys.ranking_total(window, scope), 0, -1, withscores=True)
    ]
    if among is not None:
        totals = [(code, pv) for code, pv in totals if code in among]
    totals.sort(key=lambda item: (-item[1], item[0]))
    return [RankedPartner(rank, code, pv) for rank, (code, pv) in enumerate(totals[:limit], 1) if pv > 0]
