"""The recount of a day's orders from the raw archive when ``reconcile`` recounts the day: drift, then repair.

The archive holds every order event that was counted (a refused one is taken back), so a day recounted from it
and the day as recorded agree unless the recording lost or gained something. ``reconcile_orders`` (registered
with ``stats.plugins.register_day_recount`` in ``apps.py``, run by ``manage.py reconcile`` after the page views):

1. reads the day's figures as the tables hold them, per attributed partner: orders paid, gross, refunded;
2. reads the day's order events from the archive;
3. records those the tables lack through the recorder of the ingest pipeline, which is idempotent by event
   id: a paid order is attributed as the consumer would (explicit partner, else the buyer's last partner view,
   from Redis and the day's archived views), a refund is applied or held;
4. recounts the day from the archive with the stored attribution, rates and amounts of each event's order;
5. writes one ``OrderDrift`` row per partner (and one for orders with no partner, always): recorded before the
   repair beside the archive's numbers. A day with rows is the API's ``reconciled`` day.

Refunds still held for their order are neither drift nor recorded; a second ``paid`` of an order is nothing.
Money is the reporting currency's minor units.
"""

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import orjson
from django.db import transaction
from django.db.models import Count, Sum

from conversions.events import PAID, ParsedOrderEvent, parse_order
from conversions.models import HeldRefund, Order, OrderDrift, OrderEvent
from conversions.recording import record_orders
from cpsproject.common.upsert import upsert_rows
from partners.selectors import Lineage, partner_lineages
from stats.plugins import ArchivedEvent, Envelope, Rejected, archived_events

# Event ids per IN (...) list: a busy day has tens of thousands of order events.
_CHUNK = 5000
# Ids named in the summary line.
_NAMED = 10


@dataclass
class Figures:
    """One partner's orders paid on a day, their gross, and what was refunded that day."""

    orders: int = 0
    gross: int = 0
    refunded: int = 0

    def as_tuple(self) -> tuple[int, int, int]:
        return (self.orders, self.gross, self.refunded)


PartnerFigures = dict[int | None, Figures]


@dataclass
class OrdersRecount:
    """A day's orders recounted: the tables' figures before, the archive's after the repair, per partner id."""

    day: dt.date
    recorded: PartnerFigures
    exact: PartnerFigures
    repaired: list[str] = field(default_factory=list)  # event ids the tables lacked, recorded now
    refused: list[str] = field(default_factory=list)  # event ids the recorder would not record (with why)

    @staticmethod
    def total(which: PartnerFigures) -> Figures:
        return Figures(
            orders=sum(f.orders for f in which.values()),
            gross=sum(f.gross for f in which.values()),
            refunded=sum(f.refunded for f in which.values()),
        )

    def drifting(self) -> list[int | None]:
        """The partners (None: no partner) whose recorded figures differ from the archive's."""
        keys = set(self.recorded) | set(self.exact)
        return [
            k
            for k in keys
            if self.recorded.get(k, Figures()).as_tuple() != self.exact.get(k, Figures()).as_tuple()
        ]

    def summary(self) -> str:
        exact, recorded = self.total(self.exact), self.total(self.recorded)
        line = (
            f"orders of {self.day}: {exact.orders} in the archive, {recorded.orders} recorded; gross "
            f"{exact.gross} / {recorded.gross}; refunded {exact.refunded} / {recorded.refunded}; "
            f"{len(self.drifting())} partners with drift"
        )
        if self.repaired:
            line += f"; recorded now {len(self.repaired)} ({', '.join(self.repaired[:_NAMED])})"
        if self.refused:
            line += f"; not recordable {len(self.refused)} ({', '.join(self.refused[:_NAMED])})"
        return line


def _chunks(ids: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]


def _recorded_figures(day: dt.date) -> PartnerFigures:
    """Step 1: the day's figures per attributed partner, as the tables hold them."""
    figures: PartnerFigures = defaultdict(Figures)
    paid = (
        Order.objects.filter(paid_date=day)
        .values("partner_id")
        .annotate(n=Count("id"), g=Sum("amount_reporting"))
    )
    for row in paid.order_by():
        figures[row["partner_id"]].orders, figures[row["partner_id"]].gross = row["n"], row["g"] or 0
    refunds = (
        OrderEvent.objects.filter(date=day, status__in=OrderEvent.REVERSALS)
        .values("order__partner_id")
        .annotate(r=Sum("amount_reporting"))
    )
    for refund in refunds.order_by():
        figures[refund["order__partner_id"]].refunded = refund["r"] or 0
    return dict(figures)


def _archive_figures(events: Sequence[ArchivedEvent]) -> PartnerFigures:
    """Step 4: the archive's events of the day, each counted with its recorded order's attribution and money."""
    figures: PartnerFigures = defaultdict(Figures)
    paid = {e.event_id for e in events if orjson.loads(e.payload).get("status") == PAID}
    paid_ids = sorted(paid)
    refund_ids = sorted(e.event_id for e in events if e.event_id not in paid)
    for ids in _chunks(paid_ids):
        for partner_id, amount in Order.objects.filter(paid_event_id__in=ids).values_list(
            "partner_id", "amount_reporting"
        ):
            figures[partner_id].orders += 1
            figures[partner_id].gross += amount
    for ids in _chunks(refund_ids):
        for partner_id, amount in OrderEvent.objects.filter(
            event_id__in=ids, status__in=OrderEvent.REVERSALS
        ).values_list("order__partner_id", "amount_reporting"):
            figures[partner_id].refunded += amount
    return dict(figures)


