"""Recording a batch's ``order`` events in the database: the recorder of the ingest pipeline (``apps.py``).

One transaction per batch, events in ``ts`` order:

- ``paid``: the order, attributed (explicit partner, else the buyer's last partner view), with the chain, the
  commission rate and the exchange rate of that moment; its event; one ledger entry per chain partner; then
  the refunds held for it. A second ``paid`` of an order changes nothing.
- ``refunded`` / ``cancelled``: the event and the ledger differences; held when its order is not known yet.

Set-based: a batch reads what it needs in a fixed number of queries (events seen, the orders it touches, locked,
with their refunds and ledger totals, the refunds held for the orders it pays, rates, closed months), works out
every row in memory in ``ts`` order, and writes each table in one insert, whatever its number of events: plain
rows, not model instances, through ``insert_rows`` (preparing values through ``bulk_create`` cost most of a
batch's CPU).

An event id seen before changes nothing, so a batch read again after a crash records nothing twice and refuses
the same events. A refund beyond what is left, or a ``paid`` with no rate in force, is refused (a dead letter).
"""

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from decimal import Decimal
from operator import attrgetter
from typing import NamedTuple

from django.db import IntegrityError, connection, transaction
from django.db.models import Model, Sum

from conversions import attribution, held, ledger
from conversions.attribution import View
from conversions.conf import conversion_setting
from conversions.events import CANCELLED, PAID, ParsedOrderEvent
from conversions.models import HeldRefund, LedgerEntry, Order, OrderEvent
from conversions.money import Rate, chain_shares, rates_on, to_reporting
from cpsproject.common import columns
from cpsproject.common.timeutil import local_day
from cpsproject.common.upsert import insert_rows
from partners.models import Partner
from stats.plugins import Event, Reason, Refusal

logger = logging.getLogger(__name__)

# A concurrent consumer that records the same order first makes this one's transaction fail on a unique key:
# recorded again, it finds that order and changes nothing.
_ATTEMPTS = 3


@dataclass
class _Lookups:
    """What a batch's events look up once: rates per (currency, day), partners per code, attributing views."""

    views: dict[str, View]
    partners: dict[str, Partner]
    rates: dict[tuple[str, dt.date], Rate | None]


@dataclass(slots=True)
class _Order:
    """The row of an order: read (locked) when an earlier batch recorded it, else inserted by this one (``pk``
    set once inserted). Plain values, no model instance: a batch holds hundreds."""

    order_id: str
    openid: str
    partner_id: int | None
    path: str
    attribution: str
    view_event_id: str
    view_ts: dt.datetime | None
    view_url: str
    commission_bp: int
    chain: list[dict[str, int]]
    currency: str
    amount: int
    rate: Decimal
    rate_valid_from: dt.date
    amount_reporting: int
    paid_event_id: str
    paid_at: dt.datetime
    paid_date: dt.date
    pk: int | None = None


_ORDER_FIELDS = tuple(f.name for f in fields(_Order) if f.name != "pk")
_order_values = attrgetter(*_ORDER_FIELDS)


class _NewEvent(NamedTuple):
    """An ``OrderEvent`` row to insert, its order's key read when it is written."""

    order: _Order
    event_id: str
    status: str
    ts: dt.datetime
    date: dt.date
    amount: int
    amount_reporting: int


_EVENT_FIELDS = ("order_id", *_NewEvent._fields[1:])


@dataclass
class _Known:
    """An order the batch refunds or pays: recorded before (locked) or by this batch, with what its refunds took
    back and each chain partner's ledger total, kept up to date as the batch's events are worked out."""

    order: _Order
    refunded: int = 0
    refunded_reporting: int = 0
    holds: dict[int, int] = field(default_factory=dict)


@dataclass
class _Rows:
    """What a batch writes, one insert per table."""

    closed: frozenset[dt.date]
    now: dt.datetime
    orders: list[_Order] = field(default_factory=list)
    events: list[_NewEvent] = field(default_factory=list)
    entries: list[ledger.NewEntry] = field(default_factory=list)
    held: list[HeldRefund] = field(default_factory=list)
    applied: list[HeldRefund] = field(default_factory=list)
    given_up: list[tuple[HeldRefund, str]] = field(default_factory=list)


