"""The login endpoints of /api/v1/ (staff only): record a login, one user's days, active users, DAU/WAU/MAU.

Reads need ``loginlog.view_loginmonth`` (the "statistics viewers" group), the write ``add_loginmonth``.
"""

import datetime as dt
from collections.abc import Iterator
from itertools import repeat

from django.http import HttpResponseBase
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes, renderer_classes
from rest_framework.exceptions import NotFound, ParseError, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.utils.urls import remove_query_param, replace_query_param

from cpsproject.common.csv_api import CSVRenderer, csv_format_parameter, csv_response_doc
from cpsproject.common.csv_export import csv_response
from cpsproject.common.params import date_param, error_responses, query, shown
from cpsproject.common.timeutil import local_day
from loginlog.models import LoginMonth
from loginlog.selectors import active_counts, active_page, every_active_user, login_days
from loginlog.serializers import ActiveQuery, CountsQuery, LoginRangeQuery
from loginlog.services import login_record
from loginlog.validation import LoginRejected, max_user_id, user_types, validate_login
from partners.permissions import ModelPermissionForWrites, StaffOnly

ACTIVE_PAGE_SIZE = 1000
# A CSV of active users turns this many ids at a time into Python ints, so it streams whatever their number.
ACTIVE_CSV_CHUNK = 10_000
RENDERERS = [*api_settings.DEFAULT_RENDERER_CLASSES, CSVRenderer]


def _wants_csv(request: Request) -> bool:
    return getattr(request.accepted_renderer, "format", None) == CSVRenderer.format


def _today() -> dt.date:
    return local_day(timezone.now())


class LoginReaders(StaffOnly):
    staff_perms = ("loginlog.view_loginmonth",)


class LoginWrites(ModelPermissionForWrites):
    """Recording a login needs ``loginlog.add_loginmonth``: logins end up as ``LoginMonth`` rows."""

    model = LoginMonth
    message = gettext_lazy("Recording logins needs a staff user with the loginlog.add_loginmonth permission.")


def _user(user_type: object, user_id: object) -> tuple[str, int]:
    try:
        return validate_login(user_type=user_type, user_id=user_id)
    except LoginRejected as exc:
        value = user_type if exc.field == "user_type" else user_id
        raise ValidationError({exc.field: _rejection(exc, value)}) from exc


def _rejection(exc: LoginRejected, value: object) -> str:
    """``exc``'s message in the request's language (``validate_login`` words it in English for dead letters)."""
    if exc.missing:
        return gettext("%(name)s is missing.") % {"name": exc.field}
    if exc.field == "user_type":
        return gettext("%(name)s must be one of %(choices)s, not %(value)s.") % {
            "name": exc.field,
            "choices": ", ".join(user_types()),
            "value": shown(value),
        }
    small_int = isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**30
    shown_id = str(value) if small_int else shown(value)
    return gettext("user_id must be an integer from 0 to %(most)d, not %(value)s.") % {
        "most": max_user_id(),
        "value": shown_id,
    }


_LOGIN = inline_serializer(
    "Login",
    {
        "user_type": serializers.CharField(help_text="One of the configured user types (client, office)."),
        "user_id": serializers.IntegerField(min_value=0, help_text="0 to CPS_MAX_USER_ID."),
        "date": serializers.DateField(
            required=False, help_text="The login day (YYYY-MM-DD). Default: today."
        ),
    },
)


@extend_schema(
    summary="Record a login",
    request=_LOGIN,
    responses={201: _LOGIN, **error_responses(400)},
    examples=[
        OpenApiExample("A client", value={"user_type": "client", "user_id": 1001, "date": "2026-11-21"})
    ],
)
@api_view(["POST"])
@permission_classes([StaffOnly, LoginWrites])
def record_login(request: Request) -> Response:
    """Record ``{"user_type","user_id","date"?}``; staff and service (staff) tokens with the permission."""
    data = request.data
    if not hasattr(data, "get"):
        raise ParseError(gettext("The body must be a JSON object."))
    user_type, user_id = _user(data.get("user_type"), data.get("user_id"))
    day = date_param(data, "date", default=_today())
    login_record(user_type=user_type, user_id=user_id, day=day)
    return Response(
        {"user_type": user_type, "user_id": user_id, "date": day.isoformat()}, status=status.HTTP_201_CREATED
    )


def _range(request: Request) -> tuple[dt.date, dt.date]:
    """``?month=YYYY-MM`` or ``?start=&end=`` (default: this month so far)."""
    params = query(LoginRangeQuery, request, today=_today())
    return params["start"], params["end"]


