"""The conversions endpoints of /api/v1/: a partner's orders and money per day, the orders, its statements.

Same conventions as ``stats.read.api``: one clock reading per request, parameters validated by the endpoint's
serializer (a 400 naming the parameter), JSON or ``?format=csv``. Money is integers in the reporting
currency's minor units (``amount``, ``refunded`` of an order: its own currency's); a conversion rate is a
decimal string with four places ("0.0125"), exact in JSON and CSV alike, null where there was no UV. A portal
token sees its subtree's orders and conversions and its own partner's statements; any other partner is the
same 404 as an unknown code. No response carries a buyer's ``openid``.
"""

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import orjson
from django.db.models import Model, QuerySet
from django.http import HttpResponseBase
from django.utils import timezone
from django.utils.translation import gettext
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes, renderer_classes
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from conversions.conf import conversion_setting
from conversions.models import LedgerEntry, Order, Statement
from conversions.selectors import (
    ConversionNumbers,
    OrderLine,
    month_is_closed,
    order_ids,
    order_lines,
    order_list,
    paid_in,
    statement_entries,
    subtree_orders,
)
from conversions.selectors import (
    partner_conversions as conversion_days,
)
from conversions.selectors import (
    partner_statements as statements_of,
)
from conversions.serializers import ConversionsQuery, OrdersQuery, StatementsQuery
from cpsproject.common.csv_api import CSVRenderer, csv_format_parameter, csv_response_doc
from cpsproject.common.csv_export import csv_response
from cpsproject.common.json_rendering import RenderedJSON
from cpsproject.common.params import Pagination, error_responses, query
from cpsproject.common.timeutil import local_day, to_local
from cpsproject.common.viewers import CONVERSIONS_GROUP_NAME
from partners.models import Partner
from partners.permissions import IsStaffOrPortal, get_visible_partner, portal_partner

RENDERERS = [*api_settings.DEFAULT_RENDERER_CLASSES, CSVRenderer]

_Row = TypeVar("_Row", bound=Model)


class ConversionReaders(IsStaffOrPortal):
    staff_perms = ("conversions.view_order", "conversions.view_ledgerentry")
    staff_group = CONVERSIONS_GROUP_NAME


class StatementReaders(IsStaffOrPortal):
    staff_perms = ("conversions.view_statement", "conversions.view_ledgerentry")
    staff_group = CONVERSIONS_GROUP_NAME


def _wants_csv(request: Request) -> bool:
    return getattr(request.accepted_renderer, "format", None) == CSVRenderer.format


def _rate(value: object) -> str | None:
    return None if value is None else str(value)


def _paginated(rows: QuerySet[_Row], request: Request, render: Callable[[_Row], dict]) -> Response:
    """Return the page of ``rows`` that ``?page=`` asks for, each row rendered, with the count and links."""
    paginator = Pagination()
    page = paginator.paginate_queryset(rows, request)
    return paginator.get_paginated_response([render(row) for row in page])


# --- Documentation ----------------------------------------------------------------------------------------