def record_orders(
    events: Sequence[ParsedOrderEvent], *, batch: Mapping[str, Sequence[Event]]
) -> list[Refusal]:
    """Record ``events`` (``order`` events in ts order); return those refused, with reason and detail.

    The pipeline calls it with the ``order`` events only (``register_recorder(event_type="order")``).
    """
    lookups = _lookups(events, batch.get("pv", ()))
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            with transaction.atomic():
                ledger.books_open()  # first: a month being closed waits for this batch's entries
                return _record(events, lookups)
        except IntegrityError:
            if attempt == _ATTEMPTS:
                raise
            logger.info("orders recorded by another consumer meanwhile; recording the batch again")
    raise AssertionError("unreachable")


def _lookups(orders: Sequence[ParsedOrderEvent], batch_views: Sequence[Event]) -> _Lookups:
    to_attribute = [(o.event_id, o.openid, o.ts) for o in orders if o.status == PAID and o.partner is None]
    views = attribution.last_views(to_attribute, batch_views)
    codes = {o.partner.code for o in orders if o.partner} | {v.partner for v in views.values()}
    return _Lookups(
        views=views,
        partners=Partner.objects.in_bulk(codes, field_name="code"),
        rates=rates_on({(o.currency, local_day(o.ts)) for o in orders if o.status == PAID}),
    )


def _present(model: type[Model], field_name: str, values: Sequence[str]) -> set[str]:
    """The ``values`` that ``model``'s text column ``field_name`` holds, in one ``SELECT … IN``.

    Written out rather than ``filter(field__in=values)``, which prepares each of a batch's thousand ids
    through the field: three lookups of 1,000 ids cost 5.4 ms of CPU that way on MariaDB, 1.3 ms written out.
    """
    if not values:
        return set()
    quote = connection.ops.quote_name
    column = quote(columns.column(model, field_name))
    marks = ", ".join(["%s"] * len(values))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {column} FROM {quote(model._meta.db_table)} WHERE {column} IN ({marks})", values
        )
        return {row[0] for row in cursor.fetchall()}


def _unseen(orders: Sequence[ParsedOrderEvent]) -> list[ParsedOrderEvent]:
    """The batch's events whose id no earlier batch (nor an earlier event of this one) recorded or held."""
    ids = [o.event_id for o in orders]
    # A paid event is an OrderEvent row too (written with its order), so two tables hold every id seen.
    seen = _present(OrderEvent, "event_id", ids) | _present(HeldRefund, "event_id", ids)
    fresh = []
    for event in orders:
        if event.event_id not in seen:
            seen.add(event.event_id)
            fresh.append(event)
    return fresh


def _known(order_ids: set[str]) -> dict[str, _Known]:
    """The recorded orders among ``order_ids``, locked, with their refunds' totals and ledger holdings."""
    locked = Order.objects.select_for_update().filter(order_id__in=order_ids).order_by("pk")
    orders = {row[-1]: _Order(*row) for row in locked.values_list(*_ORDER_FIELDS, "pk")}
    if not orders:
        return {}
    totals = (
        OrderEvent.objects.filter(order__in=list(orders))
        .exclude(status=PAID)
        .values_list("order_id")
        .annotate(refunded=Sum("amount"), reporting=Sum("amount_reporting"))
    )
    refunds = {pk: (refunded, reporting) for pk, refunded, reporting in totals}
    holdings = ledger.holdings(orders.values())
    return {
        o.order_id: _Known(o, *refunds.get(pk, (0, 0)), holds=holdings.get(pk, {}))
        for pk, o in orders.items()
    }


def _waiting(order_ids: set[str]) -> dict[str, list[HeldRefund]]:
    """The refunds held for ``order_ids``, oldest ``ts`` first."""
    waiting: dict[str, list[HeldRefund]] = {}
    rows = HeldRefund.objects.filter(order_id__in=order_ids, applied_at=None, expired_at=None)
    for refund in rows.order_by("ts", "id"):
        waiting.setdefault(refund.order_id, []).append(refund)
    return waiting


