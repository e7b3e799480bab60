"""The commission ledger: what an order's events append, never an edit.

A ``paid`` event appends one ``COMMISSION`` entry per chain partner: its share of the commission of the paid
amount. A refund or cancellation appends, per partner, its share of the commission of the new net minus what
its entries already hold (nothing when that is zero), so each partner's entries of an order always add up to
its share of the commission of the order's current net.
"""

import datetime as dt
from collections import defaultdict

from django.db.models import Sum

from conversions.models import LedgerEntry, MonthClose, Order
from conversions.money import commission, split
from cpsproject.common.timeutil import local_day


def booked_date(event_date: dt.date) -> dt.date:
    """Return the event's business day, or the first day of the first month after it not closed yet."""
    month = event_date.replace(day=1)
    closed = set(MonthClose.objects.filter(month__gte=month).values_list("month", flat=True))
    if month not in closed:
        return event_date
    while month in closed:
        month = (month + dt.timedelta(days=32)).replace(day=1)
    return month


def chain_parts(order: Order, net_reporting: int) -> list[tuple[int, int, int]]:
    """Return (partner id, share bp, amount) of each chain partner for an order net of ``net_reporting``."""
    shares = [link["share_bp"] for link in order.chain]
    amounts = split(commission(net_reporting, order.commission_bp), shares)
    return [
        (link["partner"], link["share_bp"], amount) for link, amount in zip(order.chain, amounts, strict=True)
    ]


def _entries(
    order: Order, parts: list[tuple[int, int, int]], *, reason: str, event_id: str, ts: dt.datetime
) -> list[LedgerEntry]:
    day = local_day(ts)
    booked = booked_date(day)
    return [
        LedgerEntry(
            order=order,
            partner_id=partner_id,
            amount=amount,
            reason=reason,
            share_bp=share_bp,
            source_event_id=event_id,
            event_ts=ts,
            event_date=day,
            booked_date=booked,
        )
        for partner_id, share_bp, amount in parts
    ]


def append_commission(order: Order) -> None:
    """Append the ``paid`` event's entries: each chain partner's share of the commission of the paid amount."""
    parts = chain_parts(order, order.amount_reporting)
    LedgerEntry.objects.bulk_create(
        _entries(
            order, parts, reason=LedgerEntry.Reason.COMMISSION, event_id=order.paid_event_id, ts=order.paid_at
        )
    )


def append_difference(
    order: Order, *, net_reporting: int, reason: str, event_id: str, ts: dt.datetime
) -> None:
    """Append, per chain partner, its share of the commission of ``net_reporting`` minus what it holds."""
    held: dict[int, int] = defaultdict(int)
    for partner_id, total in (
        LedgerEntry.objects.filter(order=order).values_list("partner_id").annotate(total=Sum("amount"))
    ):
        held[partner_id] = total
    changes = [
        (partner_id, share_bp, amount - held[partner_id])
        for partner_id, share_bp, amount in chain_parts(order, net_reporting)
        if amount != held[partner_id]
    ]
    LedgerEntry.objects.bulk_create(_entries(order, changes, reason=reason, event_id=event_id, ts=ts))