_CODE = OpenApiParameter(
    "code", str, OpenApiParameter.PATH, description="A partner code the caller may see (else 404)."
)
_PAGE = OpenApiParameter("page", int, description="The page (100 rows a page); `last` for the last.")
_MONEY = "Minor units of the reporting currency."
_FIGURES = {
    "orders": serializers.IntegerField(help_text="Orders of the subtree (as attributed) paid that day."),
    "orders_self": serializers.IntegerField(help_text="The partner's own orders paid that day."),
    "buyers": serializers.IntegerField(
        help_text="Distinct buyers of those orders (over the range in total)."
    ),
    "buyers_self": serializers.IntegerField(help_text="Distinct buyers of the partner's own orders."),
    "gross": serializers.IntegerField(help_text=f"Paid that day. {_MONEY}"),
    "refunded": serializers.IntegerField(help_text=f"Refunded that day, whenever paid. {_MONEY}"),
    "net": serializers.IntegerField(help_text=f"gross − refunded. {_MONEY}"),
    "net_self": serializers.IntegerField(help_text=f"net of the partner's own orders. {_MONEY}"),
    "commission": serializers.IntegerField(
        help_text=f"The partner's own ledger entries of events that day, from its and its downline's orders. "
        f"{_MONEY}"
    ),
    "conversion_rate": serializers.DecimalField(
        max_digits=12,
        decimal_places=4,
        allow_null=True,
        help_text="buyers / the subtree's UV of the same days, a decimal string; null where UV is 0.",
    ),
}
_CONVERSIONS = inline_serializer(
    "PartnerConversions",
    {
        "partner": serializers.CharField(),
        "currency": serializers.CharField(help_text="The reporting currency (ISO 4217)."),
        "days": inline_serializer(
            "ConversionDay",
            {
                "date": serializers.DateField(),
                **dict(_FIGURES),
                "reconciled": serializers.BooleanField(
                    help_text="True once reconcile recounted the day's orders from the raw archive."
                ),
            },
            many=True,
        ),
        "total": inline_serializer("ConversionTotal", dict(_FIGURES)),
    },
)
_ORDER_FIELDS = {
    "order_id": serializers.CharField(),
    "partner": serializers.CharField(allow_null=True, help_text="The attributed partner; null: the site."),
    "status": serializers.ChoiceField(choices=["paid", "partly_refunded", "refunded", "cancelled"]),
    "paid_at": serializers.DateTimeField(),
    "currency": serializers.CharField(help_text="The order's own currency (ISO 4217)."),
    "amount": serializers.IntegerField(help_text="Paid, in minor units of the order's currency."),
    "refunded": serializers.IntegerField(
        help_text="Refunded so far, in minor units of the order's currency."
    ),
    "amount_reporting": serializers.IntegerField(help_text=f"Paid, at the order's exchange rate. {_MONEY}"),
    "commission": serializers.IntegerField(
        help_text=f"The order's commission now: all its shares (a portal: its subtree's shares). {_MONEY}"
    ),
}


def _page_of(name: str, fields: dict) -> serializers.Serializer:
    return inline_serializer(
        name,
        {
            "count": serializers.IntegerField(),
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            "results": inline_serializer(f"{name}Row", dict(fields), many=True),
        },
    )


_STATEMENT_FIELDS = {
    "month": serializers.CharField(help_text="YYYY-MM"),
    "amount": serializers.IntegerField(
        help_text=(
            "What the month pays: the sum of its ledger entries, less those held or reversed by a traffic "
            f"review, plus those released from an earlier statement. {_MONEY}"
        )
    ),
    "rows": serializers.IntegerField(help_text="How many ledger entries make up amount."),
    "closed_at": serializers.DateTimeField(),
    "held_amount": serializers.IntegerField(
        help_text=(
            "The month's entries kept out of amount at the close because their partner-day had an open "
            f"traffic finding: paid by a later statement once cleared (released), or reversed. {_MONEY}"
        )
    ),
    "held_rows": serializers.IntegerField(help_text="How many entries were held."),
    "released_amount": serializers.IntegerField(
        help_text=f"Entries held by an earlier statement and cleared since: included in amount. {_MONEY}"
    ),
    "released_rows": serializers.IntegerField(help_text="How many released entries rows includes."),
    "reversed_amount": serializers.IntegerField(
        help_text=(
            "Entries booked in the month that a confirmed finding cancelled, and the quality_reversal entries "
            f"booked in it: never paid. {_MONEY}"
        )
    ),
    "reversed_rows": serializers.IntegerField(help_text="How many reversed and reversal entries."),
}
_ENTRY_FIELDS = {
    "order_id": serializers.CharField(),
    "amount": serializers.IntegerField(help_text=_MONEY),
    "reason": serializers.ChoiceField(choices=LedgerEntry.Reason.values),
    "share_bp": serializers.IntegerField(help_text="The partner's share of the order's commission."),
    "event_ts": serializers.DateTimeField(),
    "event_date": serializers.DateField(),
    "booked_date": serializers.DateField(
        help_text="The event's day, or the first open day when its month was already closed."
    ),
    "paid_in": serializers.CharField(
        allow_null=True,
        help_text=(
            "YYYY-MM of the statement that pays the entry: its own month, or a later one after a traffic "
            "finding held it and was cleared; null while held, and for reversed and reversal entries."
        ),
    ),
}

