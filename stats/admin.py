import datetime as dt
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from django.contrib import admin
from django.db.models import BinaryField, Count, Model, QuerySet
from django.db.models.functions import Length, Substr
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.formats import date_format, number_format
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from cpsproject.common.admin_csv import CsvExportMixin, ReadOnlyCsvAdmin
from cpsproject.common.admin_filters import DateRangeFilter
from cpsproject.common.labels import Label
from cpsproject.common.timeutil import to_local
from partners.models import Partner
from stats.models import BucketStat, DailyStat, DeadLetter, ReconcileDrift
from stats.read.selectors import DayNumbers, daily_list_totals, open_list_days, open_row_numbers

if TYPE_CHECKING:  # generic to the checker only
    from django.contrib.admin import ModelAdmin

# A row of the statistics lists (each has a partner, None for the traffic without one).
StatRow = DailyStat | BucketStat | ReconcileDrift


class ReadOnlyAdmin(ReadOnlyCsvAdmin):
    """Numbers come from the pipeline: staff with the model's view permission (the "statistics viewers" group,
    ``cpsproject.common.viewers``) look at them, and nobody edits them."""


def grouped(value: int | None) -> str:
    """A count as the reader's language writes it (``50,533``); CSV keeps the raw number."""
    return "—" if value is None else number_format(value, force_grouping=True)


def count_column(name: str, description: Label, *, figure: str | None = None) -> Callable[[Model], str]:
    """A ``list_display`` column showing the model field ``name`` grouped, sortable by it.

    A function named after the field, so that the cell keeps the field's CSS class (``field-pv``); the admin
    would display the field itself, ungrouped, for a ModelAdmin method of its name. ``figure``: the
    ``DayNumbers`` field shown instead on a row whose day is still open (``open_figures``).
    """

    @admin.display(description=description, ordering=name)
    def column(obj: Model) -> str:
        live = getattr(obj, "open_figures", None)
        return grouped(getattr(live, figure) if live is not None and figure else getattr(obj, name))

    column.__name__ = column.__qualname__ = name
    return column


# A lazy translation as empty_value works as any other label (the stubs ask for str).
@admin.display(description=_("partner"), ordering="partner", empty_value=_("traffic without a partner"))  # type: ignore[call-overload]
def partner(obj: StatRow) -> Partner | None:
    """The row's partner; a row of the traffic with no partner says so, rather than the admin's "-"."""
    return obj.partner


class DailyDateRangeFilter(DateRangeFilter):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.title = _("date range")


class ParentFilter(admin.SimpleListFilter):
    title = _("parent partner")
    parameter_name = "parent"

    def lookups(self, request: HttpRequest, model_admin: "ModelAdmin[Any]") -> list[tuple[str, str]]:
        parents = Partner.objects.annotate(n=Count("children")).filter(n__gt=0).order_by("path")
        return [(p.code, f"{'· ' * (p.level - 1)}{p.code} {p.name}") for p in parents]

    def queryset(self, request: HttpRequest, queryset: QuerySet[DailyStat]) -> QuerySet[DailyStat]:
        if self.value():
            return queryset.filter(partner__parent__code=self.value())
        return queryset


