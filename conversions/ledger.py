"""The commission ledger: what an order's events append, never an edit.

A ``paid`` event appends one ``COMMISSION`` entry per chain partner: its share of the commission of the paid
amount. A refund or cancellation appends, per partner, its share of the commission of the new net minus what
its entries already hold (nothing when that is zero), so each partner's entries of an order always add up to
its share of the commission of the order's current net. Reversals of a confirmed traffic review
(``quality_reversal``, ``conversions.holds``) stand apart: each cancels one entry so that it is never paid, and
the difference a later refund appends leaves them out (it is then reversed as well, at the latest at the close).

Booking and closing a month keep in step through one row, ``LedgerGate``: a transaction that books entries
holds it in share mode from its first statement (``books_open``), ``close_month`` holds it exclusively while it
sums the month and closes it (``books_closed``). Bookings do not wait for one another; a close waits for the
bookings in flight to commit and holds new ones back until it has committed, so an entry dated in a month
being closed is either in its statement or booked into the first open month, never in neither.

Entries are appended as plain rows (``NewEntry``), one insert a batch (``cpsproject.common.upsert.insert_rows``,
which the recorder also writes its orders and order events with).
"""

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from django.db import connection
from django.db.models import Sum
from django.utils import timezone

from conversions.models import LedgerEntry, LedgerGate, MonthClose
from conversions.money import commission, split
from cpsproject.common.timeutil import local_day
from cpsproject.common.upsert import insert_rows

_GATE_ID = 1
# A shared row lock, as each backend spells it.
_SHARE_MODE = {"mysql": "LOCK IN SHARE MODE", "postgresql": "FOR SHARE"}


class Booked(Protocol):
    """An order as the ledger reads it: a recorded ``Order``, or one the recorder inserts with its batch (its
    ``pk`` set once inserted, before its entries are)."""

    @property
    def pk(self) -> Any: ...
    @property
    def chain(self) -> Any: ...  # [{"partner": id, "share_bp": bp}], the attributed partner first
    @property
    def commission_bp(self) -> int: ...
    @property
    def amount_reporting(self) -> int: ...
    @property
    def paid_event_id(self) -> str: ...
    @property
    def paid_at(self) -> dt.datetime: ...


class NewEntry(NamedTuple):
    """A ledger entry to append: a plain row, its order's key read when it is written."""

    order: Booked
    partner_id: int
    amount: int
    reason: str
    share_bp: int
    source_event_id: str
    event_ts: dt.datetime
    event_date: dt.date
    booked_date: dt.date


_ENTRY_FIELDS = NewEntry._fields[1:]


def _hold_gate(*, exclusive: bool) -> None:
    if connection.vendor == "sqlite":
        # No row locks: every SQLite transaction takes the database's write lock when it begins (settings:
        # transaction_mode IMMEDIATE), so a booking and a close already run one after the other.
        return
    table = connection.ops.quote_name(LedgerGate._meta.db_table)
    mode = "FOR UPDATE" if exclusive else _SHARE_MODE[connection.vendor]
    with connection.cursor() as cursor:
        for _ in range(2):
            cursor.execute(f"SELECT id FROM {table} WHERE id = %s {mode}", [_GATE_ID])
            if cursor.fetchone():
                return
            # The migration writes the row; a test database emptied by a flush lacks it until now.
            LedgerGate.objects.get_or_create(id=_GATE_ID)
    raise AssertionError("the ledger gate row is missing")


def books_open() -> None:
    """Hold the ledger gate in share mode until the transaction ends: the first statement of a transaction that
    books entries (taken later, after row locks of orders, it could deadlock with a close waiting for it)."""
    _hold_gate(exclusive=False)


def books_closed() -> None:
    """Hold the ledger gate exclusively until the transaction ends: bookings in flight have committed, and none
    starts before this transaction ends. ``close_month`` takes it before it reads anything."""
    _hold_gate(exclusive=True)