# inline_serializer builds a class from the dict it is given (and adds to it): names are read from copies.
FIGURES = tuple(_FIGURES)
DAY_HEADER = ["partner", "date", *FIGURES, "reconciled"]
ORDER_HEADER = list(_ORDER_FIELDS)
STATEMENT_HEADER = ["partner", *_STATEMENT_FIELDS]
ENTRY_HEADER = ["partner", *_ENTRY_FIELDS]


# --- Conversions per day ----------------------------------------------------------------------------------


# The figures are ConversionNumbers' fields between the date and the reconciled flag, in the same order: a
# day's dictionary is zipped from its values (a year of days is the busiest answer of this API).
assert ConversionNumbers._fields[1:-1] == FIGURES, "FIGURES must follow ConversionNumbers"


def _figures(numbers: ConversionNumbers) -> dict:
    values: dict[str, object] = dict(zip(FIGURES, numbers[1:-1], strict=True))
    values["conversion_rate"] = _rate(numbers.conversion_rate)
    return values


@extend_schema(
    summary="Orders, buyers, money and commission of one partner per day",
    description=(
        "One entry per business day from start to end, zero-filled; from the recorded orders (a range's figures "
        "are cached while nothing is recorded, for at most a minute)."
    ),
    parameters=[_CODE, ConversionsQuery, csv_format_parameter()],
    responses={
        (200, "application/json"): _CONVERSIONS,
        (200, "text/csv"): csv_response_doc(DAY_HEADER),
        **error_responses(400, 404),
    },
)
@api_view(["GET"])
@permission_classes([ConversionReaders])
@renderer_classes(RENDERERS)
def partner_conversions(request: Request, code: str) -> Response | HttpResponseBase:
    """Per day and in total: the partner's (subtree and own) orders, buyers, money and commission."""
    partner = get_visible_partner(request.user, code)
    now = timezone.now()
    params = query(ConversionsQuery, request, today=local_day(now))
    start, end = params["start"], params["end"]
    days, total = conversion_days(partner=partner, start=start, end=end, now=now)
    if _wants_csv(request):
        rows = ([partner.code, d.date, *_figures(d).values(), d.reconciled] for d in days)
        return csv_response(rows, header=DAY_HEADER, filename=f"{partner.code}-conversions-{start}-{end}.csv")
    body = {
        "partner": partner.code,
        "currency": conversion_setting("REPORTING_CURRENCY"),
        "days": [{"date": d.date, **_figures(d), "reconciled": d.reconciled} for d in days],
        "total": _figures(total),
    }
    return Response(RenderedJSON(orjson.dumps(body)))


# --- Orders -----------------------------------------------------------------------------------------------


def _visible_orders(request: Request, code: str | None) -> QuerySet[Order]:
    if code:
        return subtree_orders(get_visible_partner(request.user, code))
    if request.user.is_staff:
        return Order.objects.all()
    scope = portal_partner(request.user)
    return subtree_orders(scope) if scope is not None else Order.objects.none()


def _order_row(line: OrderLine) -> dict:
    return {
        "order_id": line.order_id,
        "partner": line.partner,
        "status": line.status,
        "paid_at": to_local(line.paid_at).isoformat(),
        "currency": line.currency,
        "amount": line.amount,
        "refunded": line.refunded,
        "amount_reporting": line.amount_reporting,
        "commission": line.commission,
    }


@extend_schema(
    summary="Orders paid in a range",
    description="Newest first. Staff see every order; a portal token its subtree's (as attributed).",
    parameters=[OrdersQuery, _PAGE, csv_format_parameter()],
    responses={
        (200, "application/json"): _page_of("OrderPage", _ORDER_FIELDS),
        (200, "text/csv"): csv_response_doc(ORDER_HEADER),
        **error_responses(400, 404),
    },
)
@api_view(["GET"])
@permission_classes([ConversionReaders])
@renderer_classes(RENDERERS)
def orders(request: Request) -> Response | HttpResponseBase:
    """A page of the orders paid from start to end, with what was refunded and their commission."""
    params = query(OrdersQuery, request, today=local_day(timezone.now()))
    chosen = {
        "visible": _visible_orders(request, params.get("partner")),
        "start": params["start"],
        "end": params["end"],
        "status": params.get("status"),
        "earners": None if request.user.is_staff else portal_partner(request.user),
    }
    if _wants_csv(request):
        listed = order_list(**chosen).iterator(chunk_size=1000)
        rows = (list(_order_row(OrderLine.of(order)).values()) for order in listed)
        return csv_response(
            rows, header=ORDER_HEADER, filename=f"orders-{params['start']}-{params['end']}.csv"
        )
    return _order_page(order_ids(**chosen), request, earners=chosen["earners"])


