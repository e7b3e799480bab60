import datetime as dt

from django.utils import timezone
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from partners.permissions import get_visible_partner
from stats.params import date_param, date_range_params
from stats.selectors import partner_bucket_series, partner_days
from stats.timeutil import local_day


@api_view(["GET"])
def partner_stats(request: Request, code: str) -> Response:
    """Days of PV/UV (subtree and own) for one partner; reconciled days are final."""
    partner = get_visible_partner(request.user, code)
    today = local_day(timezone.now())
    start, end = date_range_params(
        request.query_params, default_start=today - dt.timedelta(days=6), default_end=today
    )
    days = partner_days(partner=partner, start=start, end=end)
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
    day = date_param(request.query_params, "date", default=local_day(timezone.now()))
    return Response(
        [
            {"start": start.isoformat(), "pv": pv, "pv_self": pv_self}
            for start, pv, pv_self in partner_bucket_series(partner=partner, day=day)
        ]
    )
