"""The query parameters of the conversions endpoints, one serializer per endpoint (see ``stats.read``)."""

from rest_framework import serializers

from conversions.selectors import OrderStatus
from cpsproject.common.params import BusinessDayRangeQuery, QueryChoice, QueryMonth, QueryText


class ConversionsQuery(BusinessDayRangeQuery):
    pass


class OrdersQuery(BusinessDayRangeQuery):
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
