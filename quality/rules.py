"""The rules a partner-day's signals are judged by, and the findings they leave for staff.

A traffic rule judges a day from ``MIN_VIEWS`` views on; the fast-orders rule from ``FAST_ORDERS_MIN`` orders
attributed by a view; the conversion rule compares a partner's orders per view with the median of the
partners that sold at least ``MIN_ORDERS`` that day. A broken rule makes (or updates) a finding with the
measured value and the threshold; a rule the day no longer breaks (the live estimate moved, the exact recount
differs) removes its finding only while nobody resolved it. A resolved finding is kept as it was decided.
"""

import statistics
from collections.abc import Iterable

from django.db import transaction

from quality.conf import quality_setting
from quality.models import Finding, QualityDay
from quality.selectors import shares

# The traffic rules: rule -> (share name, threshold option).
TRAFFIC_RULES = {
    Finding.Rule.AUTOMATED: ("automated_share", "MAX_AUTOMATED_SHARE"),
    Finding.Rule.REPEATS: ("repeat_share", "MAX_REPEAT_SHARE"),
    Finding.Rule.CONCENTRATION: ("top_addresses_share", "MAX_TOP_ADDRESSES_SHARE"),
    Finding.Rule.LISTED_NETWORKS: ("listed_share", "MAX_LISTED_SHARE"),
}
RULES = [str(rule) for rule in Finding.Rule]


def conversion_rate(day: QualityDay) -> float | None:
    """Return the partner's own orders per own view that day, None without views."""
    return day.orders / day.pv if day.pv else None


def median_rate(days: Iterable[QualityDay]) -> float | None:
    """Return the median conversion rate of the partner-days with at least ``MIN_ORDERS`` orders."""
    rates = [
        rate
        for day in days
        if day.orders >= quality_setting("MIN_ORDERS") and (rate := conversion_rate(day)) is not None
    ]
    return statistics.median(rates) if rates else None


def broken_rules(day: QualityDay, *, median: float | None) -> dict[str, tuple[float, float]]:
    """Return rule -> (value, threshold) for each rule ``day`` breaks (``median``: the day's median rate)."""
    broken = {}
    if day.pv >= quality_setting("MIN_VIEWS"):
        measured = shares(day)
        for rule, (share, option) in TRAFFIC_RULES.items():
            value, threshold = measured[share], quality_setting(option)
            if value is not None and value > threshold:
                broken[str(rule)] = (round(value, 4), threshold)
    fast = quality_setting("FAST_ORDER_SECONDS")
    seconds = day.median_seconds_to_order
    if day.orders_by_view >= quality_setting("FAST_ORDERS_MIN") and seconds is not None and seconds < fast:
        broken[str(Finding.Rule.FAST_ORDERS)] = (round(seconds, 1), fast)
    rate, ratio = conversion_rate(day), quality_setting("MAX_CONVERSION_RATIO")
    if rate is not None and median and day.orders >= quality_setting("MIN_ORDERS") and rate > ratio * median:
        broken[str(Finding.Rule.CONVERSION_OUTLIER)] = (round(rate / median, 2), ratio)
    return broken


def judge_days(days: Iterable[QualityDay]) -> int:
    """Create or update the findings of ``days``; return how many rules they break."""
    days = list(days)
    if not days:
        return 0
    dates = {day.date for day in days}
    partner_ids = {day.partner_id for day in days}
    medians = {date: median_rate(QualityDay.objects.filter(date=date).only("pv", "orders")) for date in dates}
    broken_count = 0
    with transaction.atomic():
        existing = {
            (f.partner_id, f.date, f.rule): f
            for f in Finding.objects.select_for_update().filter(date__in=dates, partner_id__in=partner_ids)
        }
        for day in days:
            broken = broken_rules(day, median=medians[day.date])
            broken_count += len(broken)
            for rule in RULES:
                _apply(day, rule, broken.get(rule), existing.get((day.partner_id, day.date, rule)))
    return broken_count


def _apply(day: QualityDay, rule: str, broken: tuple[float, float] | None, found: Finding | None) -> None:
    if broken is None:
        if found is not None and found.status == Finding.Status.OPEN:
            found.delete()
        return
    value, threshold = broken
    if found is None:
        Finding.objects.create(
            partner_id=day.partner_id, date=day.date, rule=rule, value=value, threshold=threshold
        )
    elif found.status == Finding.Status.OPEN and (found.value, found.threshold) != (value, threshold):
        found.value, found.threshold = value, threshold
        found.save(update_fields=["value", "threshold"])
