"""List filters the apps' admin lists share."""

from collections.abc import Iterator
from typing import Any

from django.contrib import admin
from django.contrib.admin import ModelAdmin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import ValidationError
from django.db.models import Field, Model, QuerySet
from django.http import HttpRequest


class DateRangeFilter(admin.FieldListFilter):
    """``?<field>__gte=&<field>__lte=`` (inclusive), with a two-field form beside the list."""

    template = "admin/date_range_filter.html"

    def __init__(
        self,
        field: Field,
        request: HttpRequest,
        params: dict[str, list[str]],
        model: type[Model],
        model_admin: "ModelAdmin[Any]",  # generic to the checker only
        field_path: str,
    ) -> None:
        self.lookup_gte, self.lookup_lte = f"{field_path}__gte", f"{field_path}__lte"
        super().__init__(field, request, params, model, model_admin, field_path)

    def expected_parameters(self) -> list[str | None]:
        return [self.lookup_gte, self.lookup_lte]

    def has_output(self) -> bool:
        return True

    def _value(self, key: str) -> str:
        value = self.used_parameters.get(key, "")
        return str(value[-1] if isinstance(value, list) else value)

    def choices(self, changelist: ChangeList) -> Iterator[Any]:  # a form's fields, not a choice's link
        # One choice: the form in the template. Django's list of links does not fit a range.
        yield {
            "gte": self._value(self.lookup_gte),
            "lte": self._value(self.lookup_lte),
            "lookup_gte": self.lookup_gte,
            "lookup_lte": self.lookup_lte,
            # Every other parameter of the page (filters, search, ordering) rides along as a hidden field.
            "other": [
                (key, value)
                for key, value in changelist.params.items()
                if key not in (self.lookup_gte, self.lookup_lte)
            ],
            "clear": changelist.get_query_string(remove=[self.lookup_gte, self.lookup_lte]),
        }

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        values = {key: self._value(key) for key in (self.lookup_gte, self.lookup_lte) if self._value(key)}
        try:
            return queryset.filter(**values)
        except (ValidationError, ValueError) as exc:  # a malformed date: the list says so, no 500
            raise IncorrectLookupParameters(exc) from exc
