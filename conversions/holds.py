"""Commissions held by a review of their partner-day (traffic quality), released, or reversed.

The unit is an order: all ledger entries of the orders that a partner was attributed on a business day under
review (its own share and its upline's, since the upline's share comes from the same sales), booked before or
after. An order whose entries were already paid in a closed statement (the review began after its month
closed) is left alone, so each order is either paid or held and reversed as a whole.

- At a close (``review_month``, inside ``close_month``'s transaction, ledger gate held exclusively): the
  month's entries of an open review are held (a ``CommissionHold`` from that month); entries held earlier
  whose review is no longer open or confirmed (cleared, or withdrawn by a recount) are released into this
  month's statement; those of a confirmed review are reversed.
- When a review is confirmed (``settle_partner_day``, after the decision committed, ledger gate in share
  mode): each unpaid entry gets a reversal entry (``quality_reversal``, its negated amount, booked on the first
  open day) and its hold records the reversal. Neither is ever paid; nothing is edited or deleted.

A close and a confirmation keep in step through the ledger gate: the confirmation waits for a close in flight
and then reverses what it held; a close that starts after a confirmation committed sees its reversals, or
reverses itself what the confirmation has not reached yet (a lost callback is caught at the next close).
"""

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable

from django.db import transaction
from django.db.models import Min, Q, QuerySet

from conversions.ledger import booked_date, books_open
from conversions.models import CommissionHold, LedgerEntry, MonthClose, Order
from conversions.public import REVIEW_CONFIRMED, REVIEW_OPEN, Review, reviews_between
from cpsproject.common.timeutil import local_day

REVERSAL = LedgerEntry.Reason.QUALITY_REVERSAL
PartnerDay = tuple[int, dt.date]


def _of_partner_days(days: Iterable[PartnerDay], *, order: str = "order__") -> Q:
    """The orders attributed to each partner on each of its days (``order``: the path to the order)."""
    per_partner: dict[int, set[dt.date]] = defaultdict(set)
    for partner_id, day in days:
        per_partner[partner_id].add(day)
    query = Q(pk__in=[])
    for partner_id, dates in per_partner.items():
        query |= Q(**{f"{order}partner_id": partner_id, f"{order}paid_date__in": sorted(dates)})
    return query


def _paid_orders(order_ids: set[int]) -> set[int]:
    """The orders with an entry paid in a closed statement: booked in a closed month and not held, or released."""
    closed = set(MonthClose.objects.values_list("month", flat=True))
    rows = (
        LedgerEntry.objects.filter(order_id__in=order_ids)
        .exclude(reason=REVERSAL)
        .values_list("order_id", "booked_date", "hold__id", "hold__released_in")
    )
    return {
        order_id
        for order_id, booked, hold_id, released in rows
        if released is not None or (hold_id is None and booked.replace(day=1) in closed)
    }


def _reverse(entry: LedgerEntry, hold: CommissionHold | None, reference: str, now: dt.datetime) -> None:
    day = local_day(now)
    reversal = LedgerEntry.objects.create(
        order_id=entry.order_id,
        partner_id=entry.partner_id,
        amount=-entry.amount,
        reason=REVERSAL,
        share_bp=entry.share_bp,
        source_event_id=f"{reference}/reverses/{entry.pk}"[-128:],
        event_ts=now,
        event_date=day,
        booked_date=booked_date(day),
    )
    if hold is None:
        CommissionHold.objects.create(entry=entry, reversal=reversal, review=reference)
    else:
        hold.reversal = reversal
        hold.save(update_fields=["reversal"])


