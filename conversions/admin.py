"""Orders, the ledger, statements, rates and held refunds in the admin: lists to read and download, never edit.

Money on screen is in major units with the currency's code, grouped (``1,299.99 CNY``); the CSV files keep the
integers in minor units with a currency column, which is what finance pays from. Each order's page explains
its money (``order_explanation``). The buyer's openid is never shown: a keyed hash stands for it.
"""

from decimal import Decimal
from typing import Any

from django.contrib import admin
from django.contrib.admin import ModelAdmin
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import PermissionDenied
from django.db.models import F, IntegerField, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.formats import date_format, number_format, time_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy as _

from conversions import dashboard  # noqa: F401 — registers the dashboard and partner page panels
from conversions.conf import conversion_setting
from conversions.explain import buyer_reference, decimal_text, explain, money
from conversions.models import (
    CommissionHold,
    ExchangeRate,
    HeldRefund,
    LedgerEntry,
    MonthClose,
    Order,
    OrderDrift,
    OrderEvent,
    Statement,
)
from conversions.selectors import OrderStatus, OrderWithMoney, orders_with_money
from cpsproject.common.admin_csv import ReadOnlyCsvAdmin
from cpsproject.common.admin_filters import DateRangeFilter
from cpsproject.common.labels import Label
from cpsproject.common.timeutil import to_local
from partners.models import Partner


def reporting_currency() -> str:
    return conversion_setting("REPORTING_CURRENCY")


class ReadOnlyAdmin(ReadOnlyCsvAdmin):
    """Written by the pipeline and the month close: staff with the view permission read, nobody edits."""

    change_list_template = "admin/change_list.html"

    class Media:
        css = {"all": ["conversions/admin.css"]}


class PartnerFilter(admin.SimpleListFilter):
    """The partners that have rows here, by code."""

    title = _("partner")
    parameter_name = "partner"

    def lookups(self, request: HttpRequest, model_admin: "ModelAdmin[Any]") -> list[tuple[str, str]]:
        # The bare table, not the list's annotated queryset: one indexed DISTINCT.
        ids = model_admin.model.objects.order_by().values("partner").distinct()
        partners = Partner.objects.filter(pk__in=ids).order_by("path")
        return [(p.code, f"{'· ' * (p.level - 1)}{p.code} {p.name}") for p in partners]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(partner__code=self.value()) if self.value() else queryset


# What happened to the order's money (``orders_with_money``'s ``status``, the word the CSV file carries).
STATUS_LABELS = {
    OrderStatus.PAID: _("paid"),
    OrderStatus.PARTLY_REFUNDED: _("partly refunded"),
    OrderStatus.REFUNDED: _("fully refunded"),
    OrderStatus.CANCELLED: _("cancelled"),
}


class OrderStatusFilter(admin.SimpleListFilter):
    title = _("status")
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: "ModelAdmin[Any]") -> list[tuple[str, Label]]:
        return list(STATUS_LABELS.items())

    def queryset(
        self, request: HttpRequest, queryset: "QuerySet[OrderWithMoney]"
    ) -> "QuerySet[OrderWithMoney]":
        status = self.value()
        return queryset.filter(status=status) if status is not None and status in STATUS_LABELS else queryset


def _refunded_reporting() -> Coalesce:
    """The order's refunds and cancellation in the reporting currency, as a subquery (0 when none)."""
    refunds = (
        OrderEvent.objects.filter(order=OuterRef("pk"), status__in=OrderEvent.REVERSALS)
        .order_by()
        .values("order")
        .annotate(total=Sum("amount_reporting"))
        .values("total")
    )
    return Coalesce(Subquery(refunds, output_field=IntegerField()), Value(0))


def _partner_link(partner: Partner | None) -> str:
    if partner is None:
        return str(_("no partner"))
    return format_html('<a href="{}">{}</a>', reverse("admin:network", args=[partner.code]), partner.code)


