"""CSV export of admin change lists: the rows the current filters and search select, streamed.

A year of 1,000 partners is 365,000 rows. ``QuerySet.iterator()`` would not bound memory on MySQL (mysqlclient
reads the whole result set into the client), so the export reads the rows in the change list's order,
``CHUNK_ROWS`` at a time, each chunk starting after the last row of the one before (keyset pagination:
``WHERE (date, pk) < (last date, last pk) ORDER BY date DESC, pk DESC LIMIT n``), and the shared writer
(``csv_export``) yields encoded lines as it goes. Memory stays flat whatever the size; the file lists the rows
as the list on screen does. Files start with a UTF-8 byte order mark so that spreadsheets read Chinese right.
"""

import datetime as dt
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ERROR_FLAG
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.models import F, Model, OrderBy, Q, QuerySet
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone

from cpsproject.common.csv_export import csv_response
from cpsproject.common.labels import Label

CHUNK_ROWS = 2000

if TYPE_CHECKING:  # the mixin's methods call the ModelAdmin's it is mixed into
    _AdminBase = admin.ModelAdmin[Any]
else:
    _AdminBase = object


def _cell(value: object) -> object:
    if isinstance(value, dt.datetime):
        return timezone.localtime(value).isoformat() if timezone.is_aware(value) else value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    return "" if value is None else value


def csv_download(
    rows: Iterable[Sequence[object]], *, header: Sequence[Label], filename: str
) -> StreamingHttpResponse:
    """Stream ``rows`` as a CSV download for staff: UTF-8 with a BOM, formulas defused, times in business time."""
    return csv_response(
        ([_cell(value) for value in row] for row in rows),
        header=[str(title) for title in header],
        filename=filename,
        bom=True,
        excel_safe=True,
    )


def _ordering(queryset: QuerySet[Any]) -> list[tuple[str, bool]]:
    """The queryset's ordering as ``(lookup, descending)`` pairs, or [] when it is not plain lookups."""
    terms = list(queryset.query.order_by or queryset.query.get_meta().ordering or ["pk"])
    keys = []
    for term in terms:
        if isinstance(term, str) and term != "?":
            keys.extend(_related_ordering(queryset.model, term.lstrip("-"), term.startswith("-")))
        elif isinstance(term, OrderBy) and isinstance(term.expression, F) and term.nulls_first is None:
            keys.extend(_related_ordering(queryset.model, term.expression.name, term.descending))
        else:
            return []
    if not any(lookup in ("pk", queryset.model._meta.pk.name) for lookup, _descending in keys):
        keys.append(("pk", False))  # a total order: rows with equal keys would otherwise repeat or vanish
    return keys


def _related_ordering(model: type[Model], lookup: str, descending: bool) -> list[tuple[str, bool]]:
    """``lookup`` as the database orders it: a relation sorts by its model's own ``Meta.ordering``.

    The change list sorted by a partner column orders by ``partner__path`` (Django expands the relation the
    same way); sorting the export by the key ``partner_id`` instead would list the rows in another order.
    """
    field = None
    for part in lookup.split(LOOKUP_SEP):
        if part == "pk":
            return [(lookup, descending)]
        field = model._meta.get_field(part)
        related = field.related_model if field.is_relation else model
        if related is None:  # a generic relation: no model of its own to order by
            return [(lookup, descending)]
        model = related
    if field is None or not field.is_relation or not model._meta.ordering:
        return [(lookup, descending)]
    terms = [term for term in model._meta.ordering if isinstance(term, str)]
    if len(terms) != len(model._meta.ordering):
        return [(lookup, descending)]
    return [(f"{lookup}{LOOKUP_SEP}{term.lstrip('-')}", descending != term.startswith("-")) for term in terms]


def _after(keys: list[tuple[str, bool]], last: Sequence[object]) -> Q:
    """The rows that come after the row whose ordering keys are ``last``, in that ordering.

    Where NULL sorts depends on the database; ``nulls_order_largest`` says which end.
    """
    nulls_largest = connection.features.nulls_order_largest
    after = Q(pk__in=[])
    equal = Q()
    for index, ((_lookup, descending), value) in enumerate(zip(keys, last, strict=True)):
        name = f"_csv_key{index}"
        null_after = nulls_largest != descending  # NULL is met after every value in this direction
        if value is None:
            step = Q(pk__in=[]) if null_after else Q(**{f"{name}__isnull": False})
            same = Q(**{f"{name}__isnull": True})
        else:
            step = Q(**{f"{name}__{'lt' if descending else 'gt'}": value})
            if null_after:
                step |= Q(**{f"{name}__isnull": True})
            same = Q(**{name: value})
        after |= equal & step
        equal &= same
    return after


