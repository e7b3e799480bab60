"""The query parameters of the stats endpoints, one serializer per endpoint.

Each validates ``request.query_params`` (``cpsproject.common.params.query``) and is the endpoint's documented
parameters (``@extend_schema(parameters=[…])``): type, format, enum and bounds come from the same fields.
Defaults that depend on the clock (today, now) are the endpoint's, applied to what is left out.
"""

import datetime as dt
from typing import Any

from rest_framework import serializers

from cpsproject.common.params import QueryChoice, QueryDate, QueryInt, QueryText, check_date_range
from stats.counters.rankings import windows
from stats.counters.series import precisions


class StatsQuery(serializers.Serializer):
    start = QueryDate(
        required=False,
        help_text="First day, inclusive (YYYY-MM-DD, business time zone). Default: six days before end.",
    )
    end = QueryDate(
        required=False,
        help_text="Last day, inclusive. Default: today. The range may cover at most CPS_API_MAX_RANGE_DAYS "
        "days (366).",
    )

    def validate(self, attrs: dict) -> dict:
        today: dt.date = self.context["today"]
        attrs.setdefault("start", today - dt.timedelta(days=6))
        attrs.setdefault("end", today)
        check_date_range(attrs["start"], attrs["end"])
        return attrs


class BucketsQuery(serializers.Serializer):
    date = QueryDate(required=False, help_text="The day (YYYY-MM-DD, business time zone). Default: today.")


class RankingsQuery(serializers.Serializer):
    window = QueryChoice(
        choices=[], required=False, default="24h", help_text="The sliding window. Default 24h."
    )
    scope = QueryChoice(
        choices=["tree", "self"],
        required=False,
        default="tree",
        help_text="tree (default): a partner's whole subtree PV; self: its own PV only.",
    )
    limit = QueryInt(
        min_value=1, max_value=1000, required=False, default=10, help_text="How many partners. Default 10."
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["window"].choices = list(windows())  # a setting: read when the request comes


class SeriesQuery(serializers.Serializer):
    precision = QueryChoice(
        choices=[], required=False, default=60, help_text="Sample length in seconds. Default 60."
    )
    partner = QueryText(
        required=False,
        help_text="A partner code: its subtree's PV. Without it (staff only): every human PV of the site.",
    )
    start = QueryText(
        required=False,
        help_text="A date (its first instant) or an ISO-8601 datetime. Default: 59 samples before end.",
    )
    end = QueryText(
        required=False, help_text="A date (its last instant) or an ISO-8601 datetime. Default: now."
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["precision"].choices = sorted(precisions())
