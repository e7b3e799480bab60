"""The rules a partner-day's signals are judged by, and the findings they leave for staff.

A rule judges a day from ``MIN_VIEWS`` views on. A broken rule makes (or updates) a finding with the measured
value and the threshold; a rule the day no longer breaks (the live estimate moved, the exact recount differs)
removes its finding only while nobody resolved it. A resolved finding is kept as it was decided.
"""

from collections.abc import Iterable

from django.db import transaction

from quality.conf import quality_setting
from quality.models import Finding, QualityDay
from quality.selectors import shares

# The traffic rules, judged by the flush and the recount: rule -> (share name, threshold option).
TRAFFIC_RULES = {
    Finding.Rule.AUTOMATED: ("automated_share", "MAX_AUTOMATED_SHARE"),
    Finding.Rule.REPEATS: ("repeat_share", "MAX_REPEAT_SHARE"),
    Finding.Rule.CONCENTRATION: ("top_addresses_share", "MAX_TOP_ADDRESSES_SHARE"),
    Finding.Rule.LISTED_NETWORKS: ("listed_share", "MAX_LISTED_SHARE"),
}


def broken_rules(day: QualityDay) -> dict[str, tuple[float, float]]:
    """Return rule -> (value, threshold) for each traffic rule ``day`` breaks."""
    if day.pv < quality_setting("MIN_VIEWS"):
        return {}
    measured = shares(day)
    broken = {}
    for rule, (share, option) in TRAFFIC_RULES.items():
        value, threshold = measured[share], quality_setting(option)
        if value is not None and value > threshold:
            broken[str(rule)] = (round(value, 4), threshold)
    return broken


def judge_days(days: Iterable[QualityDay]) -> int:
    """Create or update the findings of ``days``' traffic rules; return how many rules are broken."""
    days = list(days)
    if not days:
        return 0
    broken_count = 0
    dates = {day.date for day in days}
    partner_ids = {day.partner_id for day in days}
    with transaction.atomic():
        existing = {
            (f.partner_id, f.date, f.rule): f
            for f in Finding.objects.select_for_update().filter(
                date__in=dates, partner_id__in=partner_ids, rule__in=[str(r) for r in TRAFFIC_RULES]
            )
        }
        for day in days:
            broken = broken_rules(day)
            broken_count += len(broken)
            for rule in TRAFFIC_RULES:
                found = existing.get((day.partner_id, day.date, str(rule)))
                _apply(day, str(rule), broken.get(str(rule)), found)
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