@extend_schema(
    summary="One user's login days",
    parameters=[
        OpenApiParameter("user_type", str, location=OpenApiParameter.PATH, description="client or office."),
        OpenApiParameter("user_id", int, location=OpenApiParameter.PATH, description="0 to CPS_MAX_USER_ID."),
        LoginRangeQuery,
        csv_format_parameter(),
    ],
    responses={
        (200, "application/json"): inline_serializer(
            "UserLogins",
            {
                "logged_in": serializers.BooleanField(),
                "days": serializers.ListField(child=serializers.DateField()),
            },
        ),
        (200, "text/csv"): csv_response_doc(["date"]),
        **error_responses(400),
    },
)
@api_view(["GET"])
@permission_classes([LoginReaders])
@renderer_classes(RENDERERS)
def user_logins(request: Request, user_type: str, user_id: str) -> Response | HttpResponseBase:
    """Whether, and on which days, one user logged in within the range."""
    user_type, uid = _user(user_type, user_id)
    start, end = _range(request)
    days = login_days(user_type=user_type, user_id=uid, start=start, end=end)
    if _wants_csv(request):
        return csv_response(
            ([d.isoformat()] for d in days), header=["date"], filename=f"logins-{user_type}-{uid}.csv"
        )
    return Response({"logged_in": bool(days), "days": [d.isoformat() for d in days]})


def _every_active(*, user_types: list[str], start: dt.date, end: dt.date) -> Iterator[tuple[str, int]]:
    """Every active user, turned into Python ints ``ACTIVE_CSV_CHUNK`` at a time."""
    for user_type, ids in every_active_user(user_types=user_types, start=start, end=end):
        for first in range(0, len(ids), ACTIVE_CSV_CHUNK):
            yield from zip(repeat(user_type), ids[first : first + ACTIVE_CSV_CHUNK].tolist())


@extend_schema(
    summary="Users active in a range",
    description=(
        f"A page of {ACTIVE_PAGE_SIZE} user ids (`?page=N`); `count` is how many users were active. Without "
        "user_type, every type, results as {user_type, user_id}. With `format=csv`: every active user at once "
        "(no pages), streamed as `user_type,user_id` lines."
    ),
    parameters=[ActiveQuery, csv_format_parameter()],
    responses={
        (200, "application/json"): inline_serializer(
            "ActiveUsers",
            {
                "count": serializers.IntegerField(),
                "next": serializers.URLField(allow_null=True),
                "previous": serializers.URLField(allow_null=True),
                "results": serializers.ListField(
                    child=serializers.JSONField(), help_text="user ids, or {user_type, user_id} objects"
                ),
            },
        ),
        (200, "text/csv"): csv_response_doc(["user_type", "user_id"]),
        **error_responses(400, 404),
    },
)
@api_view(["GET"])
@permission_classes([LoginReaders])
@renderer_classes(RENDERERS)
def active(request: Request) -> Response | HttpResponseBase:
    """Page of the users active in the range; ``count`` is how many. Without ``user_type``: every type.

    A page reads only its own ids from Redis (``?page=N``, 1000 ids a page), so its cost does not grow with
    the number of active users. The CSV holds every active user, read and sent in chunks.
    """
    params = query(ActiveQuery, request, today=_today())
    start, end = params["start"], params["end"]
    one_type = "user_type" in params
    types = [params["user_type"]] if one_type else user_types()
    if _wants_csv(request):
        return csv_response(
            _every_active(user_types=types, start=start, end=end),
            header=["user_type", "user_id"],
            filename=f"active-{start}-{end}.csv",
        )
    page = params["page"]
    count, rows = active_page(
        user_types=types, start=start, end=end, offset=(page - 1) * ACTIVE_PAGE_SIZE, limit=ACTIVE_PAGE_SIZE
    )
    if page > 1 and not rows:
        raise NotFound({"page": [gettext("Invalid page.")]})
    results = [u for _, u in rows] if one_type else [{"user_type": t, "user_id": u} for t, u in rows]
    return Response(
        {
            "count": count,
            "next": _page_link(request, page + 1) if page * ACTIVE_PAGE_SIZE < count else None,
            "previous": _page_link(request, page - 1) if page > 1 else None,
            "results": results,
        }
    )


def _page_link(request: Request, page: int) -> str:
    """This URL at another page, as DRF's ``PageNumberPagination`` writes it (page 1 has no ``page``)."""
    url = request.build_absolute_uri()
    return remove_query_param(url, "page") if page == 1 else replace_query_param(url, "page", page)


@extend_schema(
    summary="DAU, WAU and MAU of one user type",
    parameters=[CountsQuery],
    responses={
        200: inline_serializer(
            "ActiveCounts",
            {
                "user_type": serializers.CharField(),
                "date": serializers.DateField(),
                "dau": serializers.IntegerField(),
                "wau": serializers.IntegerField(help_text="The 7 days ending on date."),
                "mau": serializers.IntegerField(help_text="The 30 days ending on date."),
            },
        ),
        **error_responses(400),
    },
)
@api_view(["GET"])
@permission_classes([LoginReaders])
def counts(request: Request) -> Response:
    """DAU, WAU and MAU of one user type for the day (default today)."""
    params = query(CountsQuery, request)
    user_type = params["user_type"]
    day = params.get("date") or _today()
    return Response(
        {"user_type": user_type, "date": day.isoformat(), **active_counts(user_type=user_type, day=day)}
    )
