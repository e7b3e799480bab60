import datetime as dt

from django.utils import timezone
from rest_framework.decorators import api_view
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from cpsproject.common.params import choice_param, date_param, date_range_params, datetime_param, int_param
from cpsproject.common.timeutil import local_day
from partners.permissions import get_visible_partner, visible_partners
from stats.counters.rankings import top_partners, windows
from stats.counters.series import ALL_TRAFFIC, MAX_POINTS, partner_counter, precisions, read_series
from stats.read.selectors import partner_bucket_series, partner_days


@api_view(["GET"])
def partner_stats(request: Request, code: str) -> Response:
    """Days of PV/UV (subtree and own) for one partner; reconciled days are final."""
    partner = get_visible_partner(request.user, code)
    now = timezone.now()  # one clock reading per request
    today = local_day(now)
    start, end = date_range_params(
        request.query_params, default_start=today - dt.timedelta(days=6), default_end=today
    )
    days = partner_days(partner=partner, start=start, end=end, now=now)
    return Response(
        {
            "partner": partner.code,
            "days": [
                {
                    "date": d.date.isoformat(),
                    "pv": d.pv,
                    "uv": d.uv,
                    "pv_self": d.pv_self,
                    "uv_self": d.uv_self,
                    "reconciled": d.reconciled,
                }
                for d in days
            ],
            "total_pv": sum(d.pv for d in days),
        }
    )


@api_view(["GET"])
def partner_buckets(request: Request, code: str) -> Response:
    """The 5-minute PV series of one partner-day, zero-filled."""
    partner = get_visible_partner(request.user, code)
    now = timezone.now()
    day = date_param(request.query_params, "date", default=local_day(now))
    return Response(
        [
            {"start": start.isoformat(), "pv": pv, "pv_self": pv_self}
            for start, pv, pv_self in partner_bucket_series(partner=partner, day=day, now=now)
        ]
    )


@api_view(["GET"])
def partner_rankings(request: Request) -> Response:
    """Top partners by PV over a sliding window; a portal token sees its own subtree ranked."""
    params = request.query_params
    window = choice_param(params, "window", choices=list(windows()), default="24h")
    scope = choice_param(params, "scope", choices=["tree", "self"], default="tree")
    limit = int_param(params, "limit", default=10, low=1, high=1000)
    among = None
    if not request.user.is_staff:
        among = set(visible_partners(request.user).values_list("code", flat=True))
    ranked = top_partners(window=window, scope=scope, limit=limit, among=among, now=timezone.now())
    return Response([{"rank": r.rank, "partner": r.partner, "pv": r.pv} for r in ranked])


@api_view(["GET"])
def series(request: Request) -> Response:
    """Zero-filled counts at one precision for the site (human PV) or one partner's subtree."""
    params = request.query_params
    precision = int(choice_param(params, "precision", choices=[str(p) for p in precisions()], default="60"))
    if params.get("partner"):
        counter = partner_counter(get_visible_partner(request.user, params["partner"]).code)
    elif request.user.is_staff:
        counter = ALL_TRAFFIC
    else:
        raise ValidationError({"partner": "partner is required with a portal token."})
    end = datetime_param(params, "end", default=timezone.now())
    start = datetime_param(params, "start", default=end - dt.timedelta(seconds=precision * 59))
    if end < start:
        raise ValidationError({"end": "end must not be before start."})
    if (end - start).total_seconds() / precision >= MAX_POINTS:
        raise ValidationError({"start": f"the range holds more than {MAX_POINTS} samples at this precision."})
    points = read_series(counter=counter, precision=precision, start=start, end=end)
    return Response([{"ts": ts.isoformat(), "count": count} for ts, count in points])
