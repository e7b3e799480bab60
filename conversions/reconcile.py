"""The recount of a day's orders from the raw archive, against what the consumer recorded: the drift.

The archive holds every order event that was counted (a refused one is taken back), so a day recounted from it
and the day as recorded agree unless the recording lost or gained something. Attribution and rates are the
stored order's (decided once, at its ``paid``); a paid order missing from the tables is converted at the rate in
force on its day. Refunds still held for their order are neither drift nor recorded.
"""

import datetime as dt
from dataclasses import dataclass, field

import orjson
from django.db.models import Sum

from conversions.events import PAID
from conversions.models import HeldRefund, Order, OrderEvent
from conversions.money import rate_on, to_reporting
from stats.plugins import archived_events


@dataclass
class OrdersRecount:
    """A day's orders and money as the archive has them, beside the recorded ones (reporting currency)."""

    day: dt.date
    orders: int = 0
    orders_recorded: int = 0
    gross: int = 0
    gross_recorded: int = 0
    refund_events: int = 0
    refund_events_recorded: int = 0
    # order ids paid that day in the archive with no order recorded; event ids of refunds neither recorded nor held
    missing_orders: list[str] = field(default_factory=list)
    missing_refunds: list[str] = field(default_factory=list)

    @property
    def drifted(self) -> bool:
        return (self.orders, self.gross, self.refund_events) != (
            self.orders_recorded,
            self.gross_recorded,
            self.refund_events_recorded,
        )

    def summary(self) -> str:
        return (
            f"orders of {self.day}: {self.orders} in the archive, {self.orders_recorded} recorded; gross "
            f"{self.gross} / {self.gross_recorded}; refunds {self.refund_events} / {self.refund_events_recorded}"
            + (f"; missing orders {', '.join(self.missing_orders[:10])}" if self.missing_orders else "")
            + (f"; missing refunds {', '.join(self.missing_refunds[:10])}" if self.missing_refunds else "")
        )


def _order_events(day: dt.date) -> list[dict]:
    return [orjson.loads(e.payload) for e in archived_events(day) if e.type == "order"]


def _paid_by_order(events: list[dict], recorded: dict[str, Order]) -> dict[str, dict]:
    """The ``paid`` event that made each order: the recorded one, or the first archived."""
    chosen: dict[str, dict] = {}
    for event in events:
        if event["status"] != PAID:
            continue
        order = recorded.get(event["order_id"])
        if order is not None and order.paid_event_id != event["event_id"]:
            continue
        chosen.setdefault(event["order_id"], event)
    return chosen


def recount_orders(*, day: dt.date) -> OrdersRecount:
    """Recount business day ``day``'s orders from the archive and set them beside the recorded ones."""
    events = _order_events(day)
    order_ids = {e["order_id"] for e in events if e["status"] == PAID}
    recorded = {o.order_id: o for o in Order.objects.filter(order_id__in=order_ids)}
    result = OrdersRecount(day=day)
    for order_id, paid in sorted(_paid_by_order(events, recorded).items()):
        order = recorded.get(order_id)
        if order is not None and order.paid_date != day:
            continue  # recorded on the day of another paid event of it
        rate = order.rate if order else getattr(rate_on(paid["currency"], day), "value", None)
        result.orders += 1
        if rate is not None:
            result.gross += to_reporting(paid["amount"], currency=paid["currency"], rate=rate)
        if order is None:
            result.missing_orders.append(order_id)
    day_orders = Order.objects.filter(paid_date=day)
    result.orders_recorded = day_orders.count()
    result.gross_recorded = day_orders.aggregate(total=Sum("amount_reporting"))["total"] or 0

    refund_ids = {e["event_id"] for e in events if e["status"] != PAID}
    held = set(
        HeldRefund.objects.filter(event_id__in=refund_ids, applied_at=None).values_list("event_id", flat=True)
    )
    recorded_refunds = OrderEvent.objects.filter(date=day).exclude(status=PAID)
    result.refund_events = len(refund_ids - held)
    result.refund_events_recorded = recorded_refunds.count()
    result.missing_refunds = sorted(
        refund_ids - held - set(recorded_refunds.values_list("event_id", flat=True))
    )
    return result
