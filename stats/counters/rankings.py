"""Sliding-window partner rankings (second design document), without its races.

Per Kafka partition, window and scope: one hash per time slot (partner -> PV in the slot) and a zset indexing
the slot keys by start, all under the partition's hash tag. A batch increments the slots it touches in the
partition's MULTI/EXEC, nothing else: a ranking sums each partition's live slots when it is read
(``rankings_read.lua``, one reply per partition) and adds the partitions up in Python, so there is no running
total to keep equal to the slots. The design document's totals zset cost a ZINCRBY per partner and slot on
every batch (a fifth of Redis' CPU per event) for an order no read used: a ranking sorts in Python anyway.
Rotation (deleting the slots that left the window) only frees memory; it runs in every consumer batch (one
ZRANGEBYSCORE when nothing expired) and every minute from django-q2. The Lua sources sit beside this file.
"""

import datetime as dt
from collections import Counter, defaultdict
from dataclasses import dataclass

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
_READ_LIVE_SLOTS = LuaScript(__file__, "rankings_read.lua")


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
    """Queue the slot increments of every window and scope on ``writes.fenced``; expire due slots first."""
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
            _EXPIRE_SLOTS.queue(pipe, keys=[index], args=[oldest])
            by_slot = counts[scope]
            if not by_slot:
                continue
            slot_keys = [keys.ranking_slot(partition, window.name, scope, slot) for slot in by_slot]
            # Partner codes hold no space (partners.models.CODE_VALIDATOR): the triples travel as one string.
            triples = " ".join(
                f"{number} {code} {amount}"
                for number, partners in enumerate(by_slot.values(), 1)
                for code, amount in partners.items()
            )
            _ADD_TO_SLOTS.queue(
                pipe, keys=[index, *slot_keys], args=[ttl, " ".join(map(str, by_slot)), triples]
            )


def rotate(window: Window, *, now: dt.datetime | None = None, client: RedisClient | None = None) -> int:
    """Expire every slot of ``window`` that fell out of it, in every partition; return how many expired."""
    client = client or get_redis_connection("default")
    oldest = window.oldest_live_slot(now or timezone.now())
    pipe = client.pipeline(transaction=False)
    for partition in known_partitions(client):
        for scope in SCOPES:
            _EXPIRE_SLOTS.queue(pipe, keys=[keys.ranking_slots(partition, window.name, scope)], args=[oldest])
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
    oldest = windows()[window].oldest_live_slot(now or timezone.now())
    client = get_redis_connection("default")
    pipe = client.pipeline(transaction=False)
    partitions = known_partitions(client)
    for partition in partitions:
        _READ_LIVE_SLOTS.queue(pipe, keys=[keys.ranking_slots(partition, window, scope)], args=[oldest])
    summed: Counter[str] = Counter()
    for reply in pipe.execute() if partitions else []:
        for at in range(0, len(reply), 2):
            summed[reply[at].decode()] += int(reply[at + 1])
    totals = list(summed.items())
    if among is not None:
        totals = [(code, pv) for code, pv in totals if code in among]
    totals.sort(key=lambda item: (-item[1], item[0]))
    return [RankedPartner(rank, code, pv) for rank, (code, pv) in enumerate(totals[:limit], 1) if pv > 0]
