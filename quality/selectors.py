"""Reads of ``quality``: a partner-day's shares, its days over a range, its subtree's totals, the findings."""

import datetime as dt
from typing import NamedTuple

from django.db.models import Sum

from conversions.public import REVIEW_CONFIRMED, REVIEW_OPEN, Review
from partners.models import Partner
from partners.selectors import partner_subtree
from quality.models import Finding, QualityDay

# The signals that add up over a subtree: counts of views and orders, each view and order counted under one
# partner. Distinct addresses and networks, and the busiest addresses, do not: one address seen under two
# partners is one address, and a subtree's busiest ten are not the sum of each partner's.
SUBTREE_FIELDS = ("pv", "automated_pv", "repeat_pv", "listed_pv", "orders_by_view")


class SubtreeDay(NamedTuple):
    """One day of a partner's subtree (itself and its descendants): the sums of the additive signals."""

    pv: int = 0
    automated_pv: int = 0
    repeat_pv: int = 0
    listed_pv: int = 0
    orders_by_view: int = 0
    # The denominator of the listed share, shown on the partner page (not in the API).
    addressed_pv: int = 0


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def shares(day: QualityDay) -> dict[str, float | None]:
    """Return the day's shares as fractions 0..1, None where there is nothing to measure.

    Automated and repeat views are shares of all the day's views; the busiest addresses and the listed
    networks are shares of the views that carried a valid address (the others have no address to judge).
    """
    return {
        "automated_share": _share(day.automated_pv, day.pv),
        "repeat_share": _share(day.repeat_pv, day.pv),
        "top_addresses_share": _share(day.top_addresses_pv, day.addressed_pv),
        "listed_share": _share(day.listed_pv, day.addressed_pv),
    }


def quality_days(*, partner_id: int, start: dt.date, end: dt.date) -> list[QualityDay]:
    return list(QualityDay.objects.filter(partner_id=partner_id, date__range=(start, end)).order_by("date"))


def subtree_days(*, partner: Partner, start: dt.date, end: dt.date) -> dict[dt.date, SubtreeDay]:
    """Return the sums over ``partner``'s subtree (``partners.selectors.partner_subtree``) per day that has a
    row; a day none of them has a row for is absent (all zero)."""
    fields = (*SUBTREE_FIELDS, "addressed_pv")
    rows = (
        QualityDay.objects.filter(
            partner_id__in=partner_subtree(partner=partner).values("pk"), date__range=(start, end)
        )
        .values("date")
        .annotate(**{f"sum_{name}": Sum(name) for name in fields})
        .order_by("date")
        .values_list("date", *(f"sum_{name}" for name in fields))
    )
    return {date: SubtreeDay(*(int(total or 0) for total in sums)) for date, *sums in rows}


def findings_by_day(*, partner_id: int, start: dt.date, end: dt.date) -> dict[dt.date, list[Finding]]:
    found: dict[dt.date, list[Finding]] = {}
    for finding in Finding.objects.filter(partner_id=partner_id, date__range=(start, end)).order_by("rule"):
        found.setdefault(finding.date, []).append(finding)
    return found


def commission_reviews(start: dt.date, end: dt.date) -> dict[tuple[int, dt.date], Review]:
    """The partner-days from start to end whose commissions wait (an open finding) or are reversed (a confirmed
    one, which wins): what ``conversions`` asks at each statement close. A cleared finding holds nothing."""
    reviews: dict[tuple[int, dt.date], Review] = {}
    findings = (
        Finding.objects.filter(date__range=(start, end))
        .exclude(status=Finding.Status.CLEARED)
        .values_list("id", "partner_id", "date", "status")
        .order_by("id")
    )
    for finding_id, partner_id, date, status in findings:
        key = (partner_id, date)
        if key in reviews and reviews[key].status == REVIEW_CONFIRMED:
            continue  # the first confirmed finding names the reversals
        if status == Finding.Status.CONFIRMED or key not in reviews:
            confirmed = status == Finding.Status.CONFIRMED
            reviews[key] = Review(
                REVIEW_CONFIRMED if confirmed else REVIEW_OPEN, f"quality-finding-{finding_id}"
            )
    return reviews
