"""Sliding-window partner rankings (second design document), without its races.

Per Kafka partition, window and scope: one hash per time slot (partner -> PV in the slot), a zset of totals
over the live slots, and a zset indexing the slot keys by start, all under the partition's hash tag. Increments
touch slot and totals in the partition's MULTI/EXEC; expiring a slot (subtract its counts, drop members at ≤ 0,
delete it) is one Lua script, so ``totals == sum of live slots`` holds between any two commands. Rotation runs
in every consumer batch (cheap: one ZRANGEBYSCORE when nothing expired), every minute from django-q2, and
before every read, so a window whose consumer sat idle for days is still right. A ranking is the partitions'
totals added up in Python: ZUNIONSTORE cannot span slots, and a window holds one member per active partner.
The Lua sources sit beside this file.
"""

import datetime as dt
from collections import Counter, defaultdict
from dataclasses import dataclass

import orjson
from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common.lua import LuaScript
from cpsproject.common.timeutil import epoch, floor_local
from partners.selectors import Lineage
from stats import keys
from stats.conf import stats_setting
from stats.counters.tally import PageViewTally
from stats.pipeline.partitions import known_partitions
from stats.pipeline.registry import CounterWrites, RedisClient

SCOPES = ("tree", "self")

_EXPIRE_SLOTS = LuaScript(__file__, "rankings_expire.lua")
_ADD_TO_SLOTS = LuaScript(__file__, "rankings_add.lua")


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


def queue_rankings(writes: CounterWrites, tally: PageViewTally, *, now: dt.datetime) -> None:
    """Queue slot and total increments for every window and scope on ``writes.fenced``; expire due slots first."""
    partition, pipe = writes.partition, writes.fenced
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
        counts: dict[str, defaultdict[int, Counter[str]]] = {scope: defaultdict(Counter) for scope in SCOPES}
        for (lineage, slot), n in per_slot.items():
            if slot < oldest:
                continue  # already outside the window
            counts["self"][slot][lineage.code] += n
            tree = counts["tree"][slot]
            for code in lineage.codes:
                tree[code] += n
        for scope in SCOPES:
            index = keys.ranking_slots(partition, window.name, scope)
            total = keys.ranking_total(partition, window.name, scope)
            _EXPIRE_SLOTS.queue(pipe, keys=[index, total], args=[oldest])
            by_slot = counts[scope]
            if not by_slot:
                continue
            slot_keys = [keys.ranking_slot(partition, window.name, scope, slot) for slot in by_slot]
            triples: list[int | str] = []
            for number, partners in enumerate(by_slot.values(), 1):
                for code, amount in partners.items():
                    triples += (number, code, amount)
            args = [ttl, orjson.dumps(list(by_slot)), orjson.dumps(triples)]
            _ADD_TO_SLOTS.queue(pipe, keys=[index, total, *slot_keys], args=args)


def rotate(window: Window, *, now: dt.datetime | None = None, client: RedisClient | None = None) -> int:
    """Expire every slot of ``window`` that fell out of it, in every partition; return how many expired."""
    client = client or get_redis_connection("default")
    oldest = window.oldest_live_slot(now or timezone.now())
    pipe = client.pipeline(transaction=False)
    for partition in known_partitions(client):
        for scope in SCOPES:
            index = keys.ranking_slots(partition, window.name, scope)
            total = keys.ranking_total(partition, window.name, scope)
            _EXPIRE_SLOTS.queue(pipe, keys=[index, total], args=[oldest])
    return sum(pipe.execute())


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
    pipe = client.pipeline(transaction=False)
    for partition in known_partitions(client):
        pipe.zrange(keys.ranking_total(partition, window, scope), 0, -1, withscores=True)
    summed: Counter[str] = Counter()
    for reply in pipe.execute():
        for member, score in reply:
            summed[member.decode()] += int(score)
    totals = list(summed.items())
    if among is not None:
        totals = [(code, pv) for code, pv in totals if code in among]
    totals.sort(key=lambda item: (-item[1], item[0]))
    return [RankedPartner(rank, code, pv) for rank, (code, pv) in enumerate(totals[:limit], 1) if pv > 0]
