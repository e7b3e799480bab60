"""The traffic-quality panels of the dashboard and the partner page, and its /metrics figures (registered
through ``stats.plugins``).

Dashboard: the open findings (count, the partners with most) and the partners whose last hour is a spike or a
drop. Partner page: the partner's own signals per day of the range beside its findings, with the evidence (the
busiest addresses, the time from view to order).
"""

from collections.abc import Iterator
from typing import Any

from django.db.models import Count, QuerySet
from django.template.loader import render_to_string
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from quality.models import Finding, QualityDay
from quality.selectors import shares
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


def dashboard_panel(page: DashboardPage) -> str | None:
    """Open findings with the partners that have most, and today's spikes and drops."""
    if not page.request.user.has_perm(VIEW_FINDINGS):
        return None
    found = _open_findings(page)
    worst = (
        found.values("partner__code")
        .annotate(findings=Count("pk"))
        .order_by("-findings", "partner__code")[:WORST_LIMIT]
    )
    context = {"open": found.count(), "worst": list(worst), "changes": traffic_changes(now=page.now)}
    return render_to_string("admin/quality/dashboard_panel.html", context, request=page.request)


def _day_rows(page: PartnerPage) -> list[dict[str, Any]]:
    days = QualityDay.objects.filter(partner=page.partner, date__range=(page.start, page.end)).order_by(
        "-date"
    )
    found: dict[Any, list[Finding]] = {}
    for finding in Finding.objects.filter(partner=page.partner, date__range=(page.start, page.end)):
        found.setdefault(finding.date, []).append(finding)
    return [{"day": day, "shares": shares(day), "findings": found.get(day.date, [])} for day in days]


def partner_page_panel(page: PartnerPage) -> str | None:
    """Per day of the range: the partner's own signals, its findings and their evidence."""
    if not page.request.user.has_perm(VIEW_FINDINGS):
        return None
    context = {"partner": page.partner, "rows": _day_rows(page)}
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
