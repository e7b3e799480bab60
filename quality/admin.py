"""Traffic quality in the admin: the findings to review (resolved with a reason), the days, the listed networks.

A finding is the one row staff change: its status (cleared or confirmed) and the reason, both required
together; who resolved it and when are kept from the request, not typed. Nothing here adds or deletes a row.
Once a confirmation has committed, the partner-day's unpaid commissions are reversed (``settle_review``); a
cleared finding releases them at the next statement close.
"""

from functools import partial

from django import forms
from django.contrib import admin
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from conversions.public import settle_review
from cpsproject.common.admin_csv import CsvExportMixin, ReadOnlyCsvAdmin
from cpsproject.common.admin_filters import DateRangeFilter
from quality.models import Finding, ListedNetwork, QualityDay
from quality.selectors import shares


class ResolveForm(forms.ModelForm):
    class Meta:
        model = Finding
        fields = ["status", "reason"]

    def clean(self) -> dict:
        cleaned = super().clean() or {}
        if "status" not in self.fields:  # a decided finding: nothing to change
            return cleaned
        status, reason = cleaned.get("status"), (cleaned.get("reason") or "").strip()
        if status == Finding.Status.OPEN and self.instance.status != Finding.Status.OPEN:
            raise forms.ValidationError(_("A resolved finding cannot be opened again."))
        if status != Finding.Status.OPEN and not reason:
            self.add_error("reason", _("Say why the finding is cleared or confirmed."))
        cleaned["reason"] = reason
        return cleaned


@admin.register(Finding)
class FindingAdmin(CsvExportMixin, admin.ModelAdmin):
    """The traffic to review: each finding with its evidence, resolved by staff holding the change permission."""

    form = ResolveForm
    list_display = ["partner", "date", "rule", "value", "threshold", "status", "resolved_by", "resolved_at"]
    list_filter = ["status", "rule", ("date", DateRangeFilter)]
    search_fields = ["partner__code", "partner__name"]
    ordering = ["-date", "partner__code", "rule"]
    list_select_related = ["partner", "resolved_by"]
    readonly_fields = [
        "partner",
        "date",
        "rule",
        "value",
        "threshold",
        "resolved_by",
        "resolved_at",
        "evidence",
    ]
    fields = [
        "partner",
        "date",
        "rule",
        "value",
        "threshold",
        "evidence",
        "status",
        "reason",
        "resolved_by",
        "resolved_at",
    ]
    csv_fields = [
        ("partner", "partner__code"),
        ("date", "date"),
        ("rule", "rule"),
        ("value", "value"),
        ("threshold", "threshold"),
        ("status", "status"),
        ("resolved_by", "resolved_by__username"),
        ("resolved_at", "resolved_at"),
        ("reason", "reason"),
    ]

    @admin.display(description=_("evidence"))
    def evidence(self, finding: Finding) -> str:
        day = QualityDay.objects.filter(partner_id=finding.partner_id, date=finding.date).first()
        if day is None:
            return "-"
        measured = shares(day)
        parts = [
            _(
                "%(pv)s views, %(automated)s automated, %(repeats)s repeats, %(ips)s addresses in %(networks)s networks"
            )
            % {
                "pv": day.pv,
                "automated": day.automated_pv,
                "repeats": day.repeat_pv,
                "ips": day.distinct_ips,
                "networks": day.distinct_networks,
            }
        ]
        if measured["top_addresses_share"] is not None:
            busiest = ", ".join(f"{address} ({views})" for address, views in day.top_addresses)
            parts.append(_("busiest addresses: %(list)s") % {"list": busiest})
        return "; ".join(str(part) for part in parts)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Finding | None = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Finding | None = None) -> list[str]:
        # The stored status: a refused form has already set the object's to what was posted.
        if obj is not None and not Finding.objects.filter(pk=obj.pk, status=Finding.Status.OPEN).exists():
            return [*self.readonly_fields, "status", "reason"]  # decided once, kept as decided
        return list(self.readonly_fields)

    def save_model(self, request: HttpRequest, obj: Finding, form: forms.ModelForm, change: bool) -> None:
        if "status" in form.changed_data and obj.status != Finding.Status.OPEN:
            obj.resolved_by_id, obj.resolved_at = request.user.pk, timezone.now()
            if obj.status == Finding.Status.CONFIRMED:
                # After the commit, in a transaction of its own that takes the ledger gate first. Robust: the
                # decision stands if it fails (logged), and the next statement close reverses the same entries.
                transaction.on_commit(
                    partial(settle_review, partner_id=obj.partner_id, day=obj.date), robust=True
                )
        super().save_model(request, obj, form, change)


@admin.register(QualityDay)
class QualityDayAdmin(ReadOnlyCsvAdmin):
    list_display = [
        "partner",
        "date",
        "pv",
        "automated_pv",
        "repeat_pv",
        "distinct_ips",
        "distinct_networks",
        "top_share",
        "listed_pv",
        "reconciled_at",
    ]
    list_filter = [("date", DateRangeFilter)]
    search_fields = ["partner__code", "partner__name"]
    ordering = ["-date", "partner__code"]
    list_select_related = ["partner"]
    csv_fields = [
        ("partner", "partner__code"),
        ("date", "date"),
        ("pv", "pv"),
        ("automated_pv", "automated_pv"),
        ("repeat_pv", "repeat_pv"),
        ("distinct_ips", "distinct_ips"),
        ("distinct_networks", "distinct_networks"),
        ("top_addresses_pv", "top_addresses_pv"),
        ("addressed_pv", "addressed_pv"),
        ("listed_pv", "listed_pv"),
        ("reconciled_at", "reconciled_at"),
    ]

    @admin.display(description=_("busiest addresses' share"))
    def top_share(self, day: QualityDay) -> str:
        share = shares(day)["top_addresses_share"]
        return "-" if share is None else f"{share:.1%}"


@admin.register(ListedNetwork)
class ListedNetworkAdmin(ReadOnlyCsvAdmin):
    list_display = ["cidr", "label", "imported_at"]
    search_fields = ["cidr", "label"]
    ordering = ["cidr"]
    csv_fields = [("cidr", "cidr"), ("label", "label")]
