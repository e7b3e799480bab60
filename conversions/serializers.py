"""The query parameters of the conversions endpoints, one serializer per endpoint (see ``stats.read``)."""

import datetime as dt

from rest_framework import serializers

from conversions.selectors import OrderStatus
from cpsproject.common.params import QueryChoice, QueryDate, QueryMonth, QueryText, check_date_range


class _DayRange(serializers.Serializer):
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


class ConversionsQuery(_DayRange):
    pass


class OrdersQuery(_DayRange):
    partner = QueryText(
        required=False,
        help_text="A partner code: the orders of its subtree (as attributed). Without it: every order the "
        "caller may see (a portal: its subtree).",
    )
    status = QueryChoice(
        choices=list(OrderStatus.ALL),
        required=False,
        help_text="Only orders that are now paid, partly_refunded, refunded or cancelled.",
    )


class StatementsQuery(serializers.Serializer):
    month = QueryMonth(
        required=False,
        help_text="A closed month (YYYY-MM): the page of its ledger entries. Without it: the closed months.",
    )
