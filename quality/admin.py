"""Traffic quality in the admin: the findings to review (resolved with a reason), the days, the listed networks.

A finding is the one row staff change: its status (cleared or confirmed) and the reason, both required
together; who resolved it and when are kept from the request, not typed. Nothing here adds or deletes a row.
Once a confirmation has committed, the partner-day's unpaid commissions are reversed (``settle_review``); a
cleared finding releases them at the next statement close.
"""

from collections.abc import Callable
from functools import partial
from typing import Any

from django import forms
from django.contrib import admin
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.template.defaultfilters import floatformat
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.timezone import localtime
from django.utils.translation import gettext_lazy as _

from conversions.public import settle_review
from cpsproject.common.admin_csv import CsvExportMixin, ReadOnlyCsvAdmin
from cpsproject.common.admin_filters import DateRangeFilter
from cpsproject.common.labels import Label
from quality.display import grouped, percent, rule_threshold, rule_value
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
    list_display = [
        "partner_column",
        "date",
        "rule",
        "value_column",
        "threshold_column",
        "status",
        "resolved_column",
    ]
    list_display_links = ["partner_column"]
    list_filter = ["status", "rule", ("date", DateRangeFilter)]
    search_fields = ["partner__code", "partner__name"]
    ordering = ["-date", "partner__code", "rule"]
    list_select_related = ["partner", "resolved_by"]
    readonly_fields = [
        "partner",
        "date",
        "rule",
        "value_column",
        "threshold_column",
        "resolved_by",
        "resolved_at",
        "evidence",
    ]
    fields = [
        "partner",
        "date",
        "rule",
        "value_column",
        "threshold_column",
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

    # Presentation only: the columns and the evidence a reviewer reads (the values in their rule's unit).
    @admin.display(description=_("partner"), ordering="partner__code")
    def partner_column(self, finding: Finding) -> str:
        return finding.partner.code

    @admin.display(description=_("measured value"), ordering="value")
    def value_column(self, finding: Finding) -> str:
        return rule_value(finding.rule, finding.value)

    @admin.display(description=_("threshold"))
    def threshold_column(self, finding: Finding) -> str:
        return rule_threshold(finding.rule, finding.threshold)

    @admin.display(description=_("resolved by"), ordering="resolved_at")
    def resolved_column(self, finding: Finding) -> str:
        # Who and when in one narrow cell: the admin's long date and time would push the list past 1366 px.
        if finding.resolved_by is None or finding.resolved_at is None:
            return "-"
        when = localtime(finding.resolved_at).strftime("%Y-%m-%d %H:%M")
        return format_html("{}<br>{}", finding.resolved_by.get_username(), when)

    @admin.display(description=_("evidence"))
    def evidence(self, finding: Finding) -> str:
        day = QualityDay.objects.filter(partner_id=finding.partner_id, date=finding.date).first()
        if day is None:
            return "-"
        measured = shares(day)
        lines = [
            _(
                "%(pv)s views: %(automated)s automated (%(automated_share)s), %(repeats)s repeats "
                "(%(repeat_share)s), %(listed)s from listed networks (%(listed_share)s)"
            )
            % {
                "pv": floatformat(day.pv, "0g"),
                "automated": floatformat(day.automated_pv, "0g"),
                "automated_share": percent(measured["automated_share"]),
                "repeats": floatformat(day.repeat_pv, "0g"),
                "repeat_share": percent(measured["repeat_share"]),
                "listed": floatformat(day.listed_pv, "0g"),
                "listed_share": percent(measured["listed_share"]),
            },
            _("distinct addresses: %(ips)s, distinct networks: %(networks)s")
            % {
                "ips": floatformat(day.distinct_ips, "0g"),
                "networks": floatformat(day.distinct_networks, "0g"),
            },
        ]
        if measured["top_addresses_share"] is not None:
            busiest = ", ".join(
                f"{address} ({floatformat(views, '0g')})" for address, views in day.top_addresses
            )
            lines.append(
                _("busiest addresses (%(share)s of the views with an address): %(list)s")
                % {"share": percent(measured["top_addresses_share"]), "list": busiest}
            )
        if day.orders_by_view:
            lines.append(
                _("%(orders)s orders attributed by a view, median %(seconds)s from view to order")
                % {
                    "orders": floatformat(day.orders_by_view, "0g"),
                    "seconds": "-"
                    if day.median_seconds_to_order is None
                    else rule_value(Finding.Rule.FAST_ORDERS, day.median_seconds_to_order),
                }
            )
        page = (
            reverse("admin:network", args=[finding.partner.code])
            + f"?start={finding.date}&end={finding.date}"
        )
        link = format_html(
            '<a href="{}">{}</a>', page, _("the partner's page for the day, with every signal")
        )
        return format_html_join(mark_safe("<br>"), "{}", [(line,) for line in [*lines, link]])

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        return super().changelist_view(request, {"title": _("Traffic to review"), **(extra_context or {})})

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        context = {"title": _("Review a finding"), **(extra_context or {})}
        return super().change_view(request, object_id, form_url, context)

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


def _count(name: str, description: Label, share: str | None = None) -> Callable[[Any, QualityDay], str]:
    """A list column of the field ``name`` grouped by thousands, with the day's ``share`` of it as a percentage."""

    def column(admin_: Any, day: QualityDay) -> str:
        text = grouped(getattr(day, name))
        return f"{text} ({percent(shares(day)[share])})" if share else text

    return admin.display(description=description, ordering=name)(column)


@admin.register(QualityDay)
class QualityDayAdmin(ReadOnlyCsvAdmin):
    list_display = [
        "partner_column",
        "date_column",
        "pv_column",
        "automated_column",
        "repeat_column",
        "addresses_column",
        "top_share",
        "listed_column",
    ]
    pv_column = _count("pv", _("views"))
    automated_column = _count("automated_pv", _("automated views"), "automated_share")
    repeat_column = _count("repeat_pv", _("repeat views"), "repeat_share")
    listed_column = _count("listed_pv", _("views from listed networks"), "listed_share")

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
        return percent(shares(day)["top_addresses_share"])

    # Presentation only: the partner's code and the date with its reconciled mark keep the list within 1366 px.
    @admin.display(description=_("partner"), ordering="partner__code")
    def partner_column(self, day: QualityDay) -> str:
        return day.partner.code

    @admin.display(description=_("date"), ordering="date")
    def date_column(self, day: QualityDay) -> str:
        # A reconciled (final) day carries a mark, as the daily statistics do; the time shows on hover.
        if day.reconciled_at is None:
            return format_html('<span style="white-space: nowrap">{}</span>', f"{day.date:%Y-%m-%d}")
        when = localtime(day.reconciled_at).strftime("%Y-%m-%d %H:%M")
        return format_html(
            '<span style="white-space: nowrap" title="{}">{} ✓</span>',
            _("reconciled at %(when)s") % {"when": when},
            f"{day.date:%Y-%m-%d}",
        )

    @admin.display(description=_("distinct addresses / networks"), ordering="distinct_ips")
    def addresses_column(self, day: QualityDay) -> str:
        return f"{grouped(day.distinct_ips)} / {grouped(day.distinct_networks)}"


@admin.register(ListedNetwork)
class ListedNetworkAdmin(ReadOnlyCsvAdmin):
    list_display = ["cidr", "label", "imported_at"]
    search_fields = ["cidr", "label"]
    ordering = ["cidr"]
    csv_fields = [("cidr", "cidr"), ("label", "label")]
