"""Reads of ``quality``: a partner-day's shares, its days over a range, the findings."""

import datetime as dt

from conversions.public import REVIEW_CONFIRMED, REVIEW_OPEN, Review
from quality.models import Finding, QualityDay


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
