"""The conversions panels of the dashboard and the partner page (registered through ``stats.plugins``).

Figures are read live from the order tables, in the reporting currency, for the page's partner and scope:
orders and buyers of the orders paid in the range, gross (paid in the range), refunded (refund events in the
range, whenever their order was paid), net = gross - refunded, commission = ledger entries of the range. The
small query functions at the top are the definitions the panels rest on.
"""

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, QuerySet, Sum
from django.template.loader import render_to_string
from django.utils.translation import gettext as _

from conversions.conf import conversion_setting
from conversions.explain import money
from conversions.models import LedgerEntry, Order, OrderEvent
from partners.models import Partner
from stats.plugins import DashboardPage, PartnerPage, register_dashboard_panel, register_partner_page_panel

VIEW_ORDERS = "conversions.view_order"
TOP_LIMIT = 10
SELF = "self"


def orders_in_scope(partner: Partner | None, scope: str) -> QuerySet[Order]:
    """The orders a page counts: a partner's subtree (by the path at attribution) or its own; no partner:
    every order, or with ``scope="self"`` the orders without a partner."""
    if partner is None:
        return Order.objects.filter(partner__isnull=True) if scope == SELF else Order.objects.all()
    if scope == SELF:
        return Order.objects.filter(partner=partner)
    return Order.objects.filter(path__startswith=partner.path)


def _refunds(orders: QuerySet[Order], start: dt.date, end: dt.date) -> QuerySet[OrderEvent]:
    return OrderEvent.objects.filter(
        order__in=orders, status__in=OrderEvent.REVERSALS, date__gte=start, date__lte=end
    )


@dataclass(frozen=True)
class Figures:
    orders: int
    buyers: int  # distinct buyers of those orders
    gross: int  # reporting currency, minor units
    refunded: int
    commission: int

    @property
    def net(self) -> int:
        return self.gross - self.refunded


def order_figures(
    orders: QuerySet[Order], start: dt.date, end: dt.date, *, commission: QuerySet[LedgerEntry] | None = None
) -> Figures:
    """Orders, buyers, gross, refunded over ``start..end`` of ``orders``; commission: the sum of
    ``commission`` (ledger entries) dated in the range, by default those of the orders themselves."""
    paid = orders.filter(paid_date__gte=start, paid_date__lte=end).aggregate(
        orders=Count("pk"), buyers=Count("openid", distinct=True), gross=Sum("amount_reporting")
    )
    refunded = _refunds(orders, start, end).aggregate(total=Sum("amount_reporting"))["total"]
    entries = LedgerEntry.objects.filter(order__in=orders) if commission is None else commission
    earned = entries.filter(event_date__gte=start, event_date__lte=end).aggregate(total=Sum("amount"))[
        "total"
    ]
    return Figures(paid["orders"], paid["buyers"], paid["gross"] or 0, refunded or 0, earned or 0)


def commission_entries(partner: Partner | None, scope: str) -> QuerySet[LedgerEntry]:
    """What a partner earns: its own ledger entries, from its orders and its downline's (``scope="self"``:
    from its own orders only); no partner: every entry (what the site pays), or none for the orders without."""
    if partner is None:
        return LedgerEntry.objects.none() if scope == SELF else LedgerEntry.objects.all()
    entries = LedgerEntry.objects.filter(partner=partner)
    return entries.filter(order__partner=partner) if scope == SELF else entries


@dataclass(frozen=True)
class Day:
    date: dt.date
    orders: int
    buyers: int
    net: int
    uv: int

    @property
    def conversion_rate(self) -> str:
        return percent(self.buyers, self.uv)


def conversion_days(orders: QuerySet[Order], start: dt.date, end: dt.date, uv: list[int]) -> list[Day]:
    """Each day of ``start..end``: orders and buyers paid that day, net (paid less refunded that day), UV."""
    paid = {
        row["paid_date"]: row
        for row in orders.filter(paid_date__gte=start, paid_date__lte=end)
        .values("paid_date")
        .annotate(orders=Count("pk"), buyers=Count("openid", distinct=True), gross=Sum("amount_reporting"))
    }
    refunded = dict(
        _refunds(orders, start, end)
        .values("date")
        .annotate(total=Sum("amount_reporting"))
        .values_list("date", "total")
    )
    days = []
    for index in range((end - start).days + 1):
        day = start + dt.timedelta(days=index)
        row: Mapping[str, Any] = paid.get(day) or {}
        net = (row.get("gross") or 0) - (refunded.get(day) or 0)
        days.append(
            Day(day, row.get("orders", 0), row.get("buyers", 0), net, uv[index] if index < len(uv) else 0)
        )
    return days


@dataclass(frozen=True)
class TopPartner:
    partner: Partner
    orders: int
    net: int


