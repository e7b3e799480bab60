"""The traffic-quality panels of the dashboard and the partner page, and its /metrics figures (registered
through ``stats.plugins``).

Dashboard: the open findings (count, the partners with most) and the partners whose last hour is a spike or a
drop. Partner page: the partner's own signals per day of the range beside its findings, with the evidence (the
busiest addresses, the time from view to order), and under them, for a partner with descendants, the line of
its subtree (the signals that add up).
"""

from collections.abc import Iterator
from typing import Any

from django.db.models import Count, QuerySet
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.translation import gettext as _
from prometheus_client.core import GaugeMetricFamily

from quality.display import percent, rule_threshold, rule_value
from quality.models import Finding, QualityDay
from quality.selectors import SubtreeDay, shares, subtree_days
from quality.spikes import traffic_changes
from stats.plugins import (
    DashboardPage,
    PartnerPage,
    register_dashboard_panel,
    register_metrics,
    register_partner_page_panel,
)

VIEW_FINDINGS = "quality.view_finding"
WORST_LIMIT = 5


def _open_findings(page: DashboardPage) -> QuerySet[Finding]:
    found = Finding.objects.filter(status=Finding.Status.OPEN)
    if page.partner is not None:
        found = found.filter(partner__path__startswith=page.partner.path)
    return found


def _worst(found: QuerySet[Finding]) -> list[dict[str, Any]]:
    """The partners with most open findings, each with the names of the rules it broke."""
    worst = list(
        found.values("partner__code")
        .annotate(findings=Count("pk"))
        .order_by("-findings", "partner__code")[:WORST_LIMIT]
    )
    rules: dict[str, set[str]] = {}
    codes = [row["partner__code"] for row in worst]
    for code, rule in found.filter(partner__code__in=codes).values_list("partner__code", "rule"):
        rules.setdefault(code, set()).add(str(Finding.Rule(rule).label))
    return [
        {
            "code": row["partner__code"],
            "findings": row["findings"],
            "rules": sorted(rules[row["partner__code"]]),
        }
        for row in worst
    ]


def dashboard_panel(page: DashboardPage) -> str | None:
    """Open findings with the partners that have most, and today's spikes and drops."""
    if not page.request.user.has_perm(VIEW_FINDINGS):
        return None
    found = _open_findings(page)
    context = {"open": found.count(), "worst": _worst(found), "changes": traffic_changes(now=page.now)}
    return render_to_string("admin/quality/dashboard_panel.html", context, request=page.request)


def _evidence(day: QualityDay) -> dict[str, Any]:
    """The day's shares as percentages, its busiest addresses with each one's share of the addressed views,
    and the time from view to order per bin."""
    addressed = day.addressed_pv
    busiest = [
        (address, views, percent(views / addressed if addressed else None))
        for address, views in day.top_addresses
    ]
    bins = [_("under 10 s"), _("10 s to 1 min"), _("1 to 10 min"), _("10 min to 1 h"), _("1 h to 1 day")]
    bins.append(_("longer"))
    counts = list(day.order_seconds or []) + [0] * len(bins)
    return {
        **{name: percent(share) for name, share in shares(day).items()},
        "busiest": busiest,
        "order_seconds": list(zip(bins, counts, strict=False)),
    }


def _subtree_line(day: SubtreeDay) -> dict[str, Any]:
    """The subtree's sums with their shares as percentages (of its views; listed: of its addressed views)."""
    return {
        "sums": day,
        "automated_share": percent(day.automated_pv / day.pv if day.pv else None),
        "repeat_share": percent(day.repeat_pv / day.pv if day.pv else None),
        "listed_share": percent(day.listed_pv / day.addressed_pv if day.addressed_pv else None),
    }


def _day_rows(page: PartnerPage) -> list[dict[str, Any]]:
    own = {
        day.date: day
        for day in QualityDay.objects.filter(partner=page.partner, date__range=(page.start, page.end))
    }
    # Only a partner with descendants has a subtree line; a day only they had views on gets an own line of 0.
    subtree = subtree_days(partner=page.partner, start=page.start, end=page.end) if page.children else {}
    days = [
        own.get(date) or QualityDay(date=date) for date in sorted(own.keys() | subtree.keys(), reverse=True)
    ]
    found: dict[Any, list[dict[str, Any]]] = {}
    for finding in Finding.objects.filter(partner=page.partner, date__range=(page.start, page.end)).order_by(
        "rule"
    ):
        found.setdefault(finding.date, []).append(
            {
                "finding": finding,
                "value": rule_value(finding.rule, finding.value),
                "threshold": rule_threshold(finding.rule, finding.threshold),
            }
        )
    return [
        {
            "day": day,
            **_evidence(day),
            "findings": found.get(day.date, []),
            "subtree": _subtree_line(subtree[day.date]) if day.date in subtree else None,
        }
        for day in days
    ]


def partner_page_panel(page: PartnerPage) -> str | None:
    """Per day of the range: the partner's own signals, its findings and their evidence, and its subtree's."""
    if not page.request.user.has_perm(VIEW_FINDINGS):
        return None
    context = {"partner": page.partner, "rows": _day_rows(page), "has_subtree": bool(page.children)}
    return render_to_string("admin/quality/partner_panel.html", context, request=page.request)


def collect_metrics() -> Iterator[GaugeMetricFamily]:
    """Open findings by rule, and each partner whose last hour is a spike or a drop."""
    open_findings = GaugeMetricFamily(
        "cps_quality_open_findings", "Traffic-quality findings not resolved yet, by rule.", labels=["rule"]
    )
    counts = dict(
        Finding.objects.filter(status=Finding.Status.OPEN).values_list("rule").annotate(n=Count("pk"))
    )
    for rule in Finding.Rule.values:
        open_findings.add_metric([rule], counts.get(rule, 0))
    yield open_findings
    changes = GaugeMetricFamily(
        "cps_quality_traffic_change_views",
        "Views of the last hour of a partner beyond the spike factor of the median of the same hour on the "
        "7 days before (direction spike or drop); the median is the 'baseline' series.",
        labels=["partner", "direction", "series"],
    )
    for change in traffic_changes(now=timezone.now()):
        changes.add_metric([change.partner, change.direction, "last_hour"], change.views)
        changes.add_metric([change.partner, change.direction, "baseline"], change.median)
    yield changes


def register_panels() -> None:
    """Add the panels and the metrics (idempotent: registered by name)."""
    register_dashboard_panel("traffic quality", dashboard_panel)
    register_partner_page_panel("traffic quality", partner_page_panel)
    register_metrics("traffic quality", collect_metrics)


register_panels()
