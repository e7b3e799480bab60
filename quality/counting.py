"""The ``pv`` counter of ``quality``: each partner-day's signals, counted with the partition's offset.

Per Kafka partition's share of a batch, views are added up in memory (``DayTally``), then queued on
``writes.fenced`` under the partition's tag, so they move in one MULTI/EXEC with its next offset and count
exactly once through a consumer killed at any point: one ``signals.lua`` call for all the partner-days of
the partition's share, its arguments plain strings, that adds the counts and each address's views and compares
each buyer's views with its latest one (one HMGET and one HSET per partner-day). A partner-day gets a few
views per batch, so a call per partner-day or a command per view cost Redis more than the writes themselves
(``bench/quality_cost.md``). The index members go on ``writes.idempotent`` in one SADD (a replay adds
nothing).

Repeats are exact within a partition for views that arrive in time order; a buyer whose views land on two
partitions, or a view that arrives after a later one, is counted by the exact recount (``recount``) only.
"""

import datetime as dt
from collections.abc import Sequence
from typing import Any

from cpsproject.common.lua import LuaScript
from cpsproject.common.timeutil import BatchClock
from quality import keys
from quality.conf import quality_setting
from quality.networks import listed_ranges
from quality.signals import client_address, listed_crawler
from quality.tally import DayTally, quarter_of
from stats.plugins import CounterWrites, Event

_signals = LuaScript(__file__, "signals.lua")


def tallies(events: Sequence[Event]) -> dict[tuple[str, str], DayTally]:
    """Return the signals of ``events`` per (partner code, day stamp): partner page views only.

    ``DayTally.add`` inlined: this loop runs for every page view the consumer counts. Business time is looked
    up once per quarter hour of epoch time (zone offsets are whole quarter hours).
    """
    clock = BatchClock()
    listed = listed_ranges()
    match_chars = quality_setting("UA_MATCH_CHARS")
    by_day: dict[tuple[str, str], DayTally] = {}
    slots: dict[int, tuple[str, int]] = {}
    for event in events:
        view: Any = event
        lineage = view.lineage if view.type == "pv" else None
        if lineage is None:
            continue
        seconds = view.seconds
        slot = slots.get(seconds // 900)
        if slot is None:
            slot = slots[seconds // 900] = (
                clock.day_stamp(seconds),
                quarter_of(seconds, clock.offset(seconds)),
            )
        key = (lineage.code, slot[0])
        tally = by_day.get(key)
        if tally is None:
            tally = by_day[key] = DayTally()
        tally.pv += 1
        tally.quarters[slot[1]] += 1
        if view.is_bot or (view.ua and listed_crawler(view.ua[:match_chars])):
            tally.automated += 1
        if view.ip and (parsed := client_address(view.ip)) is not None:
            tally.addresses[parsed[0]] += 1
            if listed and parsed[2] in listed:
                tally.listed += 1
        if view.openid:
            tally.views.append((seconds, view.openid))
    return by_day


def _arguments(tally: DayTally) -> list[str | int]:
    """A partner-day's share of the script's arguments (see ``signals.lua``): the counts, each address's views,
    each buyer's view times in time order. Numbers go as text: Redis would format a Lua number back with
    ``%.17g``."""
    counts: list[str | int] = ["pv", str(tally.pv)]
    if tally.automated:
        counts += ("automated", str(tally.automated))
    if tally.listed:
        counts += ("listed", str(tally.listed))
    for quarter, views in tally.quarters.items():
        counts += (keys.quarter_field(quarter), str(views))
    addresses: list[str | int] = []
    for address, views in tally.addresses.items():
        addresses += (address, str(views))
    times: dict[str, list[str]] = {}
    for seconds, openid in sorted(tally.views):
        times.setdefault(openid, []).append(str(seconds))
    buyers: list[str | int] = []
    for openid, seen in times.items():
        buyers += (openid, str(len(seen)), *seen)
    header = [str(len(counts) // 2), str(len(addresses) // 2), str(len(times))]
    return header + counts + addresses + buyers


def queue_quality(writes: CounterWrites, events: Sequence[Event], *, now: dt.datetime) -> None:
    """Queue the signals of one partition's ``pv`` events: one fenced script call for all its partner-days."""
    if not events:
        return
    tag = writes.tag
    by_day = tallies(events)
    if not by_day:
        return
    day_keys: list[str] = []
    arguments: list[str | int] = [str(quality_setting("REPEAT_SECONDS")), str(keys.DAY_TTL)]
    for (code, day), tally in by_day.items():
        day_keys += (
            keys.signals(tag, code, day),
            keys.addresses(tag, code, day),
            keys.last_views(tag, code, day),
        )
        arguments += _arguments(tally)
    writes.idempotent.sadd(keys.index(), *(keys.index_member(day, tag, code) for code, day in by_day))
    writes.idempotent.expire(keys.index(), keys.INDEX_TTL)
    _signals.queue(writes.fenced, day_keys, arguments)
