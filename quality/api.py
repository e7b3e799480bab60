"""The traffic-quality endpoints of /api/v1/: a partner's signals per day, and the findings staff review.

Same conventions as ``stats.read.api``: parameters validated by the endpoint's serializer (a 400 naming the
parameter). Shares are fractions 0..1, null where there is nothing to measure. A portal token sees the signals
and findings of the partners it may see (its subtree) but never a client address: ``top_addresses`` is in
staff answers only. Each day holds the partner's own signals and, under ``subtree``, the sums of those that
add up over the partner and its descendants (a visible partner's subtree lies inside the caller's). The
findings list is for staff.
"""

import datetime as dt

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from cpsproject.common.params import Pagination, error_responses, query
from cpsproject.common.timeutil import local_day
from partners.permissions import IsStaffOrPortal, StaffOnly, get_visible_partner
from quality.models import Finding, QualityDay
from quality.selectors import SUBTREE_FIELDS, SubtreeDay, findings_by_day, quality_days, shares, subtree_days
from quality.serializers import FindingsQuery, QualityQuery


class QualityReaders(IsStaffOrPortal):
    staff_perms = ("quality.view_qualityday", "quality.view_finding")


class FindingReaders(StaffOnly):
    staff_perms = ("quality.view_finding",)


_CODE = OpenApiParameter(
    "code", str, OpenApiParameter.PATH, description="A partner code the caller may see (else 404)."
)
_PAGE = OpenApiParameter("page", int, description="The page (100 rows a page); `last` for the last.")
_SHARE = "A fraction 0..1; null where there is nothing to measure."
_DAY_FIELDS = {
    "date": serializers.DateField(),
    "pv": serializers.IntegerField(help_text="The partner's own page views, automated ones included."),
    "automated_pv": serializers.IntegerField(help_text="Views a crawler list recognises."),
    "repeat_pv": serializers.IntegerField(
        help_text="Views of one openid within CPS_REPEAT_SECONDS of its previous view through the partner."
    ),
    "distinct_ips": serializers.IntegerField(help_text="Distinct client addresses."),
    "distinct_networks": serializers.IntegerField(help_text="Distinct IPv4 /24 and IPv6 /48 networks."),
    "top_addresses_share": serializers.FloatField(
        allow_null=True, help_text=f"Share of the addressed views from the 10 busiest addresses. {_SHARE}"
    ),
    "listed_pv": serializers.IntegerField(
        help_text="Views from networks staff listed (data centres, proxies)."
    ),
    "orders_by_view": serializers.IntegerField(
        help_text="The partner's own orders paid that day that a view of it attributed."
    ),
    "median_seconds_to_order": serializers.FloatField(
        allow_null=True, help_text="Median seconds from the attributing view to the order; null: no order."
    ),
    "reconciled": serializers.BooleanField(help_text="True once the day's recount ran: final."),
    "subtree": inline_serializer(
        "QualitySubtreeDay",
        {
            "pv": serializers.IntegerField(help_text="Page views of the partner and its descendants."),
            "automated_pv": serializers.IntegerField(help_text="Their views a crawler list recognises."),
            "repeat_pv": serializers.IntegerField(help_text="Their repeat views (each under its partner)."),
            "listed_pv": serializers.IntegerField(help_text="Their views from networks staff listed."),
            "orders_by_view": serializers.IntegerField(
                help_text="Their own orders paid that day that a view attributed."
            ),
        },
        help_text="The sums over the partner and its descendants of the signals that add up. Distinct "
        "addresses and networks and the busiest addresses' share do not add up: they are the partner's own only.",
    ),
    "findings": inline_serializer(
        "QualityDayFinding",
        {
            "rule": serializers.ChoiceField(choices=Finding.Rule.values),
            "value": serializers.FloatField(),
            "threshold": serializers.FloatField(),
            "status": serializers.ChoiceField(choices=Finding.Status.values),
        },
        many=True,
    ),
    "top_addresses": inline_serializer(
        "QualityAddress",
        {"address": serializers.CharField(), "views": serializers.IntegerField()},
        many=True,
        required=False,
        help_text="Staff only (absent for a portal token): the busiest addresses, busiest first.",
    ),
}
_FINDING_FIELDS = {
    "partner": serializers.CharField(),
    "date": serializers.DateField(),
    "rule": serializers.ChoiceField(choices=Finding.Rule.values),
    "value": serializers.FloatField(help_text="The measured value (a share 0..1, seconds, or a ratio)."),
    "threshold": serializers.FloatField(),
    "status": serializers.ChoiceField(choices=Finding.Status.values),
    "resolved_by": serializers.CharField(allow_null=True, help_text="Who cleared or confirmed it."),
    "reason": serializers.CharField(help_text="Why it was cleared or confirmed; empty while open."),
}