@admin.register(Order)
class OrderAdmin(ReadOnlyAdmin):
    list_display = [
        "order_link",
        "paid_at_column",
        "partner_column",
        "status_column",
        "amount_column",
        "refunded_column",
        "reporting_column",
        "commission_column",
    ]
    list_filter = [
        PartnerFilter,
        ("paid_date", DateRangeFilter),
        OrderStatusFilter,
        "currency",
        "attribution",
    ]
    search_fields = ["=order_id"]
    search_help_text = _("Order id, exactly as the shop sent it.")
    list_select_related = ["partner"]
    list_display_links = None
    csv_fields = [
        (_("order id"), "order_id"),
        (_("paid at"), "paid_at"),
        (_("paid on"), "paid_date"),
        (_("partner code"), "partner__code"),
        (_("attribution"), "attribution"),
        (_("status"), "status"),
        (_("currency"), "currency"),
        (_("amount paid (minor units)"), "amount"),
        (_("refunded (minor units)"), "refunded"),
        (_("reporting currency"), "reporting_currency"),
        (_("amount paid, reporting currency (minor units)"), "amount_reporting"),
        (_("refunded, reporting currency (minor units)"), "refunded_reporting"),
        (_("commission, reporting currency (minor units)"), "commission"),
    ]

    def get_queryset(self, request: HttpRequest) -> "QuerySet[OrderWithMoney]":
        # The API's status, refunded and commission (all shares: staff read every partner's), and for the CSV
        # file the refunds in the reporting currency and that currency's code.
        return orders_with_money(super().get_queryset(request)).annotate(
            refunded_reporting=_refunded_reporting(), reporting_currency=Value(reporting_currency())
        )

    @admin.display(description=_("order id"), ordering="order_id")
    def order_link(self, obj: Order) -> str:
        url = reverse("admin:conversions_order_change", args=[obj.pk])
        return format_html('<a href="{}">{}</a>', url, obj.order_id)

    @admin.display(description=_("paid at"), ordering="paid_at")
    def paid_at_column(self, obj: Order) -> str:
        # Date and time each in one piece: the time may go under its date on a narrow list, not split itself.
        local = to_local(obj.paid_at)
        return format_html(
            '<span class="cps-date">{}</span> <span class="cps-time">{}</span>',
            date_format(local, "SHORT_DATE_FORMAT"),
            time_format(local, "TIME_FORMAT"),
        )

    @admin.display(description=_("partner"), ordering="partner__code")
    def partner_column(self, obj: Order) -> str:
        return _partner_link(obj.partner)

    @admin.display(description=_("status"))
    def status_column(self, obj: OrderWithMoney) -> str:
        return str(STATUS_LABELS[obj.status])

    @admin.display(description=_("amount paid"), ordering="amount")
    def amount_column(self, obj: Order) -> str:
        return money(obj.amount, obj.currency)

    @admin.display(description=_("refunded"), ordering="refunded")
    def refunded_column(self, obj: OrderWithMoney) -> str:
        return money(obj.refunded, obj.currency) if obj.refunded else "—"

    @admin.display(description=_("paid, reporting currency"), ordering="amount_reporting")
    def reporting_column(self, obj: Order) -> str:
        return money(obj.amount_reporting, reporting_currency())

    @admin.display(description=_("commission"), ordering="commission")
    def commission_column(self, obj: OrderWithMoney) -> str:
        return money(obj.commission, reporting_currency())

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The order's page is its explanation: read-only, whoever may view orders."""
        return self.explanation_view(request, object_id)

    def explanation_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        order: OrderWithMoney | None = self.get_object(request, object_id)  # from get_queryset: annotated
        if order is None:
            # Django's own answer to a missing object, as its change view gives (private: not in its type stubs).
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)  # type: ignore[attr-defined]
        if not self.has_view_permission(request, order):
            raise PermissionDenied
        return TemplateResponse(
            request,
            "admin/conversions/order/explanation.html",
            {
                **self.admin_site.each_context(request),
                **order_explanation(order, status=order.status),
                "opts": self.opts,
            },
        )