def _order_page(ids: "QuerySet[Order, int]", request: Request, *, earners: Partner | None) -> Response:
    """The page of ``ids`` that ``?page=`` asks for, its money computed for that page's orders only.

    MariaDB evaluates the select list's subqueries for every matching row before it sorts, so paging the
    annotated query summed the events and ledger of a year's orders for 100 rows. The page's ids come from the
    bare query (an index scan and a sort of narrow rows), then one query reads those orders' money.
    """
    paginator = Pagination()
    page = paginator.paginate_queryset(ids, request)
    lines = order_lines(page, earners=earners)
    return paginator.get_paginated_response([_order_row(lines[pk]) for pk in page])


# --- Statements -------------------------------------------------------------------------------------------


def _statement_partner(request: Request, code: str) -> Partner:
    """The partner whose statements ``code`` names: a portal reads its own partner's only (else 404)."""
    partner = get_visible_partner(request.user, code)
    scope = None if request.user.is_staff else portal_partner(request.user)
    if scope is not None and scope.pk != partner.pk:
        raise NotFound(gettext("No such partner."))
    return partner


def _statement_row(statement: Statement) -> dict:
    return {
        "month": statement.month.strftime("%Y-%m"),
        "amount": statement.amount,
        "rows": statement.rows,
        "closed_at": to_local(statement.closed_at).isoformat(),
        "held_amount": statement.held_amount,
        "held_rows": statement.held_rows,
        "released_amount": statement.released_amount,
        "released_rows": statement.released_rows,
        "reversed_amount": statement.reversed_amount,
        "reversed_rows": statement.reversed_rows,
    }


def _entry_row(entry: LedgerEntry) -> dict:
    return {
        "order_id": entry.order.order_id,
        "amount": entry.amount,
        "reason": entry.reason,
        "share_bp": entry.share_bp,
        "event_ts": to_local(entry.event_ts).isoformat(),
        "event_date": entry.event_date.isoformat(),
        "booked_date": entry.booked_date.isoformat(),
        "paid_in": paid_in(entry),
    }


def _csv(rows: Iterable[Sequence[object]], header: list[str], filename: str) -> HttpResponseBase:
    return csv_response(rows, header=header, filename=filename)


@extend_schema(
    summary="A partner's monthly statements",
    description=(
        "Without month: the closed months with their amount and ledger-entry count, newest first. With "
        "month (a closed one, else 404 naming it): a page of the ledger entries booked in it. A portal token "
        "reads its own partner's statements only."
    ),
    parameters=[_CODE, StatementsQuery, _PAGE, csv_format_parameter()],
    responses={
        (200, "application/json"): inline_serializer("Statement", dict(_STATEMENT_FIELDS), many=True),
        (200, "text/csv"): csv_response_doc(STATEMENT_HEADER),
        **error_responses(400, 404),
    },
)
@api_view(["GET"])
@permission_classes([StatementReaders])
@renderer_classes(RENDERERS)
def partner_statements(request: Request, code: str) -> Response | HttpResponseBase:
    """The partner's closed months, or (``?month=``) the ledger entries one of them adds up."""
    partner = _statement_partner(request, code)
    month = query(StatementsQuery, request).get("month")
    if month is None:
        rows = [_statement_row(s) for s in statements_of(partner=partner)]
        if _wants_csv(request):
            lines = ([partner.code, *row.values()] for row in rows)
            return _csv(lines, STATEMENT_HEADER, f"{partner.code}-statements.csv")
        return Response(rows)
    first, last = month
    if not month_is_closed(first):
        raise NotFound({"month": [gettext("%(month)s is not a closed month.") % {"month": f"{first:%Y-%m}"}]})
    entries = statement_entries(partner=partner, first=first, last=last)
    if _wants_csv(request):
        lines = ([partner.code, *_entry_row(e).values()] for e in entries.iterator(chunk_size=1000))
        return _csv(lines, ENTRY_HEADER, f"{partner.code}-statement-{first:%Y-%m}.csv")
    return _paginated(entries, request, _entry_row)