def _unrecorded(events: Sequence[ArchivedEvent]) -> list[ArchivedEvent]:
    """The archived events the tables know nothing of: no order event, no held refund, no order they made."""
    ids = [e.event_id for e in events]
    seen: set[str] = set()
    for chunk in _chunks(ids):
        seen.update(OrderEvent.objects.filter(event_id__in=chunk).values_list("event_id", flat=True))
        seen.update(HeldRefund.objects.filter(event_id__in=chunk).values_list("event_id", flat=True))
        seen.update(Order.objects.filter(paid_event_id__in=chunk).values_list("paid_event_id", flat=True))
    return [e for e in events if e.event_id not in seen]


@dataclass(frozen=True, slots=True)
class _ArchivedView:
    """An archived page view, shaped as the recorder reads a batch's views."""

    event_id: str
    ts: dt.datetime
    lineage: Lineage | None
    openid: str
    is_bot: bool
    payload: str

    type = "pv"

    @property
    def seconds(self) -> int:
        """``ts`` in whole epoch seconds, as every event has it (the recorder reads ``ts``)."""
        return int(self.ts.timestamp())


def _day_views(day: dt.date, buyers: set[str], lineages: dict[str, Lineage]) -> list[_ArchivedView]:
    """The day's archived partner page views of ``buyers``: those Redis may no longer remember."""
    return [
        _ArchivedView(e.event_id, e.ts, lineages.get(e.path[-1]), e.openid, e.is_bot, e.payload)
        for e in archived_events(day)
        if e.type == "pv" and e.openid in buyers and e.path and e.path[-1] in lineages
    ]


def _parsed(
    events: Sequence[ArchivedEvent], lineages: dict[str, Lineage]
) -> tuple[list[ParsedOrderEvent], list[str]]:
    parsed, refused = [], []
    for e in events:
        envelope = Envelope(
            event_id=e.event_id,
            ts=e.ts,
            seconds=math.floor(e.ts.timestamp()),
            text=e.payload,
            lineages=lineages,
        )
        try:
            parsed.append(parse_order(orjson.loads(e.payload), envelope))
        except Rejected as exc:  # a partner made inactive since, say: counted then, not recordable now
            refused.append(f"{e.event_id}: {exc.detail}")
    return parsed, refused


def _record_missing(day: dt.date, events: Sequence[ArchivedEvent]) -> tuple[list[str], list[str]]:
    """Step 3: record what the tables lack; return the event ids recorded now and those refused (with why)."""
    missing = _unrecorded(events)
    if not missing:
        return [], []
    lineages = partner_lineages()
    parsed, refused = _parsed(missing, lineages)
    # A second payment of a recorded order is nothing to record (the order stays as its first made it), and
    # would cost an attribution lookup and a second read of the day for nothing: leave it out.
    paid_ids = [e.order_id for e in parsed if e.status == PAID]
    known = {
        oid
        for chunk in _chunks(paid_ids)
        for oid in Order.objects.filter(order_id__in=chunk).values_list("order_id", flat=True)
    }
    parsed = sorted((e for e in parsed if e.status != PAID or e.order_id not in known), key=lambda e: e.ts)
    if not parsed:
        return [], refused
    buyers = {e.openid for e in parsed if e.status == PAID and e.partner is None}
    views = _day_views(day, buyers, lineages) if buyers else []
    refusals = record_orders(parsed, batch={"pv": views, "order": parsed})
    refused += [f"{r.event.event_id}: {r.detail}" for r in refusals]
    still = {e.event_id for e in _unrecorded(missing)}
    return [e.event_id for e in parsed if e.event_id not in still], refused


def recount_orders(*, day: dt.date) -> OrdersRecount:
    """Recount business day ``day``'s orders from the archive, recording what the tables lack (steps 1-4)."""
    recorded = _recorded_figures(day)  # step 1, before the archive: what is recorded meanwhile is drift
    events = [e for e in archived_events(day) if e.type == "order"]  # step 2
    repaired, refused = _record_missing(day, events)  # step 3
    return OrdersRecount(day, recorded, _archive_figures(events), repaired, refused)  # step 4


def reconcile_orders(*, day: dt.date, now: dt.datetime) -> str:
    """The orders' part of ``reconcile``: recount ``day``, store its drift per partner; return one line."""
    recount = recount_orders(day=day)
    partners = set(recount.recorded) | set(recount.exact) | {None}
    rows = [
        {
            "partner_id": partner_id,
            "date": day,
            "recorded_orders": recount.recorded.get(partner_id, Figures()).orders,
            "exact_orders": recount.exact.get(partner_id, Figures()).orders,
            "recorded_gross": recount.recorded.get(partner_id, Figures()).gross,
            "exact_gross": recount.exact.get(partner_id, Figures()).gross,
            "recorded_refunded": recount.recorded.get(partner_id, Figures()).refunded,
            "exact_refunded": recount.exact.get(partner_id, Figures()).refunded,
            "reconciled_at": now,
        }
        for partner_id in partners
    ]
    with transaction.atomic():  # step 5; reconcile's lock keeps a second run out
        upsert_rows(OrderDrift, rows, key_fields=["partner_id", "date"])
    return recount.summary()
