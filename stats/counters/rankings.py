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
from dataclasses import dataclass

import orjson
from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common.timeutil import epoch, floor_local
from partners.selectors import Lineage
from stats import keys
from stats.conf import stats_setting
from stats.counters.tally import PageViewTally

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


# KEYS: the window-scope's slot index and totals, then its slot hashes. ARGV: the safety TTL, then JSON: each
# slot's start epoch, then (slot number, partner, PV) triples. Slot and total move together, so totals == sum
# of live slots. The numbers travel as JSON (see ``stats.counters.hincrby``).
_ADD_TO_SLOTS = """
local starts, triples = cjson.decode(ARGV[2]), cjson.decode(ARGV[3])
for i = 1, #triples, 3 do
  redis.call('HINCRBY', KEYS[2 + triples[i]], triples[i + 1], triples[i + 2])
  redis.call('ZINCRBY', KEYS[2], triples[i + 2], triples[i + 1])
end
for i = 1, #starts do
  redis.call('ZADD', KEYS[1], starts[i], KEYS[2 + i])
  redis.call('EXPIRE', KEYS[2 + i], ARGV[1])
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[1])
return #triples / 3
"""


def queue_rankings(pipe, tally: PageViewTally, *, now: dt.datetime) -> None:
    """Queue slot and total increments for every window and scope; expire due slots first."""
    expire = _expire_script(pipe)
    add = pipe.register_script(_ADD_TO_SLOTS)
    clock = tally.clock
    seconds = {second for _, second in tally.humans}
    for window in windows().values():
        oldest = window.oldest_live_slot(now)
        ttl = keys.ranking_ttl(window.slot_seconds, window.slots)
        slot_of = {second: clock.floor(second, window.slot_seconds) for second in seconds}
        # A batch spans a slot or two: count per partner and slot first, so the fan-out to ancestors runs once
        # per partner-slot.
        per_slot: Counter[tuple[Lineage, int]] = Counter()
        for (lineage, second), n in tally.humans.items():
            if lineage is not None:
                per_slot[(lineage, slot_of[second])] += n
        # scope -> slot start -> partner -> PV
        counts = {scope: defaultdict(Counter) for scope in SCOPES}
        for (lineage, slot), n in per_slot.items():
            if slot < oldest:
                continue  # already outside the window
            counts["self"][slot][lineage.code] += n
            tree = counts["tree"][slot]
            for code in lineage.codes:
                tree[code] += n
        for scope in SCOPES:
            index, total = keys.ranking_slots(window.name, scope), keys.ranking_total(window.name, scope)
            expire(keys=[index, total], args=[oldest], client=pipe)
            by_slot = counts[scope]
            if not by_slot:
                continue
            slot_keys = [keys.ranking_slot(window.name, scope, slot) for slot in by_slot]
            triples: list[int | str] = []
            for number, partners in enumerate(by_slot.values(), 1):
                for code, amount in partners.items():
                    triples += (number, code, amount)
            args = [ttl, orjson.dumps(list(by_slot)), orjson.dumps(triples)]
            add(keys=[index, total, *slot_keys], args=args, client=pipe)


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