def _record(orders: Sequence[ParsedOrderEvent], lookups: _Lookups) -> list[Refusal]:
    fresh = _unseen(orders)
    if not fresh:
        return []
    known = _known({o.order_id for o in fresh})
    paid = {o.order_id for o in fresh if o.status == PAID} - known.keys()
    waiting = _waiting(paid) if paid else {}
    rows = _Rows(
        closed=ledger.closed_months(min(local_day(o.ts) for o in fresh)), now=dt.datetime.now(dt.UTC)
    )
    refused = []
    for event in fresh:
        if event.status == PAID:
            detail = _paid(event, lookups, known, rows, waiting)
        else:
            detail = _refund(event, known, rows, waiting)
        if detail:
            refused.append(Refusal(event, Reason.BAD_FIELD, detail))
    _write(rows)
    return refused


def _write(rows: _Rows) -> None:
    """Insert the batch's rows, orders first (the insert returns their keys), then what refers to them."""
    ids = insert_rows(
        Order, _ORDER_FIELDS, list(map(_order_values, rows.orders)), now=rows.now, key="order_id"
    )
    for order in rows.orders:
        order.pk = ids[order.order_id]
    events = [(event.order.pk, *event[1:]) for event in rows.events]
    insert_rows(OrderEvent, _EVENT_FIELDS, events, now=rows.now)
    # Held refunds are few (a refund counted before its payment): model instances, their keys for give_up.
    HeldRefund.objects.bulk_create([r for r in rows.held if r.pk is None])
    HeldRefund.objects.filter(pk__in=[r.pk for r in rows.applied]).update(applied_at=rows.now)
    for refund, detail in rows.given_up:
        held.give_up(refund, detail=detail, now=rows.now)
    ledger.append_entries(rows.entries, now=rows.now)


def _chain(partner: Partner) -> list[dict[str, int]]:
    """[attributed, parent, grandparent] partner ids with their shares (bp), from the tree of this moment."""
    ids = [partner.pk, *reversed(partner.ancestor_ids)]
    shares = chain_shares(len(ids), conversion_setting("COMMISSION_SHARES"))
    return [{"partner": pk, "share_bp": share} for pk, share in zip(ids, shares, strict=True)]


def _commission_bp(partner: Partner) -> int:
    if partner.commission_bp is not None:
        return partner.commission_bp
    return conversion_setting("COMMISSION_BP")[partner.level - 1]


def _paid(
    event: ParsedOrderEvent,
    lookups: _Lookups,
    known: dict[str, _Known],
    rows: _Rows,
    waiting: dict[str, list[HeldRefund]],
) -> str:
    """Work out a ``paid`` event's rows, then those of the refunds held for it; return why it is refused, or ""."""
    if event.order_id in known:
        return ""  # a payment retried: the order stays as its first payment made it
    day = local_day(event.ts)
    rate = lookups.rates[event.currency, day]
    if rate is None:
        return f"no exchange rate of {event.currency} valid on or before {day}"
    order = _order(event, lookups, rate)
    known[event.order_id] = paid = _Known(order)
    rows.orders.append(order)
    rows.events.append(
        _NewEvent(order, event.event_id, PAID, event.ts, day, order.amount, order.amount_reporting)
    )
    if order.chain:
        entries = ledger.commission_entries(order, closed=rows.closed)
        rows.entries += entries
        for entry in entries:
            paid.holds[entry.partner_id] = paid.holds.get(entry.partner_id, 0) + entry.amount
    for refund in sorted(waiting.pop(event.order_id, []), key=lambda r: (r.ts, r.pk is None)):
        _apply_held(paid, refund, rows)
    return ""


def _apply_held(known: _Known, refund: HeldRefund, rows: _Rows) -> None:
    """Apply a refund held for ``known``'s order; one refused (beyond what is left) is given up on."""
    detail = refund_rows(
        known,
        rows,
        event_id=refund.event_id,
        status=refund.status,
        ts=refund.ts,
        amount=refund.amount,
        currency=refund.currency,
    )
    if detail:
        rows.given_up.append((refund, detail))
    elif refund.pk is None:
        refund.applied_at = rows.now  # held by this batch: inserted applied
    else:
        rows.applied.append(refund)


