"""What other apps may read of ``conversions``: the one module they import (traffic quality reads orders here).

Kept small and read-only so that the modules behind it (attribution, recording, statements) change freely.
"""

import datetime as dt
from collections.abc import Callable
from typing import NamedTuple

from conversions.models import Order


class PaidOrder(NamedTuple):
    """An order paid on a business day, as the quality signals need it: who sold it and how fast."""

    partner: str  # the attributed partner's code
    by_view: bool  # attributed by the buyer's page view (else an explicit link or coupon)
    seconds_to_order: float | None  # from the attributing view to the payment; None unless by a view


def orders_paid_on(days: list[dt.date]) -> dict[dt.date, list[PaidOrder]]:
    """Return the orders paid on each of ``days`` that a partner sold, per day."""
    paid: dict[dt.date, list[PaidOrder]] = {day: [] for day in days}
    rows = (
        Order.objects.filter(paid_date__in=days, partner__isnull=False)
        .values_list("paid_date", "partner__code", "attribution", "view_ts", "paid_at")
        .order_by()
    )
    for day, code, attribution, view_ts, paid_at in rows.iterator(chunk_size=2000):
        if attribution == Order.Attribution.VIEW and view_ts is not None:
            paid[day].append(PaidOrder(code, True, (paid_at - view_ts).total_seconds()))
        else:
            paid[day].append(PaidOrder(code, False, None))
    return paid


# --- Commission reviews ------------------------------------------------------------------------------------
# An app that reviews partner-days (traffic quality) registers here which ones hold commissions; conversions
# imports nothing of it. The statements ask at each close; the app calls ``settle_review`` after a decision.


class Review(NamedTuple):
    """A partner-day under review: ``open`` (its orders' entries are held) or ``confirmed`` (reversed)."""

    status: str  # REVIEW_OPEN or REVIEW_CONFIRMED; a cleared or withdrawn review is simply not listed
    reference: str  # what the reviewing app calls it, e.g. "quality-finding-12": written on each hold


REVIEW_OPEN = "open"
REVIEW_CONFIRMED = "confirmed"
ReviewsOf = Callable[[dt.date, dt.date], dict[tuple[int, dt.date], Review]]
_reviewers: list[ReviewsOf] = []


def register_commission_reviews(reviews: ReviewsOf) -> None:
    """Register ``reviews(start, end)``: the partner-days (partner id, business day) from start to end under
    review, open or confirmed. Called from an app's ``AppConfig.ready``; registering twice changes nothing."""
    if reviews not in _reviewers:
        _reviewers.append(reviews)


def reviews_between(start: dt.date, end: dt.date) -> dict[tuple[int, dt.date], Review]:
    """Every registered app's reviews of partner-days from start to end; a confirmed one wins over an open."""
    merged: dict[tuple[int, dt.date], Review] = {}
    for reviews in _reviewers:
        for key, review in reviews(start, end).items():
            if key not in merged or review.status == REVIEW_CONFIRMED:
                merged[key] = review
    return merged


def settle_review(*, partner_id: int, day: dt.date, now: dt.datetime | None = None) -> int:
    """Reverse the unpaid ledger entries of the partner-day's orders if its review is confirmed now; return
    how many. For the reviewing app to call once its decision has committed (a close does it too)."""
    from conversions.holds import settle_partner_day

    return settle_partner_day(partner_id=partner_id, day=day, now=now or dt.datetime.now(dt.UTC))
