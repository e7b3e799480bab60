"""The ``pv`` counter of ``quality``: each partner-day's signals, counted with the partition's offset.

Per Kafka partition's share of a batch, views are added up in memory (``DayTally``), then queued on
``writes.fenced`` under the partition's tag, so they move in one MULTI/EXEC with its next offset and count
exactly once through a consumer killed at any point: one ``signals.lua`` call for all the partner-days of
the partition's share, its arguments plain strings, that adds the counts and each address's views. A
partner-day gets a few views per batch, so a call per partner-day or a command per view cost Redis more than
the writes themselves (``bench/quality_cost.md``). The index members go on ``writes.idempotent`` in one SADD (a
replay adds nothing).

Repeat views are found here, in the consumer's memory (``RecentViews``), and reach Redis as one more count:
each buyer's latest view per partner-day, of the partition's last ``REPEAT_SECONDS`` or so, is all a repeat
is compared with. Repeats are exact within a partition for views that arrive in time order while one
consumer holds it; a buyer whose views land on two partitions, a view that arrives after a later one, and the
first ``REPEAT_SECONDS`` after a restart, a rebalance or a batch read again, are counted by the exact recount
(``recount``) only.
"""

import datetime as dt
import threading
from collections.abc import Sequence
from typing import Any

from cpsproject.common.lua import TO_HASHTABLE, LuaScript
from cpsproject.common.timeutil import BatchClock
from quality import keys
from quality.conf import quality_setting
from quality.networks import listed_ranges
from quality.signals import client_address, listed_crawler
from quality.tally import DayTally, quarter_of
from stats.plugins import CounterWrites, Event

_signals = LuaScript(__file__, "signals.lua", include=[TO_HASHTABLE])


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


class RecentViews:
    """One Kafka partition's buyers' latest views, per partner-day, as far back as a repeat can reach.

    ``newer`` and ``older`` map (partner code, day stamp) -> openid -> epoch seconds of its latest view. Views
    are written to ``newer``; once the partition's event time (``watermark``: its latest view, no later than
    the batch's moment, so that a client clock ahead moves nothing) is a window past the moment ``newer`` was
    started (``since``), ``older`` is dropped and ``newer`` becomes it. What is dropped is older than the
    window before any view still to come in time order, so memory holds about two windows of the partition's
    buyers and a view in order is still compared with its buyer's latest one.

    ``next_offset`` is the offset the next batch must start at to follow the views held: a batch read again
    (a seek back after a stale batch or a rebalance, a counter rebuilt) starts elsewhere, and the views are
    forgotten rather than compared with themselves.
    """

    __slots__ = ("lock", "next_offset", "newer", "older", "since", "watermark")

    def __init__(self) -> None:
        # The consumer builds a batch's counters while the counting thread may rebuild the batch's before.
        self.lock = threading.Lock()
        self.forget()

    def forget(self) -> None:
        self.next_offset: int | None = None
        self.newer: dict[tuple[str, str], dict[str, int]] = {}
        self.older: dict[tuple[str, str], dict[str, int]] = {}
        self.since = 0
        self.watermark = 0

    def count_repeats(self, by_day: dict[tuple[str, str], DayTally], *, window: int, until: int) -> None:
        """Set each tally's ``repeats``: its views within ``window`` seconds after their buyer's latest view
        (the latest only moves forward); ``until``: the batch's moment in epoch seconds."""
        watermark = self.watermark
        empty: dict[str, int] = {}
        # Each second held once, not once per view: an int is 32 bytes of the ~120 a buyer's latest view costs.
        moments: dict[int, int] = {}
        for day_key, tally in by_day.items():
            if not tally.views:
                continue
            newer = self.newer.get(day_key)
            if newer is None:
                newer = self.newer[day_key] = {}
            older = self.older.get(day_key, empty)
            repeats = 0
            views = sorted(tally.views)
            for seconds, openid in views:
                latest = newer.get(openid)
                if latest is None:
                    latest = older.get(openid)
                if latest is None or seconds > latest:
                    newer[openid] = moments.setdefault(seconds, seconds)
                if latest is not None and latest <= seconds <= latest + window:
                    repeats += 1
            tally.repeats = repeats
            watermark = max(watermark, min(views[-1][0], until))
        self.watermark = watermark
        if watermark - window > self.since:
            self.older, self.newer, self.since = self.newer, {}, watermark


# Per partition tag: this process's memory of each partition's recent views.
_recent: dict[str, RecentViews] = {}


def count_repeats(
    writes: CounterWrites, by_day: dict[tuple[str, str], DayTally], *, now: dt.datetime
) -> None:
    """Set each tally's repeats, from the partition's recent views when ``writes`` comes with its offsets (a
    Kafka share), else within the share alone (tools, the bisection of a batch: no memory read or moved)."""
    window, until = quality_setting("REPEAT_SECONDS"), int(now.timestamp())
    first, following = writes.first_offset, writes.next_offset
    if first is None or following is None:
        RecentViews().count_repeats(by_day, window=window, until=until)
        return
    recent = _recent.get(writes.tag)
    if recent is None:
        recent = _recent.setdefault(writes.tag, RecentViews())
    with recent.lock:
        if recent.next_offset != first:
            recent.forget()
        recent.next_offset = None  # until done: a failure half-way leaves views no batch may follow
        recent.count_repeats(by_day, window=window, until=until)
        recent.next_offset = following


def _arguments(tally: DayTally) -> list[str | int]:
    """A partner-day's share of the script's arguments (see ``signals.lua``): the counts, ``pv`` first, and each
    address's views. Numbers go as text: Redis would format a Lua number back with ``%.17g``."""
    counts: list[str | int] = ["pv", str(tally.pv)]
    if tally.automated:
        counts += ("automated", str(tally.automated))
    if tally.listed:
        counts += ("listed", str(tally.listed))
    if tally.repeats:
        counts += ("repeats", str(tally.repeats))
    for quarter, views in tally.quarters.items():
        counts += (keys.quarter_field(quarter), str(views))
    addresses: list[str | int] = []
    for address, views in tally.addresses.items():
        addresses += (address, str(views))
    return [str(len(counts) // 2), str(len(addresses) // 2), *counts, *addresses]


def queue_quality(writes: CounterWrites, events: Sequence[Event], *, now: dt.datetime) -> None:
    """Queue the signals of one partition's ``pv`` events: one fenced script call for all its partner-days."""
    by_day = tallies(events) if events else {}
    # Even with no view: the partition's memory follows its offsets.
    count_repeats(writes, by_day, now=now)
    if not by_day:
        return
    tag = writes.tag
    day_keys: list[str] = []
    arguments: list[str | int] = [str(keys.DAY_TTL)]
    for (code, day), tally in by_day.items():
        day_keys += (keys.signals(tag, code, day), keys.addresses(tag, code, day))
        arguments += _arguments(tally)
    writes.idempotent.sadd(keys.index(), *(keys.index_member(day, tag, code) for code, day in by_day))
    writes.idempotent.expire(keys.index(), keys.INDEX_TTL)
    _signals.queue(writes.fenced, day_keys, arguments)
