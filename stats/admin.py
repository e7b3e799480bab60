from django.contrib import admin

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


@admin.register(DeadLetter)
class DeadLetterAdmin(ReadOnlyAdmin):
    list_display = ["received_at", "reason", "source", "partition", "offset", "detail"]
    list_filter = ["reason", "source"]
    search_fields = ["detail"]
    readonly_fields = ["received_at", "reason", "detail", "source", "partition", "offset", "raw_preview"]
    exclude = ["raw"]