def keyset_rows(
    queryset: QuerySet[Any], lookups: Sequence[str], *, chunk: int | None = None
) -> Iterator[tuple[Any, ...]]:
    """Yield ``values_list(*lookups)`` of every row of ``queryset`` in its own order, one chunk per query.

    Each chunk starts after the last row of the one before (``WHERE keys > last``), so no query reads the rows
    already written; an ordering that is not plain lookups (an expression) falls back to OFFSET chunks.
    """
    chunk = chunk or CHUNK_ROWS
    keys = _ordering(queryset)
    if not keys:
        for start in itertools.count(0, chunk):
            rows = list(queryset.values_list(*lookups)[start : start + chunk])
            yield from rows
            if len(rows) < chunk:
                return
    names = [f"_csv_key{index}" for index in range(len(keys))]
    ordered = queryset.annotate(**{name: F(lookup) for name, (lookup, _d) in zip(names, keys, strict=True)})
    ordered = ordered.order_by(
        *(f"-{name}" if desc else name for name, (_l, desc) in zip(names, keys, strict=True))
    )
    last = None
    while True:
        page = ordered if last is None else ordered.filter(_after(keys, last))
        rows = list(page.values_list(*names, *lookups)[:chunk])
        for row in rows:
            yield row[len(names) :]
        if len(rows) < chunk:
            return
        last = rows[-1][: len(names)]


class CsvExportMixin(_AdminBase):
    """Add ``export.csv`` beside a ModelAdmin's change list, selecting what the change list shows.

    ``csv_fields`` lists ``(header, lookup)`` pairs; a lookup is anything ``values_list`` takes
    (``"partner__code"``). The change list's filters, search and ordering come from the same query string.
    """

    csv_fields: Sequence[tuple[Label, str]] = ()

    def csv_row(self, values: tuple[Any, ...]) -> Sequence[object]:
        """Turn one ``values_list`` row into CSV cells; override to render a stored code readably."""
        return values

    def csv_rows(self, rows: Iterator[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        """The ``values_list`` rows to write, before ``csv_row``; override to replace some rows' values."""
        return rows

    def get_urls(self) -> list[URLPattern]:
        name = f"{self.opts.app_label}_{self.opts.model_name}_csv"
        export = path("export.csv", self.admin_site.admin_view(self.export_csv_view), name=name)
        return [export, *super().get_urls()]

    def csv_url(self, request: HttpRequest) -> str:
        url = reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_csv", current_app=self.admin_site.name
        )
        query = request.GET.urlencode()
        return f"{url}?{query}" if query else url

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra_context = {**(extra_context or {}), "csv_url": self.csv_url(request)}
        return super().changelist_view(request, extra_context=extra_context)

    def export_csv_view(self, request: HttpRequest) -> StreamingHttpResponse | HttpResponseRedirect:
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            changelist = self.get_changelist_instance(request)
        except IncorrectLookupParameters:
            # What the change list itself does with a filter it cannot apply.
            changelist_url = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist")
            return HttpResponseRedirect(f"{changelist_url}?{ERROR_FLAG}=1")
        queryset = changelist.get_queryset(request)
        lookups = [lookup for _title, lookup in self.csv_fields]
        rows = map(self.csv_row, self.csv_rows(keyset_rows(queryset, lookups)))
        stamp = timezone.localtime().strftime("%Y%m%d-%H%M")
        return csv_download(
            rows,
            header=[title for title, _lookup in self.csv_fields],
            filename=f"{self.opts.model_name}-{stamp}.csv",
        )


class ReadOnlyCsvAdmin(CsvExportMixin, admin.ModelAdmin):
    """Rows the pipeline and the jobs write: staff with the model's view permission read and download them,
    nobody adds, edits or deletes one."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False
