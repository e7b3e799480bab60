"""Sliding-window partner rankings (second design document), without its races.

Two scopes. **self** (a partner's own PV): per Kafka partition and window, one hash per time slot (partner ->
PV in the slot) and a zset indexing the slot keys by start, all under the partition's hash tag. A batch
increments the slots it touches in the partition's MULTI/EXEC, nothing else: a ranking sums each partition's
live slots when it is read (``rankings_read.lua``, one reply per partition) and adds the partitions up in
Python, so there is no running total to keep equal to the slots. The design document's totals zset cost a
ZINCRBY per partner and slot on every batch (a fifth of Redis' CPU per event) for an order no read used: a
ranking sorts in Python anyway. Rotation (deleting the slots that left the window) only frees memory; it runs
in every consumer batch (one ZRANGEBYSCORE when nothing expired) and every minute from django-q2.

**tree** (a partner's subtree PV) has no slots of its own: a window's slots are samples the series already
keep per partner subtree (``p:{code}`` at 300, 3,600 and 86,400 seconds, each view counted for the chain of its
moment), so the tree scope sums those. Its own slots were the same counts written a second time: 16 % of the
page-view counters' HINCRBYs, 6.8 % of all counters' Redis instructions (``bench/redis_cost.md``); a read of
it costs more instead (a script call per partner counter, not per slot). A window whose slot is not a series
precision kept at least as many samples as the window has slots is refused when read. Tree slots written by
an earlier version are left to their TTL. The Lua sources sit beside this file.
"""

import datetime as dt
from collections import Counter, defaultdict
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common.lua import LuaScript
from cpsproject.common.timeutil import epoch, floor_local
from stats import keys
from stats.conf import stats_setting
from stats.counters.series import partner_totals, precisions
from stats.counters.tally import PageViewTally
from stats.pipeline.partitions import known_partitions
from stats.pipeline.registry import CounterWrites, RedisClient

SLOTTED_SCOPE = "self"  # the one scope with slots of its own; "tree" reads the series

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
    """Queue the self scope's slot increments of every window on ``writes.fenced``; expire due slots first."""
    partition, pipe = writes.partition, writes.fenced
    clock = tally.clock
    seconds = {second for _, second in tally.humans}
    for window in windows().values():
        oldest = window.oldest_live_slot(now)
        ttl = keys.ranking_ttl(window.slot_seconds, window.slots)
        slot_of = {second: clock.floor(second, window.slot_seconds) for second in seconds}
        # A batch spans a slot or two: count per partner and slot first.
        by_slot: defaultdict[int, Counter[str]] = defaultdict(Counter)
        for (lineage, second), n in tally.humans.items():
            slot = slot_of[second]
            if lineage is not None and slot >= oldest:  # an older slot is outside the window already
                by_slot[slot][lineage.code] += n
        index = keys.ranking_slots(partition, window.name, SLOTTED_SCOPE)
        _EXPIRE_SLOTS.queue(pipe, keys=[index], args=[oldest])
        if not by_slot:
            continue
        slot_keys = [keys.ranking_slot(partition, window.name, SLOTTED_SCOPE, slot) for slot in by_slot]
        # Partner codes hold no space (partners.models.CODE_VALIDATOR): the triples travel as one string.
        triples = " ".join(
            f"{number} {code} {amount}"
            for number, partners in enumerate(by_slot.values(), 1)
            for code, amount in partners.items()
        )
        _ADD_TO_SLOTS.queue(pipe, keys=[index, *slot_keys], args=[ttl, " ".join(map(str, by_slot)), triples])


def rotate(window: Window, *, now: dt.datetime | None = None, client: RedisClient | None = None) -> int:
    """Expire every slot of ``window`` that fell out of it, in every partition; return how many expired."""
    client = client or get_redis_connection("default")
    oldest = window.oldest_live_slot(now or timezone.now())
    pipe = client.pipeline(transaction=False)
    for partition in known_partitions(client):
        _EXPIRE_SLOTS.queue(
            pipe, keys=[keys.ranking_slots(partition, window.name, SLOTTED_SCOPE)], args=[oldest]
        )
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
    now = now or timezone.now()
    spec = windows()[window]
    oldest = spec.oldest_live_slot(now)
    summed = _subtree_totals(spec, oldest, now) if scope == "tree" else _slot_totals(spec, scope, oldest)
    totals = list(summed.items())
    if among is not None:
        totals = [(code, pv) for code, pv in totals if code in among]
    totals.sort(key=lambda item: (-item[1], item[0]))
    return [RankedPartner(rank, code, pv) for rank, (code, pv) in enumerate(totals[:limit], 1) if pv > 0]


def _slot_totals(window: Window, scope: str, oldest: int) -> Counter[str]:
    client = get_redis_connection("default")
    pipe = client.pipeline(transaction=False)
    partitions = known_partitions(client)
    for partition in partitions:
        _READ_LIVE_SLOTS.queue(pipe, keys=[keys.ranking_slots(partition, window.name, scope)], args=[oldest])
    summed: Counter[str] = Counter()
    for reply in pipe.execute() if partitions else []:
        for at in range(0, len(reply), 2):
            summed[reply[at].decode()] += int(reply[at + 1])
    return summed


def _subtree_totals(window: Window, oldest: int, now: dt.datetime) -> Counter[str]:
    kept = precisions().get(window.slot_seconds, 0)
    if kept < window.slots:
        raise ImproperlyConfigured(
            f"CPS_STATS['SERIES_RETENTION'] must keep at least {window.slots} samples of "
            f"{window.slot_seconds} s, not {kept}: the {window.name} ranking's tree scope sums them"
        )
    # Up to the newest sample the consumer can have written: it takes events MAX_FUTURE_SECONDS ahead of its
    # clock, and the self scope's read counts their slots too.
    newest = epoch(now) + stats_setting("MAX_FUTURE_SECONDS")
    return partner_totals(precision=window.slot_seconds, since=oldest, until=newest)
