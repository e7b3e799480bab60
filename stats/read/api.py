"""The stats endpoints of /api/v1/: partner days, 5-minute buckets, rankings and time series.

Each reads the clock once per request and validates its parameters with its serializer (``serializers``, on
``cpsproject.common.params``: a 400 naming the parameter). Each answers JSON, or with ``?format=csv`` a
streamed CSV of the same rows.
"""

import datetime as dt
from collections.abc import Iterable, Sequence

import orjson
from django.http import HttpResponseBase
from django.utils import timezone
from django.utils.translation import gettext
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes, renderer_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from cpsproject.common.csv_api import CSVRenderer, csv_format_parameter, csv_response_doc
from cpsproject.common.csv_export import csv_response
from cpsproject.common.json_rendering import RenderedJSON
from cpsproject.common.params import (
    error_responses,
    moment_range_params,
    query,
)
from cpsproject.common.timeutil import epoch, floor_local, local_day
from partners.permissions import IsStaffOrPortal, get_visible_partner, visible_partners
from stats.counters.rankings import top_partners
from stats.counters.series import ALL_TRAFFIC, MAX_POINTS, partner_counter, read_series
from stats.read.selectors import partner_bucket_series, partner_days, partner_days_json
from stats.read.serializers import BucketsQuery, RankingsQuery, SeriesQuery, StatsQuery

RENDERERS = [*api_settings.DEFAULT_RENDERER_CLASSES, CSVRenderer]


class DailyReaders(IsStaffOrPortal):
    staff_perms = ("stats.view_dailystat",)


class BucketReaders(IsStaffOrPortal):
    staff_perms = ("stats.view_bucketstat",)


def _wants_csv(request: Request) -> bool:
    return getattr(request.accepted_renderer, "format", None) == CSVRenderer.format


def _answer(
    request: Request, data: object, *, rows: Iterable[Sequence[object]], header: Sequence[str], filename: str
) -> Response | HttpResponseBase:
    """``data`` as JSON, or ``rows`` as a streamed CSV when the request asked for ``format=csv``."""
    if _wants_csv(request):
        return csv_response(rows, header=header, filename=filename)
    return Response(data)


# --- Documentation: parameters and bodies as the schema shows them ---------------------------------------

_CODE = OpenApiParameter(
    "code", str, OpenApiParameter.PATH, description="A partner code the caller may see (else 404)."
)
_DAY_FIELDS = (
    "PartnerDay",
    {
        "date": serializers.DateField(),
        "pv": serializers.IntegerField(help_text="PV of the partner's whole subtree."),
        "uv": serializers.IntegerField(help_text="Distinct users across the subtree."),
        "pv_self": serializers.IntegerField(help_text="The partner's own PV."),
        "uv_self": serializers.IntegerField(help_text="The partner's own distinct users."),
        "reconciled": serializers.BooleanField(help_text="True once the nightly exact recount ran: final."),
    },
)
_STATS = inline_serializer(
    "PartnerStats",
    {
        "partner": serializers.CharField(),
        "days": inline_serializer(*_DAY_FIELDS, many=True),
        "total_pv": serializers.IntegerField(),
    },
)
_BUCKET = inline_serializer(
    "Bucket",
    {
        "start": serializers.DateTimeField(),
        "pv": serializers.IntegerField(),
        "pv_self": serializers.IntegerField(),
    },
    many=True,
)
_RANK = inline_serializer(
    "Rank",
    {
        "rank": serializers.IntegerField(),
        "partner": serializers.CharField(),
        "pv": serializers.IntegerField(),
    },
    many=True,
)
_SAMPLE = inline_serializer(
    "Sample", {"ts": serializers.DateTimeField(), "count": serializers.IntegerField()}, many=True
)

STATS_HEADER = ["partner", "date", "pv", "uv", "pv_self", "uv_self", "reconciled"]
BUCKETS_HEADER = ["start", "pv", "pv_self"]
RANKINGS_HEADER = ["rank", "partner", "pv"]
SERIES_HEADER = ["ts", "count"]


@extend_schema(
    summary="Daily PV and UV of one partner",
    description="One entry per day from start to end; unflushed Redis counts included, reconciled days final.",
    parameters=[_CODE, StatsQuery, csv_format_parameter()],
    responses={
        (200, "application/json"): _STATS,
        (200, "text/csv"): csv_response_doc(STATS_HEADER),
        **error_responses(400, 404),
    },
    examples=[
        OpenApiExample(
            "One day",
            value={
                "partner": "P001",
                "days": [
                    {
                        "date": "2026-11-21",
                        "pv": 120,
                        "uv": 80,
                        "pv_self": 20,
                        "uv_self": 15,
                        "reconciled": True,
                    }
                ],
                "total_pv": 120,
            },
            response_only=True,
            media_type="application/json",
        )
    ],
)
@api_view(["GET"])
@permission_classes([DailyReaders])
@renderer_classes(RENDERERS)
def partner_stats(request: Request, code: str) -> Response | HttpResponseBase:
    """Days of PV/UV (subtree and own) for one partner; reconciled days are final."""
    partner = get_visible_partner(request.user, code)
    now = timezone.now()  # one clock reading per request
    params = query(StatsQuery, request, today=local_day(now))
    start, end = params["start"], params["end"]
    if _wants_csv(request):
        days = partner_days(partner=partner, start=start, end=end, now=now)
        rows = ([partner.code, *day] for day in days)
        return csv_response(rows, header=STATS_HEADER, filename=f"{partner.code}-{start}-{end}.csv")
    days_json, total_pv = partner_days_json(partner=partner, start=start, end=end, now=now)
    return Response(
        RenderedJSON(
            b'{"partner":%b,"days":%b,"total_pv":%d}' % (orjson.dumps(partner.code), days_json, total_pv)
        )
    )


