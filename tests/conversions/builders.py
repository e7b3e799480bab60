"""Orders, their events and ledger entries built straight with the models, with the amounts a test states.

The recording code writes these rows in production; the read side's tests build exactly the rows they reason
about, so every expected number is written from the inputs here.
"""

import datetime as dt
import itertools
from decimal import Decimal

from conversions.models import LedgerEntry, Order, OrderEvent
from cpsproject.common.timeutil import local_day
from partners.models import Partner

_ids = itertools.count(1)


def make_order(
    order_id: str,
    *,
    partner: Partner | None,
    paid_at: dt.datetime,
    amount: int,
    openid: str = "o-1",
    currency: str = "CNY",
    rate: str = "1",
    amount_reporting: int | None = None,
    commission_bp: int = 500,
) -> Order:
    """A paid order of ``partner`` (its path of now), with its ``paid`` event."""
    order = Order.objects.create(
        order_id=order_id,
        openid=openid,
        partner=partner,
        path=partner.path if partner else "",
        attribution=Order.Attribution.EXPLICIT if partner else Order.Attribution.NONE,
        commission_bp=commission_bp,
        chain=[],
        currency=currency,
        amount=amount,
        rate=Decimal(rate),
        rate_valid_from=local_day(paid_at),
        amount_reporting=amount if amount_reporting is None else amount_reporting,
        paid_event_id=f"paid-{order_id}",
        paid_at=paid_at,
        paid_date=local_day(paid_at),
    )
    OrderEvent.objects.create(
        event_id=order.paid_event_id,
        order=order,
        status=OrderEvent.Status.PAID,
        ts=paid_at,
        date=local_day(paid_at),
        amount=amount,
        amount_reporting=order.amount_reporting,
    )
    return order


def refund(
    order: Order,
    *,
    ts: dt.datetime,
    amount: int,
    amount_reporting: int | None = None,
    status: str = OrderEvent.Status.REFUNDED,
) -> OrderEvent:
    return OrderEvent.objects.create(
        event_id=f"refund-{next(_ids)}",
        order=order,
        status=status,
        ts=ts,
        date=local_day(ts),
        amount=amount,
        amount_reporting=amount if amount_reporting is None else amount_reporting,
    )


def ledger(
    order: Order,
    partner: Partner,
    amount: int,
    *,
    ts: dt.datetime,
    booked: dt.date | None = None,
    reason: str = LedgerEntry.Reason.COMMISSION,
    share_bp: int = 10_000,
) -> LedgerEntry:
    return LedgerEntry.objects.create(
        order=order,
        partner=partner,
        amount=amount,
        reason=reason,
        share_bp=share_bp,
        source_event_id=f"src-{next(_ids)}",
        event_ts=ts,
        event_date=local_day(ts),
        booked_date=booked or local_day(ts),
    )