def reverse_confirmed(confirmed: dict[PartnerDay, str], *, now: dt.datetime) -> int:
    """Reverse every entry of the confirmed partner-days' orders not paid and not reversed yet; return how many.

    ``confirmed``: partner-day -> the review's reference. The caller holds the ledger gate. The orders' rows are
    locked first (in id order, as recording locks them), then their entries are read with locking reads, so a
    refund booked meanwhile is either seen here or booked after, for the next close to reverse.
    """
    if not confirmed:
        return 0
    order_ids = list(
        Order.objects.select_for_update()
        .filter(_of_partner_days(confirmed, order=""))
        .order_by("id")
        .values_list("id", flat=True)
    )
    unpaid = set(order_ids) - _paid_orders(set(order_ids))
    entries = (
        LedgerEntry.objects.select_for_update()
        .filter(order_id__in=unpaid)
        .exclude(reason=REVERSAL)
        .select_related("order")
        .order_by("id")
    )
    holds = {
        h.entry_id: h for h in CommissionHold.objects.select_for_update().filter(entry__order_id__in=unpaid)
    }
    reversed_count = 0
    for entry in entries:
        hold = holds.get(entry.pk)
        if hold is not None and (hold.reversal_id is not None or hold.released_in is not None):
            continue
        assert entry.order.partner_id is not None  # an order of a partner-day has a partner
        _reverse(entry, hold, confirmed[(entry.order.partner_id, entry.order.paid_date)], now)
        reversed_count += 1
    return reversed_count


def settle_partner_day(*, partner_id: int, day: dt.date, now: dt.datetime) -> int:
    """Reverse the partner-day's unpaid entries if its review is confirmed; return how many were reversed."""
    with transaction.atomic():
        books_open()  # first: a close in flight commits before this reads, and none starts until it ends
        review = reviews_between(day, day).get((partner_id, day))
        if review is None or review.status != REVIEW_CONFIRMED:
            return 0
        return reverse_confirmed({(partner_id, day): review.reference}, now=now)


def _pending() -> QuerySet[CommissionHold]:
    """Holds kept out of a statement and neither released nor reversed yet."""
    return CommissionHold.objects.filter(held_from__isnull=False, released_in=None, reversal=None)


def _reviews_for(month: dt.date, end: dt.date) -> dict[PartnerDay, Review]:
    """The reviews of every partner-day whose orders have entries booked in the month or held."""
    firsts = [
        LedgerEntry.objects.filter(booked_date__gte=month, booked_date__lt=end).aggregate(
            first=Min("order__paid_date")
        )["first"],
        _pending().aggregate(first=Min("entry__order__paid_date"))["first"],
    ]
    known = [first for first in firsts if first is not None]
    if not known:
        return {}
    return reviews_between(min(known), end - dt.timedelta(days=1))


def review_month(month: dt.date, end: dt.date, *, now: dt.datetime) -> None:
    """Apply the reviews to the month's statement (``close_month``'s transaction, gate held exclusively):
    reverse what confirmed reviews left unpaid, hold the month's entries of open reviews, release the rest."""
    reviews = _reviews_for(month, end)
    reverse_confirmed({k: r.reference for k, r in reviews.items() if r.status == REVIEW_CONFIRMED}, now=now)
    open_days = {k: r.reference for k, r in reviews.items() if r.status == REVIEW_OPEN}
    if open_days:
        candidates = list(
            LedgerEntry.objects.filter(booked_date__gte=month, booked_date__lt=end, hold__isnull=True)
            .exclude(reason=REVERSAL)
            .filter(_of_partner_days(open_days))
            .values_list("id", "order_id", "order__partner_id", "order__paid_date")
        )
        paid = _paid_orders({order_id for _, order_id, _, _ in candidates})
        CommissionHold.objects.bulk_create(
            CommissionHold(entry_id=entry_id, held_from=month, review=open_days[(partner_id, day)])
            for entry_id, order_id, partner_id, day in candidates
            if order_id not in paid
        )
    released = [
        hold_id
        for hold_id, partner_id, day in _pending()
        .exclude(held_from=month)
        .values_list("id", "entry__order__partner_id", "entry__order__paid_date")
        if (partner_id, day) not in open_days
    ]
    CommissionHold.objects.filter(id__in=released).update(released_in=month)
