"""What other apps may read of ``conversions``: the one module they import (traffic quality reads orders here).

Kept small and read-only so that the modules behind it (attribution, recording, statements) change freely.
"""

import datetime as dt
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
