"""Recording a batch's ``order`` events in the database: the recorder of the ingest pipeline (``apps.py``).

One transaction per batch, events in ``ts`` order:

- ``paid``: the order, attributed (explicit partner, else the buyer's last partner view), with the chain, the
  commission rate and the exchange rate of that moment; its event; one ledger entry per chain partner; then
  the refunds held for it. A second ``paid`` of an order changes nothing.
- ``refunded`` / ``cancelled``: the event and the ledger differences; held when its order is not known yet.

An event id seen before changes nothing, so a batch read again after a crash records nothing twice and refuses
the same events. A refund beyond what is left, or a ``paid`` with no rate in force, is refused (a dead letter).
"""

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django.db.models import Q, Sum

from conversions import attribution, held, ledger
from conversions.attribution import View
from conversions.conf import conversion_setting
from conversions.events import CANCELLED, PAID, ParsedOrderEvent
from conversions.models import HeldRefund, LedgerEntry, Order, OrderEvent
from conversions.money import Rate, chain_shares, rate_on, to_reporting
from cpsproject.common.timeutil import local_day
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
    rates: dict[tuple[str, dt.date], Rate | None] = field(default_factory=dict)

    def rate(self, currency: str, day: dt.date) -> Rate | None:
        if (currency, day) not in self.rates:
            self.rates[currency, day] = rate_on(currency, day)
        return self.rates[currency, day]


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
    return _Lookups(views=views, partners=Partner.objects.in_bulk(codes, field_name="code"))


def _record(orders: Sequence[ParsedOrderEvent], lookups: _Lookups) -> list[Refusal]:
    ids = [o.event_id for o in orders]
    seen = set(OrderEvent.objects.filter(event_id__in=ids).values_list("event_id", flat=True))
    seen |= set(HeldRefund.objects.filter(event_id__in=ids).values_list("event_id", flat=True))
    seen |= set(Order.objects.filter(paid_event_id__in=ids).values_list("paid_event_id", flat=True))
    refused = []
    for event in orders:
        if event.event_id in seen:
            continue
        seen.add(event.event_id)
        detail = _record_paid(event, lookups) if event.status == PAID else _record_refund(event)
        if detail:
            refused.append(Refusal(event, Reason.BAD_FIELD, detail))
    return refused


def _chain(partner: Partner) -> list[dict[str, int]]:
    """[attributed, parent, grandparent] partner ids with their shares (bp), from the tree of this moment."""
    ids = [partner.pk, *reversed(partner.ancestor_ids)]
    shares = chain_shares(len(ids), conversion_setting("COMMISSION_SHARES"))
    return [{"partner": pk, "share_bp": share} for pk, share in zip(ids, shares, strict=True)]


def _commission_bp(partner: Partner) -> int:
    if partner.commission_bp is not None:
        return partner.commission_bp
    return conversion_setting("COMMISSION_BP")[partner.level - 1]


def _record_paid(event: ParsedOrderEvent, lookups: _Lookups) -> str:
    """Record a ``paid`` event; return why it is refused, or ""."""
    if Order.objects.filter(order_id=event.order_id).exists():
        return ""  # a payment retried: the order stays as its first payment made it
    day = local_day(event.ts)
    rate = lookups.rate(event.currency, day)
    if rate is None:
        return f"no exchange rate of {event.currency} valid on or before {day}"
    view = lookups.views.get(event.event_id)
    code = event.partner.code if event.partner else view.partner if view else ""
    partner = lookups.partners.get(code)
    how = Order.Attribution.EXPLICIT if event.partner else Order.Attribution.VIEW if partner else None
    order = Order.objects.create(
        order_id=event.order_id,
        openid=event.openid,
        partner=partner,
        path=partner.path if partner else "",
        attribution=how or Order.Attribution.NONE,
        view_event_id=view.event_id if view and how == Order.Attribution.VIEW else "",
        view_ts=view.ts if view and how == Order.Attribution.VIEW else None,
        view_url=view.url if view and how == Order.Attribution.VIEW else "",
        commission_bp=_commission_bp(partner) if partner else 0,
        chain=_chain(partner) if partner else [],
        currency=event.currency,
        amount=event.amount,
        rate=rate.value,
        rate_valid_from=rate.valid_from,
        amount_reporting=to_reporting(event.amount, currency=event.currency, rate=rate.value),
        paid_event_id=event.event_id,
        paid_at=event.ts,
        paid_date=day,
    )
    OrderEvent.objects.create(
        event_id=event.event_id,
        order=order,
        status=OrderEvent.Status.PAID,
        ts=event.ts,
        date=day,
        amount=order.amount,
        amount_reporting=order.amount_reporting,
    )
    if order.chain:
        ledger.append_commission(order)
    held.apply_held(order)
    return ""


def _record_refund(event: ParsedOrderEvent) -> str:
    """Record a refund or cancellation, or hold it for its order; return why it is refused, or ""."""
    order = Order.objects.select_for_update().filter(order_id=event.order_id).first()
    if order is None:
        held.hold(event)
        return ""
    return apply_refund(
        order,
        event_id=event.event_id,
        status=event.status,
        ts=event.ts,
        amount=event.amount,
        currency=event.currency,
    )


def apply_refund(
    order: Order, *, event_id: str, status: str, ts: dt.datetime, amount: int, currency: str
) -> str:
    """Record a refund (``amount``) or a cancellation (what is left) of a locked ``order``; return why it is
    refused, or ""."""
    if currency and currency != order.currency:
        return f"refund in {currency} of order {order.order_id!r} paid in {order.currency}"
    totals = OrderEvent.objects.filter(order=order).aggregate(
        refunded=Sum("amount", filter=~Q(status=PAID)),
        refunded_reporting=Sum("amount_reporting", filter=~Q(status=PAID)),
    )
    left = order.amount - (totals["refunded"] or 0)
    left_reporting = order.amount_reporting - (totals["refunded_reporting"] or 0)
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
    OrderEvent.objects.create(
        event_id=event_id,
        order=order,
        status=status,
        ts=ts,
        date=local_day(ts),
        amount=amount,
        amount_reporting=reporting,
    )
    if order.chain:
        reason = LedgerEntry.Reason.CANCELLATION if status == CANCELLED else LedgerEntry.Reason.REFUND
        ledger.append_difference(
            order, net_reporting=left_reporting - reporting, reason=reason, event_id=event_id, ts=ts
        )
    return ""