def order_explanation(order: Order, *, status: str) -> dict:
    """The context of an order's page: attribution, chain, rate, events, and each ledger entry's sum."""
    reporting = reporting_currency()
    events = list(order.events.order_by("ts", "id"))
    entries = list(order.ledger.select_related("partner").order_by("id"))
    steps = explain(order, events, entries, reporting)
    ids = {line.partner_id for step in steps for line in step.lines} | {e.partner_id for e in entries}
    partners = Partner.objects.in_bulk(ids)
    explained = {line.entry.pk for step in steps for line in step.lines if line.entry is not None}
    return {
        "title": _("Order %(order)s") % {"order": order.order_id},
        "order": order,
        "buyer": buyer_reference(order.openid),
        "reporting": reporting,
        "rate": decimal_text(Decimal(order.rate)),  # as imported ("0.048"), not the column's 12 places
        "status": STATUS_LABELS[status],
        "steps": [(step, [(line, partners.get(line.partner_id)) for line in step.lines]) for step in steps],
        "chain": [
            (partners.get(line.partner_id), line.share_bp) for line in (steps[0].lines if steps else [])
        ],
        "entries": entries,
        "unexplained": [e for e in entries if e.pk not in explained],
        "ledger_total": sum(e.amount for e in entries),
        "commission": steps[-1].commission if steps else 0,
    }


def _order_link(order: Order) -> str:
    url = reverse("admin:conversions_order_change", args=[order.pk])
    return format_html('<a href="{}">{}</a>', url, order.order_id)


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ReadOnlyAdmin):
    list_display = [
        "booked_date",
        "partner_column",
        "order_column",
        "reason",
        "amount_column",
        "share_column",
        "event_date",
        "source_event_id",
    ]
    list_filter = [PartnerFilter, ("booked_date", DateRangeFilter), "reason"]
    search_fields = ["=order__order_id", "=source_event_id"]
    search_help_text = _("Order id or source event id, exactly.")
    list_select_related = ["partner", "order"]
    list_display_links = None
    csv_fields = [
        (_("booked on"), "booked_date"),
        (_("partner code"), "partner__code"),
        (_("order id"), "order__order_id"),
        (_("reason"), "reason"),
        (_("reporting currency"), "reporting_currency"),
        (_("amount (minor units)"), "amount"),
        (_("share (bp)"), "share_bp"),
        (_("event day"), "event_date"),
        (_("event time"), "event_ts"),
        (_("source event"), "source_event_id"),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).annotate(reporting_currency=Value(reporting_currency()))

    @admin.display(description=_("partner"), ordering="partner__code")
    def partner_column(self, obj: LedgerEntry) -> str:
        return _partner_link(obj.partner)

    @admin.display(description=_("order"), ordering="order__order_id")
    def order_column(self, obj: LedgerEntry) -> str:
        return _order_link(obj.order)

    @admin.display(description=_("amount"), ordering="amount")
    def amount_column(self, obj: LedgerEntry) -> str:
        return money(obj.amount, reporting_currency())

    @admin.display(description=_("share (bp)"), ordering="share_bp")
    def share_column(self, obj: LedgerEntry) -> str:
        return number_format(obj.share_bp, force_grouping=True)  # 10,000 as on the order's page


class MonthFilter(admin.SimpleListFilter):
    """The closed months, newest first."""

    title = _("month")
    parameter_name = "month"

    def lookups(self, request: HttpRequest, model_admin: "ModelAdmin[Any]") -> list[tuple[str, str]]:
        months = (
            model_admin.get_queryset(request).order_by("-month").values_list("month", flat=True).distinct()
        )
        return [(month.strftime("%Y-%m"), month.strftime("%Y-%m")) for month in months]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Statement]) -> QuerySet[Statement]:
        value = self.value()
        if not value:
            return queryset
        try:
            year, month = (int(part) for part in value.split("-"))
            return queryset.filter(month__year=year, month__month=month)
        except ValueError as exc:
            raise IncorrectLookupParameters(exc) from exc


