import datetime as dt

from django.utils import timezone
from rest_framework import status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import NotFound, ParseError, ValidationError
from rest_framework.permissions import IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

from cpsproject.common.params import choice_param, date_param, date_range_params, month_param, page_param
from cpsproject.common.timeutil import local_day
from loginlog.models import LoginMonth
from loginlog.selectors import active_counts, active_page, login_days
from loginlog.services import login_record
from loginlog.validation import LoginRejected, user_types, validate_login
from partners.permissions import ModelPermissionForWrites

ACTIVE_PAGE_SIZE = 1000


def _today() -> dt.date:
    return local_day(timezone.now())


class LoginWrites(ModelPermissionForWrites):
    """Recording a login needs ``loginlog.add_loginmonth``: logins end up as ``LoginMonth`` rows."""

    model = LoginMonth
    message = "Recording logins needs a staff user with the loginlog.add_loginmonth permission."


def _user(user_type: object, user_id: object) -> tuple[str, int]:
    try:
        return validate_login(user_type=user_type, user_id=user_id)
    except LoginRejected as exc:
        raise ValidationError({exc.field: str(exc)}) from exc


@api_view(["POST"])
@permission_classes([IsAdminUser, LoginWrites])
def record_login(request: Request) -> Response:
    """Record ``{"user_type","user_id","date"?}``; staff and service (staff) tokens with the permission."""
    data = request.data
    if not hasattr(data, "get"):
        raise ParseError("The body must be a JSON object.")
    user_type, user_id = _user(data.get("user_type"), data.get("user_id"))
    day = date_param(data, "date", default=_today())
    login_record(user_type=user_type, user_id=user_id, day=day)
    return Response(
        {"user_type": user_type, "user_id": user_id, "date": day.isoformat()}, status=status.HTTP_201_CREATED
    )


def _range(params) -> tuple[dt.date, dt.date]:
    """``?month=YYYY-MM`` or ``?start=&end=`` (default: this month so far)."""
    month = month_param(params, "month")
    if month:
        return month
    today = _today()
    return date_range_params(params, default_start=today.replace(day=1), default_end=today, max_days=3660)


@api_view(["GET"])
@permission_classes([IsAdminUser])
def user_logins(request: Request, user_type: str, user_id: str) -> Response:
    """Whether, and on which days, one user logged in within the range."""
    user_type, uid = _user(user_type, user_id)
    start, end = _range(request.query_params)
    days = login_days(user_type=user_type, user_id=uid, start=start, end=end)
    return Response({"logged_in": bool(days), "days": [d.isoformat() for d in days]})


@api_view(["GET"])
@permission_classes([IsAdminUser])
def active(request: Request) -> Response:
    """Page of the users active in the range; ``count`` is how many. Without ``user_type``: every type.

    A page reads only its own ids from Redis (``?page=N``, 1000 ids a page), so its cost does not grow with
    the number of active users.
    """
    params = request.query_params
    start, end = _range(params)
    one_type = bool(params.get("user_type"))
    types = [choice_param(params, "user_type", choices=user_types())] if one_type else user_types()
    page = page_param(params)
    count, rows = active_page(
        user_types=types, start=start, end=end, offset=(page - 1) * ACTIVE_PAGE_SIZE, limit=ACTIVE_PAGE_SIZE
    )
    if page > 1 and not rows:
        raise NotFound({"page": ["Invalid page."]})
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


@api_view(["GET"])
@permission_classes([IsAdminUser])
def counts(request: Request) -> Response:
    """DAU, WAU and MAU of one user type for the day (default today)."""
    params = request.query_params
    user_type = choice_param(params, "user_type", choices=user_types())
    day = date_param(params, "date", default=_today())
    return Response(
        {"user_type": user_type, "date": day.isoformat(), **active_counts(user_type=user_type, day=day)}
    )
