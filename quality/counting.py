"""The ``pv`` counter of ``quality``: each partner-day's signals, counted with the partition's offset.

Per Kafka partition's share of a batch, views are added up in memory (``DayTally``), then queued on
``writes.fenced`` under the partition's tag, so they move in one MULTI/EXEC with its next offset and count
exactly once through a consumer killed at any point: HINCRBY of the counts, ZINCRBY of each address's views,
and one ``repeats.lua`` call per partner-day that compares each buyer's view with its latest one. The index
member goes on ``writes.idempotent`` (SADD: a replay adds nothing).

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
from quality.tally import DayTally, quarter_of
from stats.plugins import CounterWrites, Event

_repeats = LuaScript(__file__, "repeats.lua")


def tallies(events: Sequence[Event]) -> dict[tuple[str, str], DayTally]:
    """Return the signals of ``events`` per (partner code, day stamp): partner page views only."""
    clock = BatchClock()
    listed = listed_ranges()
    by_day: dict[tuple[str, str], DayTally] = {}
    for event in events:
        lineage: Any = getattr(event, "lineage", None)
        if lineage is None:
            continue
        key = (lineage.code, clock.day_stamp(event.seconds))
        tally = by_day.get(key)
        if tally is None:
            tally = by_day[key] = DayTally()
        tally.add(
            seconds=event.seconds,
            quarter=quarter_of(event.seconds, clock.offset(event.seconds)),
            openid=getattr(event, "openid", ""),
            ua=getattr(event, "ua", ""),
            ip=getattr(event, "ip", ""),
            bot=getattr(event, "is_bot", False),
            listed=listed,
        )
    return by_day


def queue_quality(writes: CounterWrites, events: Sequence[Event], *, now: dt.datetime) -> None:
    """Queue each partner-day's signals of one partition's ``pv`` events (fenced increments)."""
    if not events:
        return
    window = quality_setting("REPEAT_SECONDS")
    tag = writes.tag
    by_day = tallies(events)
    for (code, day), tally in by_day.items():
        writes.idempotent.sadd(keys.index(), keys.index_member(day, tag, code))
        signals = keys.signals(tag, code, day)
        fenced = writes.fenced
        fenced.hincrby(signals, "pv", tally.pv)
        for quarter, views in tally.quarters.items():
            fenced.hincrby(signals, keys.quarter_field(quarter), views)
        fenced.expire(signals, keys.DAY_TTL)
        if tally.automated:
            fenced.hincrby(signals, "automated", tally.automated)
        if tally.listed:
            fenced.hincrby(signals, "listed", tally.listed)
        if tally.addresses:
            addresses = keys.addresses(tag, code, day)
            for address, views in tally.addresses.items():
                fenced.zincrby(addresses, views, address)
            fenced.expire(addresses, keys.DAY_TTL)
        if tally.views:
            pairs: list[str | int] = []
            for seconds, openid in sorted(tally.views):
                pairs += (openid, seconds)
            last_views = keys.last_views(tag, code, day)
            _repeats.queue(fenced, [last_views, signals], [window, *pairs])
            fenced.expire(last_views, keys.DAY_TTL)
    if by_day:
        writes.idempotent.expire(keys.index(), keys.INDEX_TTL)