@admin.register(Statement)
class StatementAdmin(ReadOnlyAdmin):
    list_display = [
        "month_column",
        "partner_column",
        "amount_column",
        "rows",
        "review_column",
        "closed_at",
    ]
    list_filter = [MonthFilter, PartnerFilter]
    search_fields = ["partner__code", "partner__name"]
    list_select_related = ["partner"]
    list_display_links = None
    csv_fields = [
        (_("month"), "month"),
        (_("partner code"), "partner__code"),
        (_("partner name"), "partner__name"),
        (_("currency"), "reporting_currency"),
        (_("amount (minor units)"), "amount"),
        (_("ledger entries"), "rows"),
        (_("held amount (minor units)"), "held_amount"),
        (_("held entries"), "held_rows"),
        (_("released amount (minor units)"), "released_amount"),
        (_("released entries"), "released_rows"),
        (_("reversed amount (minor units)"), "reversed_amount"),
        (_("reversed entries"), "reversed_rows"),
        (_("closed at"), "closed_at"),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).annotate(reporting_currency=Value(reporting_currency()))

    def csv_row(self, values: tuple) -> tuple:
        month, *rest = values
        return (month.strftime("%Y-%m"), *rest)

    @admin.display(description=_("month"), ordering="month")
    def month_column(self, obj: Statement) -> str:
        return obj.month.strftime("%Y-%m")

    @admin.display(description=_("partner"), ordering="partner__code")
    def partner_column(self, obj: Statement) -> str:
        return _partner_link(obj.partner)

    @admin.display(description=_("amount"), ordering="amount")
    def amount_column(self, obj: Statement) -> str:
        return money(obj.amount, reporting_currency())

    @admin.display(description=_("traffic review"))
    def review_column(self, obj: Statement) -> str:
        """What a traffic review held, released or reversed in the month, one line each, in one column: three
        columns of mostly zeros made the list wider than a laptop's screen."""
        lines = [
            (_("held for review"), obj.held_amount, obj.held_rows),
            (_("released amount"), obj.released_amount, obj.released_rows),
            (_("reversed amount"), obj.reversed_amount, obj.reversed_rows),
        ]
        shown = [(label, amount, rows) for label, amount, rows in lines if rows]
        if not shown:
            return "—"
        return format_html_join(
            mark_safe("<br>"),
            "{}: {} ({})",
            ((label, money(amount, reporting_currency()), rows) for label, amount, rows in shown),
        )


@admin.register(CommissionHold)
class CommissionHoldAdmin(ReadOnlyAdmin):
    """Entries a traffic review kept out of a statement: released into a later one, or reversed."""

    list_display = [
        "order_column",
        "partner_column",
        "amount_column",
        "review",
        "held_from_column",
        "released_in_column",
        "reversal_column",
    ]
    search_fields = ["entry__partner__code", "=entry__order__order_id", "review"]
    list_select_related = ["entry__partner", "entry__order", "reversal"]
    csv_fields = [
        (_("partner code"), "entry__partner__code"),
        (_("order id"), "entry__order__order_id"),
        (_("amount (minor units)"), "entry__amount"),
        (_("review"), "review"),
        (_("held from the statement of"), "held_from"),
        (_("paid in the statement of"), "released_in"),
        (_("reversal"), "reversal__source_event_id"),
        (_("created at"), "created_at"),
    ]

    @admin.display(description=_("order id"), ordering="entry__order__order_id")
    def order_column(self, obj: CommissionHold) -> str:
        return obj.entry.order.order_id

    @admin.display(description=_("held from the statement of"), ordering="held_from")
    def held_from_column(self, obj: CommissionHold) -> str:
        return obj.held_from.strftime("%Y-%m") if obj.held_from else "-"

    @admin.display(description=_("paid in the statement of"), ordering="released_in")
    def released_in_column(self, obj: CommissionHold) -> str:
        return obj.released_in.strftime("%Y-%m") if obj.released_in else "-"

    @admin.display(description=_("reversal"), ordering="reversal__source_event_id")
    def reversal_column(self, obj: CommissionHold) -> str:
        return obj.reversal.source_event_id if obj.reversal else "-"

    @admin.display(description=_("partner"), ordering="entry__partner__code")
    def partner_column(self, obj: CommissionHold) -> str:
        return _partner_link(obj.entry.partner)

    @admin.display(description=_("amount"), ordering="entry__amount")
    def amount_column(self, obj: CommissionHold) -> str:
        return money(obj.entry.amount, reporting_currency())


@admin.register(ExchangeRate)
class ExchangeRateAdmin(ReadOnlyAdmin):
    list_display = ["currency", "valid_from", "rate", "imported_at"]
    list_filter = ["currency"]
    search_fields = ["=currency"]
    csv_fields = [
        (_("currency"), "currency"),
        (_("valid from"), "valid_from"),
        (_("rate"), "rate"),
        (_("imported at"), "imported_at"),
    ]