def closed_months(since: dt.date) -> frozenset[dt.date]:
    """The closed months from ``since``'s month on: read once per batch, after ``books_open``."""
    month = since.replace(day=1)
    return frozenset(MonthClose.objects.filter(month__gte=month).values_list("month", flat=True))


def booked_date(event_date: dt.date, closed: frozenset[dt.date] | None = None) -> dt.date:
    """Return the event's business day, or the first day of the first month after it not closed yet.

    ``closed``: the closed months from the event's month on (``closed_months``); read here when not given.
    """
    month = event_date.replace(day=1)
    if closed is None:
        closed = closed_months(month)
    if month not in closed:
        return event_date
    while month in closed:
        month = (month + dt.timedelta(days=32)).replace(day=1)
    return month


def chain_parts(order: Booked, net_reporting: int) -> list[tuple[int, int, int]]:
    """Return (partner id, share bp, amount) of each chain partner for an order net of ``net_reporting``."""
    shares = [link["share_bp"] for link in order.chain]
    amounts = split(commission(net_reporting, order.commission_bp), shares)
    return [
        (link["partner"], link["share_bp"], amount) for link, amount in zip(order.chain, amounts, strict=True)
    ]


def _entries(
    order: Booked,
    parts: list[tuple[int, int, int]],
    *,
    reason: str,
    event_id: str,
    ts: dt.datetime,
    closed: frozenset[dt.date],
) -> list[NewEntry]:
    day = local_day(ts)
    booked = booked_date(day, closed)
    return [
        NewEntry(order, partner_id, amount, reason, share_bp, event_id, ts, day, booked)
        for partner_id, share_bp, amount in parts
    ]


def commission_entries(order: Booked, *, closed: frozenset[dt.date]) -> list[NewEntry]:
    """The ``paid`` event's entries: each chain partner's share of the commission of the paid amount."""
    parts = chain_parts(order, order.amount_reporting)
    reason = LedgerEntry.Reason.COMMISSION.value
    return _entries(
        order, parts, reason=reason, event_id=order.paid_event_id, ts=order.paid_at, closed=closed
    )


def difference_entries(
    order: Booked,
    holds: Mapping[int, int],
    *,
    net_reporting: int,
    reason: str,
    event_id: str,
    ts: dt.datetime,
    closed: frozenset[dt.date],
) -> list[NewEntry]:
    """Per chain partner, its share of the commission of ``net_reporting`` minus what it ``holds`` (its
    entries' total for the order, by partner id)."""
    changes = [
        (partner_id, share_bp, amount - holds.get(partner_id, 0))
        for partner_id, share_bp, amount in chain_parts(order, net_reporting)
        if amount != holds.get(partner_id, 0)
    ]
    return _entries(order, changes, reason=reason, event_id=event_id, ts=ts, closed=closed)


def holdings(orders: Iterable[Booked]) -> dict[int, dict[int, int]]:
    """Each order's entries' total per partner: {order pk: {partner id: total}}, in one query.

    Reversals after a traffic review are left out: a later refund is the difference against what the order's
    commission entries hold, and the review reverses that refund in turn (``conversions.holds``).
    """
    held: dict[int, dict[int, int]] = defaultdict(dict)
    rows = (
        LedgerEntry.objects.filter(order__in=[order.pk for order in orders])
        .exclude(reason=LedgerEntry.Reason.QUALITY_REVERSAL)
        .values_list("order_id", "partner_id")
        .annotate(total=Sum("amount"))
    )
    for order_pk, partner_id, total in rows:
        held[order_pk][partner_id] = total
    return held


def append_entries(entries: Sequence[NewEntry], *, now: dt.datetime | None = None) -> None:
    """Append a batch's entries (their orders saved): one insert, never an edit."""
    rows = [(entry.order.pk, *entry[1:]) for entry in entries]
    insert_rows(LedgerEntry, ("order_id", *_ENTRY_FIELDS), rows, now=now or timezone.now())