def _day(
    date: dt.date, row: QualityDay | None, subtree: SubtreeDay, findings: list[Finding], *, staff: bool
) -> dict:
    row = row or QualityDay(date=date)
    answer = {
        "date": date.isoformat(),
        "pv": row.pv,
        "automated_pv": row.automated_pv,
        "repeat_pv": row.repeat_pv,
        "distinct_ips": row.distinct_ips,
        "distinct_networks": row.distinct_networks,
        "top_addresses_share": shares(row)["top_addresses_share"],
        "listed_pv": row.listed_pv,
        "orders_by_view": row.orders_by_view,
        "median_seconds_to_order": row.median_seconds_to_order,
        "reconciled": row.reconciled_at is not None,
        "subtree": {name: getattr(subtree, name) for name in SUBTREE_FIELDS},
        "findings": [
            {"rule": f.rule, "value": f.value, "threshold": f.threshold, "status": f.status} for f in findings
        ],
    }
    if staff:
        answer["top_addresses"] = [{"address": a, "views": v} for a, v in row.top_addresses]
    return answer


@extend_schema(
    summary="Traffic quality of one partner per day",
    description="One entry per business day from start to end, over the partner's own views, with the "
    "additive signals of its subtree beside them (`subtree`); flushed every minute, exact once reconciled. A "
    "portal token gets no client address.",
    parameters=[_CODE, QualityQuery],
    responses={
        200: inline_serializer(
            "PartnerQuality",
            {
                "partner": serializers.CharField(),
                "days": inline_serializer("QualityDay", dict(_DAY_FIELDS), many=True),
            },
        ),
        **error_responses(400, 404),
    },
)
@api_view(["GET"])
@permission_classes([QualityReaders])
def partner_quality(request: Request, code: str) -> Response:
    """Per day: the partner's views, automated and repeat views, addresses, listed networks and findings, and
    its subtree's sums of the signals that add up."""
    partner = get_visible_partner(request.user, code)
    params = query(QualityQuery, request, today=local_day(timezone.now()))
    start, end = params["start"], params["end"]
    rows = {row.date: row for row in quality_days(partner_id=partner.pk, start=start, end=end)}
    subtree = subtree_days(partner=partner, start=start, end=end)
    found = findings_by_day(partner_id=partner.pk, start=start, end=end)
    staff = request.user.is_staff
    days = [start + dt.timedelta(days=n) for n in range((end - start).days + 1)]
    return Response(
        {
            "partner": partner.code,
            "days": [
                _day(day, rows.get(day), subtree.get(day, SubtreeDay()), found.get(day, []), staff=staff)
                for day in days
            ],
        }
    )


def _findings(params: dict) -> QuerySet[Finding]:
    listed = Finding.objects.filter(date__range=(params["start"], params["end"]))
    if params.get("partner"):
        listed = listed.filter(partner__code=params["partner"])
    if params.get("status"):
        listed = listed.filter(status=params["status"])
    return listed.select_related("partner", "resolved_by").order_by("-date", "partner__code", "rule")


def _finding_row(finding: Finding) -> dict:
    return {
        "partner": finding.partner.code,
        "date": finding.date.isoformat(),
        "rule": finding.rule,
        "value": finding.value,
        "threshold": finding.threshold,
        "status": finding.status,
        "resolved_by": finding.resolved_by.get_username() if finding.resolved_by else None,
        "reason": finding.reason,
    }


@extend_schema(
    summary="Findings: partner-days that broke a traffic rule",
    description="Newest day first. Staff only.",
    parameters=[FindingsQuery, _PAGE],
    responses={
        200: inline_serializer(
            "FindingPage",
            {
                "count": serializers.IntegerField(),
                "next": serializers.URLField(allow_null=True),
                "previous": serializers.URLField(allow_null=True),
                "results": inline_serializer("FindingRow", dict(_FINDING_FIELDS), many=True),
            },
        ),
        **error_responses(400),
    },
)
@api_view(["GET"])
@permission_classes([FindingReaders])
def findings(request: Request) -> Response:
    """A page of the findings from start to end, optionally of one partner or one status."""
    params = query(FindingsQuery, request, today=local_day(timezone.now()))
    paginator = Pagination()
    page = paginator.paginate_queryset(_findings(params), request)
    return paginator.get_paginated_response([_finding_row(f) for f in page])