@admin.register(HeldRefund)
class HeldRefundAdmin(ReadOnlyAdmin):
    """Refunds waiting for their order; the raw event (``payload``) holds the buyer's openid: never shown."""

    list_display = ["received_at", "order_id", "status", "amount_column", "ts", "applied_at", "expired_at"]
    list_filter = ["status", ("received_at", admin.DateFieldListFilter)]
    search_fields = ["=order_id"]
    exclude = ["payload"]
    csv_fields = [
        (_("received at"), "received_at"),
        (_("order id"), "order_id"),
        (_("event id"), "event_id"),
        (_("status"), "status"),
        (_("currency"), "currency"),
        (_("amount (minor units)"), "amount"),
        (_("time"), "ts"),
        (_("applied at"), "applied_at"),
        (_("expired at"), "expired_at"),
    ]

    @admin.display(description=_("amount"), ordering="amount")
    def amount_column(self, obj: HeldRefund) -> str:
        return money(obj.amount, obj.currency)


@admin.register(MonthClose)
class MonthCloseAdmin(ReadOnlyAdmin):
    list_display = ["__str__", "closed_at"]
    csv_fields = [(_("month"), "month"), (_("closed at"), "closed_at")]


class DriftFilter(admin.SimpleListFilter):
    """Only the partner-days whose recorded figures differed from the archive's."""

    title = _("drift")
    parameter_name = "drift"

    def lookups(self, request: HttpRequest, model_admin: "ModelAdmin[Any]") -> list[tuple[str, Label]]:
        return [("yes", _("with drift")), ("no", _("without drift"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[OrderDrift]) -> QuerySet[OrderDrift]:
        same = (
            Q(recorded_orders=F("exact_orders"))
            & Q(recorded_gross=F("exact_gross"))
            & Q(recorded_refunded=F("exact_refunded"))
        )
        if self.value() == "yes":
            return queryset.exclude(same)
        if self.value() == "no":
            return queryset.filter(same)
        return queryset


@admin.register(OrderDrift)
class OrderDriftAdmin(ReadOnlyAdmin):
    """What each day's recount found (``conversions.reconcile``): the archive's figures, and how far the tables
    were from them before the recount (archive minus recorded; — when none)."""

    list_display = [
        "date",
        "partner_column",
        "exact_orders",
        "orders_drift",
        "exact_gross_column",
        "gross_drift",
        "exact_refunded_column",
        "refunded_drift",
    ]
    list_filter = [DriftFilter, ("date", DateRangeFilter), PartnerFilter]
    list_select_related = ["partner"]
    list_display_links = None
    csv_fields = [
        (_("business day"), "date"),
        (_("partner code"), "partner__code"),
        (_("currency"), "reporting_currency"),
        (_("orders recorded"), "recorded_orders"),
        (_("orders in the archive"), "exact_orders"),
        (_("gross recorded"), "recorded_gross"),
        (_("gross in the archive"), "exact_gross"),
        (_("refunded recorded"), "recorded_refunded"),
        (_("refunded in the archive"), "exact_refunded"),
        (_("reconciled at"), "reconciled_at"),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).annotate(reporting_currency=Value(reporting_currency()))

    @admin.display(description=_("partner"), ordering="partner__code")
    def partner_column(self, obj: OrderDrift) -> str:
        return _partner_link(obj.partner)

    @admin.display(description=_("order drift"))
    def orders_drift(self, obj: OrderDrift) -> str:
        difference = obj.exact_orders - obj.recorded_orders
        return f"{difference:+d}" if difference else "—"

    @admin.display(description=_("gross in the archive"), ordering="exact_gross")
    def exact_gross_column(self, obj: OrderDrift) -> str:
        return money(obj.exact_gross, reporting_currency())

    @admin.display(description=_("gross drift"))
    def gross_drift(self, obj: OrderDrift) -> str:
        return _signed_money(obj.exact_gross - obj.recorded_gross)

    @admin.display(description=_("refunded in the archive"), ordering="exact_refunded")
    def exact_refunded_column(self, obj: OrderDrift) -> str:
        return money(obj.exact_refunded, reporting_currency())

    @admin.display(description=_("refund drift"))
    def refunded_drift(self, obj: OrderDrift) -> str:
        return _signed_money(obj.exact_refunded - obj.recorded_refunded)


def _signed_money(difference: int) -> str:
    """A drift in money: ``+48.00 CNY``, ``-1.20 CNY``, or — when the tables held what the archive holds."""
    if not difference:
        return "—"
    return ("+" if difference > 0 else "") + money(difference, reporting_currency())
