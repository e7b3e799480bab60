"""The query parameters of the login endpoints, one serializer per endpoint.

Each validates ``request.query_params`` (``cpsproject.common.params.query``) and is what the schema documents.
Defaults that depend on the clock (today, this month) are applied from the context's ``today``.
"""

import datetime as dt
from typing import Any

from django.utils.translation import gettext_lazy
from rest_framework import serializers

from cpsproject.common.params import MAX_PAGE, QueryChoice, QueryDate, QueryInt, QueryMonth, check_date_range
from loginlog.validation import user_types


class LoginRangeQuery(serializers.Serializer):
    start = QueryDate(required=False, help_text="First day, inclusive. Default: the first of this month.")
    end = QueryDate(
        required=False, help_text="Last day, inclusive. Default: today. At most CPS_API_MAX_RANGE_DAYS days."
    )
    month = QueryMonth(required=False, help_text="YYYY-MM: the whole month, instead of start and end.")

    def validate(self, attrs: dict) -> dict:
        if "month" in attrs:
            attrs["start"], attrs["end"] = attrs.pop("month")
            return attrs
        today: dt.date = self.context["today"]
        attrs.setdefault("start", today.replace(day=1))
        attrs.setdefault("end", today)
        check_date_range(attrs["start"], attrs["end"])
        return attrs


class ActiveQuery(LoginRangeQuery):
    user_type = QueryChoice(
        choices=[],
        required=False,
        help_text="One of the configured user types (client, office). Default: all.",
    )
    page = QueryInt(
        min_value=1, max_value=MAX_PAGE, required=False, default=1, help_text="Page number from 1."
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["user_type"].choices = user_types()  # a setting: read when the request comes


class CountsQuery(serializers.Serializer):
    user_type = QueryChoice(
        choices=[],
        help_text="One of the configured user types (client, office).",
        error_messages={
            "required": gettext_lazy("user_type is required (one of the configured user types).")
        },
    )
    date = QueryDate(required=False, help_text="The day (YYYY-MM-DD). Default: today.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["user_type"].choices = user_types()