def _order(event: ParsedOrderEvent, lookups: _Lookups, rate: Rate) -> _Order:
    """The order of a ``paid`` event, attributed, with its chain and rates (not saved yet)."""
    view = lookups.views.get(event.event_id)
    code = event.partner.code if event.partner else view.partner if view else ""
    partner = lookups.partners.get(code)
    how = Order.Attribution.EXPLICIT if event.partner else Order.Attribution.VIEW if partner else None
    by_view = view if view and how == Order.Attribution.VIEW else None
    return _Order(
        order_id=event.order_id,
        openid=event.openid,
        partner_id=partner.pk if partner else None,
        path=partner.path if partner else "",
        attribution=(how or Order.Attribution.NONE).value,
        view_event_id=by_view.event_id if by_view else "",
        view_ts=by_view.ts if by_view else None,
        view_url=by_view.url if by_view else "",
        commission_bp=_commission_bp(partner) if partner else 0,
        chain=_chain(partner) if partner else [],
        currency=event.currency,
        amount=event.amount,
        rate=rate.value,
        rate_valid_from=rate.valid_from,
        amount_reporting=to_reporting(event.amount, currency=event.currency, rate=rate.value),
        paid_event_id=event.event_id,
        paid_at=event.ts,
        paid_date=local_day(event.ts),
    )


def _refund(
    event: ParsedOrderEvent, known: dict[str, _Known], rows: _Rows, waiting: dict[str, list[HeldRefund]]
) -> str:
    """Work out a refund's or cancellation's rows, or hold it for its order; return why it is refused, or ""."""
    order = known.get(event.order_id)
    if order is None:
        refund = held.held_refund(event)
        rows.held.append(refund)
        waiting.setdefault(event.order_id, []).append(refund)
        return ""
    return refund_rows(
        order,
        rows,
        event_id=event.event_id,
        status=event.status,
        ts=event.ts,
        amount=event.amount,
        currency=event.currency,
    )


def refund_rows(
    known: _Known, rows: _Rows, *, event_id: str, status: str, ts: dt.datetime, amount: int, currency: str
) -> str:
    """Work out a refund (``amount``) or a cancellation (what is left) of ``known``'s order into ``rows``;
    return why it is refused, or "". The one refund rule, for live and held refunds."""
    order = known.order
    if currency and currency != order.currency:
        return f"refund in {currency} of order {order.order_id!r} paid in {order.currency}"
    left = order.amount - known.refunded
    left_reporting = order.amount_reporting - known.refunded_reporting
    if status == CANCELLED:
        amount = left
    elif amount > left:
        return f"refund of {amount} {order.currency} is beyond the {left} left to refund of order {order.order_id!r}"
    # The refund that empties the order takes exactly what is left, so per-event rounding never leaves a net
    # below zero or a cent behind.
    reporting = (
        left_reporting
        if amount == left
        else min(to_reporting(amount, currency=order.currency, rate=order.rate), left_reporting)
    )
    known.refunded += amount
    known.refunded_reporting += reporting
    rows.events.append(_NewEvent(order, event_id, status, ts, local_day(ts), amount, reporting))
    if order.chain:
        reason = (LedgerEntry.Reason.CANCELLATION if status == CANCELLED else LedgerEntry.Reason.REFUND).value
        entries = ledger.difference_entries(
            order,
            known.holds,
            net_reporting=left_reporting - reporting,
            reason=reason,
            event_id=event_id,
            ts=ts,
            closed=rows.closed,
        )
        rows.entries += entries
        for entry in entries:
            known.holds[entry.partner_id] = known.holds.get(entry.partner_id, 0) + entry.amount
    return ""


def apply_held_refunds(order: Order, refunds: Sequence[HeldRefund], *, now: dt.datetime) -> int:
    """Apply held ``refunds`` of a recorded, locked ``order`` (oldest first) and write their rows; one refused
    is given up on. Return how many were applied. ``settle_held_refunds`` calls it, one order at a time."""
    known = _known({order.order_id})[order.order_id]
    rows = _Rows(closed=ledger.closed_months(min(local_day(r.ts) for r in refunds)), now=now)
    for refund in refunds:
        _apply_held(known, refund, rows)
    _write(rows)
    return len(rows.applied)
