from django.contrib import admin
from django.db.models import BinaryField
from django.db.models.functions import Length, Substr

from stats.models import BucketStat, DailyStat, DeadLetter, ReconcileDrift


class ReadOnlyAdmin(admin.ModelAdmin):
    """Numbers come from the pipeline; staff look, they do not edit."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(DailyStat)
class DailyStatAdmin(ReadOnlyAdmin):
    list_display = ["date", "partner", "pv", "uv", "pv_self", "uv_self", "bot_pv", "reconciled_at"]
    list_filter = ["date", "partner__level", ("reconciled_at", admin.EmptyFieldListFilter)]
    search_fields = ["partner__code", "partner__name"]
    date_hierarchy = "date"
    list_select_related = ["partner"]
    exclude = ["hll", "hll_self"]


@admin.register(BucketStat)
class BucketStatAdmin(ReadOnlyAdmin):
    list_display = ["start", "partner", "pv", "pv_self", "bot_pv", "generation", "flushed_at"]
    search_fields = ["partner__code"]
    # Not date_hierarchy: on a DateTimeField it needs MySQL's time-zone tables, which stock servers lack.
    list_filter = [("start", admin.DateFieldListFilter)]
    list_select_related = ["partner"]


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
    search_fields = ["partner__code"]
    list_select_related = ["partner"]


def _printable(head: bytes, limit: int) -> str:
    """The first ``limit`` bytes as text, undecodable bytes shown as \\xNN; the template escapes the rest."""
    text = bytes(head[:limit]).decode("utf-8", errors="backslashreplace")
    return text + (" …" if len(head) >= limit else "")


@admin.register(DeadLetter)
class DeadLetterAdmin(ReadOnlyAdmin):
    """Dead letters may hold anything, up to 1 MB of it: the list never loads the raw bytes, only their head."""

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

    def get_queryset(self, request):
        head = Substr("raw", 1, self.PREVIEW_BYTES, output_field=BinaryField())
        return super().get_queryset(request).defer("raw").annotate(raw_head=head, raw_size=Length("raw"))

    @admin.display(description="error")
    def detail_short(self, obj: DeadLetter) -> str:
        return obj.detail if len(obj.detail) <= 160 else obj.detail[:160] + " …"

    @admin.display(description="payload (start)")
    def payload_head(self, obj: DeadLetter) -> str:
        return _printable(bytes(obj.raw_head or b""), self.PREVIEW_BYTES) if obj.raw_size else "—"

    @admin.display(description="bytes", ordering="raw_size")
    def size(self, obj: DeadLetter) -> int:
        return obj.raw_size

    @admin.display(description="payload")
    def payload(self, obj: DeadLetter) -> str:
        head = Substr("raw", 1, self.DETAIL_BYTES, output_field=BinaryField())
        first = DeadLetter.objects.filter(pk=obj.pk).annotate(head=head).values_list("head", flat=True)[0]
        return _printable(bytes(first or b""), self.DETAIL_BYTES) if obj.raw_size else "—"