@extend_schema(
    summary="The 5-minute PV buckets of one partner-day",
    description="288 buckets from 00:00 to 23:55 (business time), zero-filled.",
    parameters=[_CODE, BucketsQuery, csv_format_parameter()],
    responses={
        (200, "application/json"): _BUCKET,
        (200, "text/csv"): csv_response_doc(BUCKETS_HEADER),
        **error_responses(400, 404),
    },
)
@api_view(["GET"])
@permission_classes([BucketReaders])
@renderer_classes(RENDERERS)
def partner_buckets(request: Request, code: str) -> Response | HttpResponseBase:
    """The 5-minute PV series of one partner-day, zero-filled."""
    partner = get_visible_partner(request.user, code)
    now = timezone.now()
    day = query(BucketsQuery, request).get("date") or local_day(now)
    body = [
        {"start": start.isoformat(), "pv": pv, "pv_self": pv_self}
        for start, pv, pv_self in partner_bucket_series(partner=partner, day=day, now=now)
    ]
    rows = ([b["start"], b["pv"], b["pv_self"]] for b in body)
    return _answer(
        request, body, rows=rows, header=BUCKETS_HEADER, filename=f"{partner.code}-{day}-buckets.csv"
    )


@extend_schema(
    summary="Top partners by PV over a sliding window",
    description="Staff see every partner; a portal token sees its own subtree ranked.",
    parameters=[RankingsQuery, csv_format_parameter()],
    responses={
        (200, "application/json"): _RANK,
        (200, "text/csv"): csv_response_doc(RANKINGS_HEADER),
        **error_responses(400),
    },
)
@api_view(["GET"])
@permission_classes([DailyReaders])
@renderer_classes(RENDERERS)
def partner_rankings(request: Request) -> Response | HttpResponseBase:
    """Top partners by PV over a sliding window; a portal token sees its own subtree ranked."""
    params = query(RankingsQuery, request)
    window, scope, limit = params["window"], params["scope"], params["limit"]
    among = None
    if not request.user.is_staff:
        among = set(visible_partners(request.user).values_list("code", flat=True))
    ranked = top_partners(window=window, scope=scope, limit=limit, among=among, now=timezone.now())
    body = [{"rank": r.rank, "partner": r.partner, "pv": r.pv} for r in ranked]
    rows = ([r["rank"], r["partner"], r["pv"]] for r in body)
    return _answer(
        request, body, rows=rows, header=RANKINGS_HEADER, filename=f"rankings-{window}-{scope}.csv"
    )


@extend_schema(
    summary="PV counts at one precision",
    description=(
        "Zero-filled samples from the one holding start to the one holding end. A date means its whole "
        "business day: `start=D&end=D` at precision 60 is the 1,440 minutes of D. A datetime is that instant "
        f"(no offset: business time). At most {MAX_POINTS} samples: a longer range is a 400 naming start."
    ),
    parameters=[
        SeriesQuery,
        csv_format_parameter(),
    ],
    responses={
        (200, "application/json"): _SAMPLE,
        (200, "text/csv"): csv_response_doc(SERIES_HEADER),
        **error_responses(400, 404),
    },
    examples=[
        OpenApiExample(
            "A minute",
            value={"ts": "2026-11-21T08:01:00+08:00", "count": 3},
            response_only=True,
            media_type="application/json",
        )
    ],
)
@api_view(["GET"])
@permission_classes([DailyReaders])
@renderer_classes(RENDERERS)
def series(request: Request) -> Response | HttpResponseBase:
    """Zero-filled counts at one precision for the site (human PV) or one partner's subtree."""
    given = query(SeriesQuery, request)
    precision = given["precision"]
    params = request.query_params  # start and end: dates or datetimes, read with their defaults below
    if given.get("partner"):
        code = get_visible_partner(request.user, given["partner"]).code
        counter = partner_counter(code)
    elif request.user.is_staff:
        code, counter = ALL_TRAFFIC, ALL_TRAFFIC
    else:
        raise ValidationError({"partner": gettext("partner is required with a portal token.")})
    start, end = moment_range_params(
        params,
        default_end=timezone.now(),
        default_span=dt.timedelta(seconds=precision * 59),
    )
    samples = (epoch(floor_local(end, precision)) - epoch(floor_local(start, precision))) // precision + 1
    if samples > MAX_POINTS:
        raise ValidationError(
            {
                "start": gettext(
                    "start..end holds %(samples)d samples at precision %(precision)d, more than %(most)d: "
                    "shorten the range or choose a coarser precision."
                )
                % {"samples": samples, "precision": precision, "most": MAX_POINTS}
            }
        )
    points = read_series(counter=counter, precision=precision, start=start, end=end)
    body = [{"ts": ts.isoformat(), "count": count} for ts, count in points]
    rows = ([p["ts"], p["count"]] for p in body)
    return _answer(request, body, rows=rows, header=SERIES_HEADER, filename=f"series-{code}-{precision}.csv")
