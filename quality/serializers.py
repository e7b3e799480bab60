"""The query parameters of the quality endpoints, one serializer per endpoint (see ``stats.read``)."""

import datetime as dt

from rest_framework import serializers

from cpsproject.common.params import QueryChoice, QueryDate, QueryText, check_date_range
from quality.models import Finding


class QualityQuery(serializers.Serializer):
    start = QueryDate(
        required=False,
        help_text="First business day, inclusive (YYYY-MM-DD, business time zone). Default: six days before end.",
    )
    end = QueryDate(
        required=False,
        help_text="Last business day, inclusive. Default: today. At most CPS_API_MAX_RANGE_DAYS days (366).",
    )

    def validate(self, attrs: dict) -> dict:
        today: dt.date = self.context["today"]
        attrs.setdefault("end", today)
        attrs.setdefault("start", attrs["end"] - dt.timedelta(days=6))
        check_date_range(attrs["start"], attrs["end"])
        return attrs


class FindingsQuery(QualityQuery):
    partner = QueryText(required=False, help_text="A partner code: only its findings.")
    status = QueryChoice(
        choices=list(Finding.Status.values),
        required=False,
        help_text="Only findings open, cleared or confirmed.",
    )
