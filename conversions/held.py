"""Refunds and cancellations counted before their order's ``paid`` event: held, then applied or given up on.

A held refund is applied, in ``ts`` order, in the transaction that records its order's ``paid`` event.
``settle_held_refunds`` (run by a schedule, or by hand) applies those whose order was recorded by another
consumer meanwhile, and gives up on those older than ``HELD_REFUND_DAYS``: each becomes a dead letter and
keeps its ``expired_at``.
"""

import datetime as dt
import logging

from django.db import transaction
from django.utils.translation import ngettext

from conversions import ledger
from conversions.conf import conversion_setting
from conversions.events import ParsedOrderEvent
from conversions.models import HeldRefund, Order
from stats.plugins import Reason, store_dead_letter

logger = logging.getLogger(__name__)

# Where a held refund's dead letter says it was kept (its offset: the held refund's id).
DEAD_LETTER_SOURCE = "conversions:held refunds"


def held_refund(event: ParsedOrderEvent) -> HeldRefund:
    """The held refund of ``event`` (not saved: the recorder inserts a batch's at once)."""
    return HeldRefund(
        event_id=event.event_id,
        order_id=event.order_id,
        status=event.status,
        ts=event.ts,
        amount=event.amount,
        currency=event.currency,
        payload=event.payload,
    )


def give_up(refund: HeldRefund, *, detail: str, now: dt.datetime) -> None:
    store_dead_letter(
        source=DEAD_LETTER_SOURCE,
        offset=refund.pk,
        reason=Reason.BAD_FIELD,
        detail=f"held {refund.status} {refund.event_id!r} of order {refund.order_id!r}: {detail}",
        raw=refund.payload.encode(),
    )
    HeldRefund.objects.filter(pk=refund.pk).update(expired_at=now)
    logger.warning("held refund %s of order %s given up: %s", refund.event_id, refund.order_id, detail)


def apply_held(order: Order, *, now: dt.datetime | None = None) -> int:
    """Apply the refunds held for ``order`` (locked, inside the caller's transaction), oldest ``ts`` first;
    one refused (beyond what is left) becomes a dead letter. Return how many were applied."""
    from conversions.recording import apply_held_refunds  # the one refund rule, shared with live refunds

    waiting = HeldRefund.objects.filter(order_id=order.order_id, applied_at=None, expired_at=None)
    refunds = list(waiting.order_by("ts", "id"))
    if not refunds:
        return 0
    return apply_held_refunds(order, refunds, now=now or dt.datetime.now(dt.UTC))


def waiting_refunds(*, now: dt.datetime) -> tuple[int, int]:
    """Return (held refunds waiting, of which older than ``HELD_REFUND_DAYS``): what ``health`` shows."""
    waiting = HeldRefund.objects.filter(applied_at=None, expired_at=None)
    cutoff = now - dt.timedelta(days=conversion_setting("HELD_REFUND_DAYS"))
    return waiting.count(), waiting.filter(ts__lt=cutoff).count()


def held_refunds_health(now: dt.datetime) -> list[str]:
    """The ``health`` line of refunds held longer than ``HELD_REFUND_DAYS`` (none once they are settled)."""
    _, overdue = waiting_refunds(now=now)
    if not overdue:
        return []
    days = conversion_setting("HELD_REFUND_DAYS")
    return [
        ngettext(
            "%(count)d held refund has waited more than %(days)d days for its order",
            "%(count)d held refunds have waited more than %(days)d days for their orders",
            overdue,
        )
        % {"count": overdue, "days": days}
    ]


def settle_held_refunds(*, now: dt.datetime | None = None) -> tuple[int, int]:
    """Apply held refunds whose order is recorded now; give up on those older than ``HELD_REFUND_DAYS``.

    Return (applied, given up).
    """
    now = now or dt.datetime.now(dt.UTC)
    applied = expired = 0
    cutoff = now - dt.timedelta(days=conversion_setting("HELD_REFUND_DAYS"))
    order_ids = set(
        HeldRefund.objects.filter(applied_at=None, expired_at=None).values_list("order_id", flat=True)
    )
    for order_id in sorted(order_ids):
        with transaction.atomic():
            ledger.books_open()  # before the order's row lock: a month being closed waits for these entries
            order = Order.objects.select_for_update().filter(order_id=order_id).first()
            if order is not None:
                applied += apply_held(order, now=now)
                continue
            for refund in HeldRefund.objects.filter(
                order_id=order_id, applied_at=None, expired_at=None, ts__lt=cutoff
            ):
                give_up(refund, detail=f"its order never arrived in {cutoff:%Y-%m-%d} and after", now=now)
                expired += 1
    return applied, expired