def top_partners_by_net(orders: QuerySet[Order], start: dt.date, end: dt.date) -> list[TopPartner]:
    """The attributed partners of ``orders`` by their own net over the range, largest first (ties by code)."""
    gross = dict(
        orders.filter(paid_date__gte=start, paid_date__lte=end, partner__isnull=False)
        .values("partner")
        .annotate(total=Sum("amount_reporting"))
        .values_list("partner", "total")
    )
    counts = dict(
        orders.filter(paid_date__gte=start, paid_date__lte=end, partner__isnull=False)
        .values("partner")
        .annotate(n=Count("pk"))
        .values_list("partner", "n")
    )
    refunded = dict(
        _refunds(orders.filter(partner__isnull=False), start, end)
        .values("order__partner")
        .annotate(total=Sum("amount_reporting"))
        .values_list("order__partner", "total")
    )
    ids = set(gross) | set(refunded)
    partners = Partner.objects.in_bulk(ids)
    ranked = [
        TopPartner(partners[pk], counts.get(pk, 0), (gross.get(pk) or 0) - (refunded.get(pk) or 0))
        for pk in ids
    ]
    ranked.sort(key=lambda top: (-top.net, top.partner.code))
    return ranked[:TOP_LIMIT]


def percent(part: int, whole: int | None) -> str:
    """``part / whole`` as a percentage with two decimals, from integers; ``—`` when ``whole`` is 0 or unknown."""
    if not whole:
        return "—"
    hundredths = (part * 10_000 * 2 + whole) // (2 * whole)  # round half up, in integers
    return f"{hundredths // 100}.{hundredths % 100:02d}%"


def _can_read(page: DashboardPage | PartnerPage) -> bool:
    return page.request.user.has_perm(VIEW_ORDERS)


def dashboard_panel(page: DashboardPage) -> str | None:
    """Today's orders, buyers, net and commission; orders and buyers per day; top partners by net."""
    if not _can_read(page):
        return None
    currency = conversion_setting("REPORTING_CURRENCY")
    orders = orders_in_scope(page.partner, page.scope)
    earned = commission_entries(page.partner, page.scope)
    today = order_figures(orders, page.today, page.today, commission=earned)
    over_range = order_figures(orders, page.start, page.end, commission=earned)
    days = conversion_days(orders, page.start, page.end, list(page.uv_per_day))
    chart = page.draw_lines(
        [day.date.strftime("%m-%d") for day in days],
        [
            (_("orders"), [day.orders for day in days], "pv"),
            (_("buyers"), [day.buyers for day in days], "uv"),
        ],
        _("Orders and buyers per day"),
    )
    context = {
        "currency": currency,
        "today": today,
        "today_net": money(today.net, currency),
        "today_commission": money(today.commission, currency),
        "range": over_range,
        "range_net": money(over_range.net, currency),
        "range_commission": money(over_range.commission, currency),
        "range_rate": percent(over_range.buyers, page.range_uv),
        "start": page.start,
        "end": page.end,
        "days": [(day, money(day.net, currency)) for day in days],
        "chart": chart,
        "top": [(top, money(top.net, currency)) for top in top_partners_by_net(orders, page.start, page.end)],
        "commission_partner": page.partner,
    }
    return render_to_string("admin/conversions/dashboard_panel.html", context, request=page.request)


def partner_rows(partner: Partner, children: list[Partner], start: dt.date, end: dt.date) -> list[tuple]:
    """The partner's own orders, then each child's subtree: rows whose orders and money add up to its subtree."""
    rows = [(partner, True, order_figures(Order.objects.filter(partner=partner), start, end))]
    rows += [(child, False, order_figures(orders_in_scope(child, "tree"), start, end)) for child in children]
    return rows


def partner_page_panel(page: PartnerPage) -> str | None:
    """Per child (and the partner's own), orders, buyers, gross, refunded, net and commission, with totals."""
    if not _can_read(page):
        return None
    currency = conversion_setting("REPORTING_CURRENCY")
    rows = partner_rows(page.partner, list(page.children), page.start, page.end)
    subtree = order_figures(orders_in_scope(page.partner, "tree"), page.start, page.end)
    earned = order_figures(
        Order.objects.none(), page.start, page.end, commission=commission_entries(page.partner, "tree")
    ).commission
    context = {
        "partner": page.partner,
        "currency": currency,
        "rows": [(who, own, figures, _money_of(figures, currency)) for who, own, figures in rows],
        "total": subtree,
        "total_money": _money_of(subtree, currency),
        "earned": money(earned, currency),
        "start": page.start,
        "end": page.end,
    }
    return render_to_string("admin/conversions/partner_panel.html", context, request=page.request)


def _money_of(figures: Figures, currency: str) -> dict[str, str]:
    return {
        name: money(getattr(figures, name), currency) for name in ("gross", "refunded", "net", "commission")
    }


def register_panels() -> None:
    """Add the panels to the dashboard and the partner page (idempotent: registered by name)."""
    register_dashboard_panel("conversions", dashboard_panel)
    register_partner_page_panel("conversions", partner_page_panel)


register_panels()
