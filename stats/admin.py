from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import ValidationError
from django.db.models import BinaryField, Count, Sum
from django.db.models.functions import Length, Substr
from django.utils.translation import gettext_lazy as _
from django_redis import get_redis_connection

from cpsproject.common.admin_csv import CsvExportMixin
from partners.models import Partner
from stats.counters.uniques import merged_counts
from stats.models import BucketStat, DailyStat, DeadLetter, ReconcileDrift
from stats.read.selectors import outermost_rows


class ReadOnlyAdmin(CsvExportMixin, admin.ModelAdmin):
    """Numbers come from the pipeline: staff with the model's view permission (the "statistics viewers" group,
    ``cpsproject.common.viewers``) look at them, and nobody edits them."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class DateRangeFilter(admin.FieldListFilter):
    """``?date__gte=&date__lte=`` (inclusive) with a two-field form, beside the quick links of the date."""

    template = "admin/stats/date_range_filter.html"

    def __init__(self, field, request, params, model, model_admin, field_path):
        self.lookup_gte, self.lookup_lte = f"{field_path}__gte", f"{field_path}__lte"
        super().__init__(field, request, params, model, model_admin, field_path)
        self.title = _("date range")

    def expected_parameters(self) -> list[str]:
        return [self.lookup_gte, self.lookup_lte]

    def has_output(self) -> bool:
        return True

    def choices(self, changelist):
        # One choice: the form in the template. Django's list of links does not fit a range.
        def last(key: str) -> str:
            value = self.used_parameters.get(key, "")
            return value[-1] if isinstance(value, list) else value

        yield {
            "gte": last(self.lookup_gte),
            "lte": last(self.lookup_lte),
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

    def queryset(self, request, queryset):
        values = {}
        for key in (self.lookup_gte, self.lookup_lte):
            value = self.used_parameters.get(key)
            value = value[-1] if isinstance(value, list) else value
            if value:
                values[key] = value
        try:
            return queryset.filter(**values)
        except (ValidationError, ValueError) as exc:  # a malformed date: the change list says so, no 500
            raise IncorrectLookupParameters(exc) from exc


class ParentFilter(admin.SimpleListFilter):
    title = _("parent partner")
    parameter_name = "parent"

    def lookups(self, request, model_admin):
        parents = Partner.objects.annotate(n=Count("children")).filter(n__gt=0).order_by("path")
        return [(p.code, f"{'· ' * (p.level - 1)}{p.code} {p.name}") for p in parents]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(partner__parent__code=self.value())
        return queryset


class ReconciledFilter(admin.SimpleListFilter):
    title = _("reconciled")
    parameter_name = "reconciled"

    def lookups(self, request, model_admin):
        return [("yes", _("Yes, exact")), ("no", _("No, realtime"))]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(reconciled_at__isnull=False)
        if self.value() == "no":
            return queryset.filter(reconciled_at__isnull=True)
        return queryset


# Merging the HyperLogLogs of more rows than this would load too many 12 kB blobs for one page.
TOTAL_UV_MAX_ROWS = 400


@admin.register(DailyStat)
class DailyStatAdmin(ReadOnlyAdmin):
    list_display = ["date", "partner", "pv", "uv", "pv_self", "uv_self", "bot_pv", "reconciled_at"]
    list_filter = [("date", DateRangeFilter), "partner__level", ParentFilter, ReconciledFilter]
    search_fields = ["partner__code", "partner__name"]
    date_hierarchy = "date"
    list_select_related = ["partner"]
    exclude = ["hll", "hll_self"]
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

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, extra_context=extra_context)
        changelist = getattr(response, "context_data", {}).get("cl")
        if changelist is not None:
            response.context_data["totals"] = self.totals(changelist.queryset)
        return response

    def totals(self, queryset) -> dict:
        """Sum PV over the outermost filtered rows, own PV over all; UV is the union of their HyperLogLogs when few
        enough, else None."""
        sums = queryset.order_by().aggregate(rows=Count("pk"), pv_self=Sum("pv_self"), bot_pv=Sum("bot_pv"))
        # A parent's PV holds its children's: summing every selected level would count a view once per level.
        sums["pv"] = outermost_rows(queryset).order_by().aggregate(pv=Sum("pv"))["pv"]
        totals = {key: value or 0 for key, value in sums.items()}
        totals["uv"] = totals["uv_self"] = None
        if 0 < totals["rows"] <= TOTAL_UV_MAX_ROWS:
            blobs = list(queryset.order_by().values_list("hll", "hll_self"))
            (_, tree), (_, own) = merged_counts(
                get_redis_connection("default"), [[b[0] for b in blobs], [b[1] for b in blobs]]
            )
            totals["uv"], totals["uv_self"] = tree, own
        return totals


@admin.register(BucketStat)
class BucketStatAdmin(ReadOnlyAdmin):
    list_display = ["start", "partner", "pv", "pv_self", "bot_pv", "generation", "flushed_at"]
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
        "partner",
        "realtime_pv",
        "exact_pv",
        "pv_drift",
        "realtime_uv",
        "exact_uv",
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
    def pv_drift(self, obj: ReconcileDrift) -> int:
        return obj.pv_drift

    @admin.display(description=_("UV drift"))
    def uv_drift(self, obj: ReconcileDrift) -> int:
        return obj.uv_drift


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
        "partition",
        "offset",
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

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def get_queryset(self, request):
        head = Substr("raw", 1, self.PREVIEW_BYTES, output_field=BinaryField())
        return super().get_queryset(request).defer("raw").annotate(raw_head=head, raw_size=Length("raw"))

    @admin.display(description=_("error"))
    def detail_short(self, obj: DeadLetter) -> str:
        return obj.detail if len(obj.detail) <= 160 else obj.detail[:160] + " …"

    @admin.display(description=_("payload (start)"))
    def payload_head(self, obj: DeadLetter) -> str:
        return _printable(bytes(obj.raw_head or b""), self.PREVIEW_BYTES) if obj.raw_size else "—"

    @admin.display(description=_("bytes"), ordering="raw_size")
    def size(self, obj: DeadLetter) -> int:
        return obj.raw_size

    @admin.display(description=_("payload"))
    def payload(self, obj: DeadLetter) -> str:
        head = Substr("raw", 1, self.DETAIL_BYTES, output_field=BinaryField())
        first = DeadLetter.objects.filter(pk=obj.pk).annotate(head=head).values_list("head", flat=True)[0]
        return _printable(bytes(first or b""), self.DETAIL_BYTES) if obj.raw_size else "—"