class ReconciledFilter(admin.SimpleListFilter):
    title = _("reconciled")
    parameter_name = "reconciled"

    def lookups(self, request: HttpRequest, model_admin: "ModelAdmin[Any]") -> list[tuple[str, Label]]:
        return [("yes", _("Yes, exact")), ("no", _("No, realtime"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[DailyStat]) -> QuerySet[DailyStat]:
        if self.value() == "yes":
            return queryset.filter(reconciled_at__isnull=False)
        if self.value() == "no":
            return queryset.filter(reconciled_at__isnull=True)
        return queryset


# Merging the HyperLogLogs of more rows than this would load too many 12 kB blobs for one page.
TOTAL_UV_MAX_ROWS = 400


def _show_open(row: DailyStat, figures: DayNumbers | None, now: dt.datetime) -> None:
    """Give a row of an open day the figures the dashboard shows (None: the row's own), and as of when."""
    vars(row).update(open_figures=figures, open_as_of=to_local(now))  # read by the columns, not stored


def _open_as_of(row: DailyStat) -> dt.datetime:
    return vars(row)["open_as_of"]


@admin.display(description=_("reconciled at"), ordering="reconciled_at")
def reconciled_at(obj: DailyStat) -> str:
    """When the day was reconciled; a day still open says that its figures are live, and as of when."""
    if obj.reconciled_at is not None:
        return date_format(to_local(obj.reconciled_at), "DATETIME_FORMAT")
    if getattr(obj, "open_figures", None) is not None:
        return _("not yet: live, as of %(time)s") % {"time": date_format(_open_as_of(obj), "H:i")}
    return "—"


@admin.register(DailyStat)
class DailyStatAdmin(ReadOnlyAdmin):
    """Stored days, except that a day still open (``open_list_days``) shows what the dashboard and the API
    show: the flushed rows plus what Redis holds, marked as such in the "reconciled at" column."""

    list_display: list[Any] = [
        "date",
        partner,
        count_column("pv", _("PV"), figure="pv"),
        count_column("uv", _("UV"), figure="uv"),
        count_column("pv_self", _("own PV"), figure="pv_self"),
        count_column("uv_self", _("own UV"), figure="uv_self"),
        count_column("bot_pv", _("bot PV")),
        reconciled_at,
    ]
    # The page of one row: the list's figures, then what the last flush stored apart for the drift.
    fields: ClassVar[list[Any]] = [
        *list_display,
        count_column("realtime_pv", _("realtime PV")),
        count_column("realtime_pv_self", _("realtime own PV")),
        count_column("realtime_uv", _("realtime UV")),
        count_column("realtime_uv_self", _("realtime own UV")),
        "updated_at",
    ]
    readonly_fields = fields
    list_filter = [("date", DailyDateRangeFilter), "partner__level", ParentFilter, ReconciledFilter]
    search_fields = ["partner__code", "partner__name"]
    date_hierarchy = "date"
    list_select_related = ["partner"]
    csv_fields = [
        (_("date"), "date"),
        (_("partner code"), "partner__code"),
        (_("partner name"), "partner__name"),
        (_("level"), "partner__level"),
        ("PV", "pv"),
        ("UV", "uv"),
        (_("own PV"), "pv_self"),
        (_("own UV"), "uv_self"),
        (_("bot PV"), "bot_pv"),
        (_("reconciled at"), "reconciled_at"),
    ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        response = super().changelist_view(request, extra_context=extra_context)
        # A redirect (a filter the list cannot apply) has no list to add to.
        context = response.context_data if isinstance(response, TemplateResponse) else None
        changelist = context.get("cl") if context is not None else None
        if context is not None and changelist is not None:
            now = timezone.now()  # one clock reading for the rows and the totals
            rows = list(changelist.result_list)
            live = open_row_numbers(
                rows=[(row.partner, row.date, row.reconciled_at is not None) for row in rows], now=now
            )
            for row in rows:
                _show_open(row, live.get((row.partner_id, row.date)), now)
            changelist.result_list = rows
            context["totals"] = daily_list_totals(
                queryset=changelist.queryset, now=now, uv_max_rows=TOTAL_UV_MAX_ROWS
            )
        return response

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> DailyStat | None:
        row = super().get_object(request, object_id, from_field)
        if row is not None and row.reconciled_at is None:
            now = timezone.now()
            live = open_row_numbers(rows=[(row.partner, row.date, False)], now=now)
            _show_open(row, live.get((row.partner_id, row.date)), now)
        return row

    def csv_rows(self, rows: Iterator[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        """The open days' rows with the figures the list shows (lookups: ``csv_fields``)."""
        now = timezone.now()
        first, last = open_list_days(now)
        partners: dict[str, Partner] = {}
        for row in rows:
            day, code, *_rest, reconciled = row
            if reconciled is None and first <= day <= last:
                if code is not None and code not in partners:
                    partners[code] = Partner.objects.get(code=code)
                partner = partners.get(code)
                figures: DayNumbers | None = open_row_numbers(rows=[(partner, day, False)], now=now).get(
                    (partner.pk if partner else None, day)
                )
                if figures is not None:
                    row = (*row[:4], figures.pv, figures.uv, figures.pv_self, figures.uv_self, *row[8:])
            yield row


@admin.register(BucketStat)
class BucketStatAdmin(ReadOnlyAdmin):
    list_display = [
        "start",
        partner,
        count_column("pv", _("PV")),
        count_column("pv_self", _("own PV")),
        count_column("bot_pv", _("bot PV")),
        "generation",
        "flushed_at",
    ]
    search_fields = ["partner__code", "partner__name"]
    # Not date_hierarchy: on a DateTimeField it needs MySQL's time-zone tables, which stock servers lack.
    list_filter = [("start", admin.DateFieldListFilter)]
    list_select_related = ["partner"]
    csv_fields = [
        (_("bucket start"), "start"),
        (_("partner code"), "partner__code"),
        ("PV", "pv"),
        (_("own PV"), "pv_self"),
        (_("bot PV"), "bot_pv"),
        (_("generation"), "generation"),
        (_("flushed at"), "flushed_at"),
    ]


@admin.register(ReconcileDrift)
class ReconcileDriftAdmin(ReadOnlyAdmin):
    list_display = [
        "date",
        partner,
        count_column("realtime_pv", _("realtime PV")),
        count_column("exact_pv", _("exact PV")),
        "pv_drift",
        count_column("realtime_uv", _("realtime UV")),
        count_column("exact_uv", _("exact UV")),
        "uv_drift",
    ]
    list_filter = ["date"]
    search_fields = ["partner__code", "partner__name"]
    list_select_related = ["partner"]
    csv_fields = [
        (_("date"), "date"),
        (_("partner code"), "partner__code"),
        (_("realtime PV"), "realtime_pv"),
        (_("exact PV"), "exact_pv"),
        (_("realtime UV"), "realtime_uv"),
        (_("exact UV"), "exact_uv"),
        (_("reconciled at"), "reconciled_at"),
    ]

    @admin.display(description=_("PV drift"))
    def pv_drift(self, obj: ReconcileDrift) -> str:
        return grouped(obj.pv_drift)

    @admin.display(description=_("UV drift"))
    def uv_drift(self, obj: ReconcileDrift) -> str:
        return grouped(obj.uv_drift)


def _annotation(row: Model, name: str) -> Any:
    """A value the list's query annotated ``row`` with (the checker knows the model's fields only)."""
    return vars(row)[name]


def _printable(head: bytes, limit: int) -> str:
    """The first ``limit`` bytes as text, undecodable bytes shown as \\xNN; the template escapes the rest."""
    text = bytes(head[:limit]).decode("utf-8", errors="backslashreplace")
    return text + (" …" if len(head) >= limit else "")


@admin.register(DeadLetter)
class DeadLetterAdmin(CsvExportMixin, admin.ModelAdmin):
    """Dead letters may hold anything, up to 1 MB of it: the list never loads the raw bytes, only their head.

    Unlike the statistics, they may hold users' data: only staff with the model's view permission see them.
    """

    PREVIEW_BYTES = 120
    DETAIL_BYTES = 4000

    list_display = [
        "received_at",
        "reason",
        "detail_short",
        "payload_head",
        "size",
        "source",
        "position",
    ]
    list_filter = ["reason", ("received_at", admin.DateFieldListFilter), "source"]
    search_fields = ["detail"]
    readonly_fields = ["received_at", "reason", "detail", "source", "partition", "offset", "size", "payload"]
    exclude = ["raw"]

    csv_fields = [
        (_("received at"), "received_at"),
        (_("reason"), "reason"),
        (_("error"), "detail"),
        (_("source"), "source"),
        (_("partition"), "partition"),
        (_("offset"), "offset"),
        (_("bytes"), "raw_size"),
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: DeadLetter | None = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[DeadLetter]:
        head = Substr("raw", 1, self.PREVIEW_BYTES, output_field=BinaryField())
        return super().get_queryset(request).defer("raw").annotate(raw_head=head, raw_size=Length("raw"))

    @admin.display(description=_("error detail (as recorded, in English)"))
    def detail_short(self, obj: DeadLetter) -> str:
        # The parser's own words, kept as recorded: the reason column says it in the reader's language.
        text = obj.detail if len(obj.detail) <= 160 else obj.detail[:160] + " …"
        return format_html('<span lang="en">{}</span>', text)

    @admin.display(description=_("payload (start)"))
    def payload_head(self, obj: DeadLetter) -> str:
        return (
            _printable(bytes(_annotation(obj, "raw_head") or b""), self.PREVIEW_BYTES)
            if _annotation(obj, "raw_size")
            else "—"
        )

    @admin.display(description=_("bytes"), ordering="raw_size")
    def size(self, obj: DeadLetter) -> str:
        return grouped(_annotation(obj, "raw_size"))

    @admin.display(description=_("partition / offset"), ordering="offset")
    def position(self, obj: DeadLetter) -> str:
        # One column for both: the list must fit beside the navigation and the filters on a 1366-pixel screen.
        return f"{obj.partition} / {obj.offset}"

    @admin.display(description=_("payload"))
    def payload(self, obj: DeadLetter) -> str:
        head = Substr("raw", 1, self.DETAIL_BYTES, output_field=BinaryField())
        first = DeadLetter.objects.filter(pk=obj.pk).annotate(head=head).values_list("head", flat=True)[0]
        return _printable(bytes(first or b""), self.DETAIL_BYTES) if _annotation(obj, "raw_size") else "—"
