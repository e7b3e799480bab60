"""The final-days cache: the days of a partner that only a reconcile changes, a month per Redis string.

The one module that knows its keys (``keys.final_days``, ``keys.final_days_generation``, ``keys.final_union``)
and its formats. An entry is ``{generation}|{JSON}``: per day of the month, ``[pv, uv, pv_self, uv_self]`` once
reconciled, ``0`` for a day that ended beyond the lateness horizon with no row (zeros no event can change),
``null`` for any other day (read from SQL per request). The read side fills and reads it
(``stats.read.selectors``); a reconcile moves it to a new generation after each commit (``forget_all``), and the
generation is read in the same round trip as the entries, so no entry filled before a recount is read after it.

Beside the months, the union of a run of final days' HyperLogLogs (``read_union``, ``store_union``): a
distinct-user count over a long range merges a year of stored 12 KB blobs, which no request should read twice.
Tagged with the generation the same way.
"""

import datetime as dt
from typing import NamedTuple

import orjson
from django_redis import get_redis_connection

from cpsproject.common.timeutil import stamp_day, stamp_month
from stats import keys


class FinalDay(NamedTuple):
    """One day of an entry that no late event can change."""

    pv: int
    uv: int
    pv_self: int
    uv_self: int
    reconciled: bool  # False: no row, and past the lateness horizon (all zeros)


NO_TRAFFIC = FinalDay(0, 0, 0, 0, False)


class CachedMonths(NamedTuple):
    found: dict[dt.date, bytes]  # month -> its entry's days (``decode`` reads them)
    missing: list[dt.date]  # months to fill (``store``)
    generation: int  # the cache's generation as read with the entries: what ``store`` tags new entries with


def read(*, partner_id: int, months: list[dt.date]) -> CachedMonths:
    """Return the cached entries of ``months`` (first days) of the partner, read with the generation."""
    client = get_redis_connection("default")
    generation, *entries = client.mget(
        [keys.final_days_generation()] + [keys.final_days(partner_id, stamp_month(month)) for month in months]
    )
    tag = b"%d|" % int(generation or 0)
    found, missing = {}, []
    for month, entry in zip(months, entries, strict=True):
        if entry and entry.startswith(tag):
            found[month] = entry[len(tag) :]
        else:
            missing.append(month)
    return CachedMonths(found, missing, int(generation or 0))


def _day_json(day: FinalDay | None) -> list[int] | int | None:
    if day is None:
        return None
    return [day.pv, day.uv, day.pv_self, day.uv_self] if day.reconciled else 0


def store(
    *, partner_id: int, months: dict[dt.date, list[FinalDay | None]], generation: int
) -> dict[dt.date, bytes]:
    """Store each month's days (None: not final) as of ``generation``; return them as ``read`` finds them."""
    encoded = {month: orjson.dumps([_day_json(day) for day in days]) for month, days in months.items()}
    tag = b"%d|" % generation
    pipe = get_redis_connection("default").pipeline(transaction=False)
    for month, entry in encoded.items():
        pipe.set(keys.final_days(partner_id, stamp_month(month)), tag + entry, ex=keys.final_days_ttl())
    pipe.execute()
    return encoded


def decode(entry: bytes) -> list[FinalDay | None]:
    """The days of an entry ``read`` found, from the month's first: None for a day that is not final."""
    return [
        None if numbers is None else FinalDay._make((*numbers, True)) if numbers else NO_TRAFFIC
        for numbers in orjson.loads(entry)
    ]


def final_mask(entry: bytes) -> list[bool]:
    """Which days of an entry ``read`` found are final, from the month's first: ``decode`` without the numbers."""
    return [numbers is not None for numbers in orjson.loads(entry)]


def read_union(*, partner_id: int, scope: str, first: dt.date, last: dt.date) -> tuple[bytes | None, int]:
    """Return the cached union of the partner's stored HyperLogLogs from ``first`` to ``last`` (None: not
    cached, or by an earlier generation), and the generation read with it (what ``store_union`` tags with)."""
    generation, entry = get_redis_connection("default").mget(
        [keys.final_days_generation(), keys.final_union(partner_id, scope, stamp_day(first), stamp_day(last))]
    )
    tag = b"%d|" % int(generation or 0)
    return (entry[len(tag) :] if entry and entry.startswith(tag) else None), int(generation or 0)


def store_union(
    *, partner_id: int, scope: str, first: dt.date, last: dt.date, union: bytes, generation: int
) -> None:
    """Cache ``union`` (HyperLogLog bytes, b"" when no day had a row) as of ``generation``."""
    get_redis_connection("default").set(
        keys.final_union(partner_id, scope, stamp_day(first), stamp_day(last)),
        b"%d|" % generation + union,
        ex=keys.final_days_ttl(),
    )


def forget_all() -> None:
    """Move the cache to a new generation: every entry is filled again from SQL."""
    pipe = get_redis_connection("default").pipeline(transaction=True)
    pipe.incr(keys.final_days_generation())
    pipe.expire(keys.final_days_generation(), keys.LONG_TTL)
    pipe.execute()
