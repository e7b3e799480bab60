"""Request input for the API: query and path parameters, JSON bodies and page numbers.

Every parser here is total: any input becomes a value or a 400 whose body names the parameter
(``{"start": ["…"]}``), never a 500. Dates are bounded to ``EARLIEST``..``LATEST``, so the date arithmetic
downstream (a range's end plus a day, a day's bounds, epoch seconds, a month's last day) can never leave the
calendar (``date.max + 1 day`` raises ``OverflowError``).

Endpoints read their query parameters through a serializer of the ``Query*`` fields at the end (one
serializer per endpoint, which drf-spectacular documents); the fields parse with the functions here, which the
admin's dashboard also calls directly.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, TypeVar

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.utils.translation import gettext
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema_field
from rest_framework import parsers, serializers
from rest_framework.exceptions import NotAcceptable, NotFound, ParseError, ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.pagination import PageNumberPagination
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.settings import api_settings

from cpsproject.common.timeutil import business_tz, day_bounds

if TYPE_CHECKING:  # rest_framework.views imports this module (through the API settings)
    from rest_framework.views import APIView

EARLIEST = dt.date(2000, 1, 1)
LATEST = dt.date(2100, 12, 31)
# Longer than any valid value of any parameter (an ISO datetime with microseconds and offset is 32).
MAX_LENGTH = 64

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_MONTH = re.compile(r"\d{4}-\d{2}", re.ASCII)
_INT = re.compile(r"-?\d{1,18}", re.ASCII)


def shown(value: object) -> str:
    """A short, printable rendering of a rejected value for an error message."""
    text = value if isinstance(value, str) else type(value).__name__
    if len(text) > 32:
        text = text[:32] + "..."
    return repr(text.encode("ascii", "backslashreplace").decode("ascii"))


def _said(name: str, value: object) -> dict[str, str]:
    """The values of a message about ``value`` given for the parameter ``name``."""
    return {"name": name, "value": shown(value)}


def _raw(params: Mapping, name: str) -> str | None:
    """The parameter as a string, or None when absent or empty; refuse what no parser should see."""
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise ValidationError({name: gettext("%(name)s must be a string, not %(value)s.") % _said(name, raw)})
    if len(raw) > MAX_LENGTH:
        raise ValidationError(
            {
                name: gettext("%(name)s is longer than %(most)d characters.")
                % {"name": name, "most": MAX_LENGTH}
            }
        )
    if not raw.isprintable():
        raise ValidationError(
            {name: gettext("%(name)s holds unprintable characters: %(value)s.") % _said(name, raw)}
        )
    return raw


def _bounded(name: str, day: dt.date) -> dt.date:
    if not EARLIEST <= day <= LATEST:
        raise ValidationError(
            {
                name: gettext("%(name)s must be from %(first)s to %(last)s, not %(value)s.")
                % {"name": name, "first": EARLIEST, "last": LATEST, "value": day.isoformat()}
            }
        )
    return day


def date_param(params: Mapping, name: str, *, default: dt.date | None = None) -> dt.date:
    """A ``YYYY-MM-DD`` date from ``EARLIEST`` to ``LATEST``; ``default`` when absent (required if None)."""
    raw = _raw(params, name)
    if raw is None:
        if default is None:
            raise ValidationError({name: gettext("%(name)s is required (YYYY-MM-DD).") % {"name": name}})
        return default
    try:
        if not _DATE.fullmatch(raw):
            raise ValueError(raw)
        day = dt.date.fromisoformat(raw)
    except ValueError as exc:
        raise ValidationError(
            {name: gettext("%(name)s must be a date as YYYY-MM-DD, not %(value)s.") % _said(name, raw)}
        ) from exc
    return _bounded(name, day)


def max_range_days() -> int:
    """The most days a ``start``..``end`` range may cover (``CPS_API_MAX_RANGE_DAYS``), on every endpoint."""
    return getattr(settings, "CPS_API_MAX_RANGE_DAYS", 366)


def check_date_range(start: dt.date, end: dt.date) -> None:
    """Refuse (400 naming ``end``) an ``end`` before ``start`` or a range over ``max_range_days()``."""
    _check_range(start, end, (end - start).days + 1, max_range_days())


def _check_range(start: dt.date, end: dt.date, days: float, max_days: int) -> None:
    if end < start:
        raise ValidationError({"end": gettext("end must not be before start.")})
    if days > max_days:
        raise ValidationError(
            {"end": gettext("start..end may cover at most %(days)d days.") % {"days": max_days}}
        )


def date_range_params(
    params: Mapping, *, default_start: dt.date, default_end: dt.date, max_days: int | None = None
) -> tuple[dt.date, dt.date]:
    """``?start=&end=``: whole days, both inclusive, at most ``max_days`` (default the setting) days."""
    start = date_param(params, "start", default=default_start)
    end = date_param(params, "end", default=default_end)
    _check_range(start, end, (end - start).days + 1, max_days or max_range_days())
    return start, end


def moment_range_params(
    params: Mapping, *, default_end: dt.datetime, default_span: dt.timedelta, max_days: int | None = None
) -> tuple[dt.datetime, dt.datetime]:
    """``?start=&end=`` as moments, both inclusive: a datetime is that instant, a date its whole business day.

    ``start=D`` is D's first instant and ``end=D`` its last, so ``start=D&end=D`` covers the day D, as on
    the endpoints that take dates only. Without ``start`` the range is ``default_span`` long.
    """
    end = moment_param(params, "end", default=default_end, end_of_day=True)
    start = moment_param(params, "start", default=end - default_span)
    _check_range(start, end, (end - start) / dt.timedelta(days=1), max_days or max_range_days())
    return start, end


def month_param(params: Mapping, name: str) -> tuple[dt.date, dt.date] | None:
    """``YYYY-MM`` as its first and last day, or None when absent."""
    raw = _raw(params, name)
    if raw is None:
        return None
    try:
        if not _MONTH.fullmatch(raw):
            raise ValueError(raw)
        first = dt.date(int(raw[:4]), int(raw[5:]), 1)
    except ValueError as exc:
        raise ValidationError(
            {name: gettext("%(name)s must be a month as YYYY-MM, not %(value)s.") % _said(name, raw)}
        ) from exc
    _bounded(name, first)
    following = (first.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
    return first, following - dt.timedelta(days=1)


def int_param(params: Mapping, name: str, *, default: int, low: int, high: int) -> int:
    """An integer of ASCII digits (``int`` would also take ``"١٢"``, ``" 1"`` and ``"1_0"``) from low to high."""
    raw = _raw(params, name)
    if raw is None:
        return default
    if not _INT.fullmatch(raw):
        raise ValidationError(
            {name: gettext("%(name)s must be an integer, not %(value)s.") % _said(name, raw)}
        )
    value = int(raw)
    if not low <= value <= high:
        raise ValidationError(
            {
                name: gettext("%(name)s must be between %(low)d and %(high)d.")
                % {"name": name, "low": low, "high": high}
            }
        )
    return value


MAX_PAGE = 10**9


def page_param(params: Mapping, name: str = "page") -> int:
    """A page number from 1; a page past the last is the caller's to refuse (404)."""
    return int_param(params, name, default=1, low=1, high=MAX_PAGE)


def choice_param(params: Mapping, name: str, *, choices: Sequence[str], default: str | None = None) -> str:
    """One of ``choices``; ``default`` when absent (required if None)."""
    raw = _raw(params, name)
    value = default if raw is None else raw
    if value is None or value not in choices:
        raise ValidationError(
            {
                name: gettext("%(name)s must be one of %(choices)s, not %(value)s.")
                % {**_said(name, value), "choices": ", ".join(map(str, choices))}
            }
        )
    return value


def moment_param(
    params: Mapping, name: str, *, default: dt.datetime, end_of_day: bool = False
) -> dt.datetime:
    """An ISO-8601 datetime as that instant, or an ISO-8601 date as its first (its last: ``end_of_day``) instant.

    A date is whatever ``date.fromisoformat`` takes (``2026-11-21``, ``20261121``, ``2026-W47-6``): the
    business day it names. A datetime without an offset is business time.
    """
    raw = _raw(params, name)
    if raw is None:
        return default
    try:
        day = dt.date.fromisoformat(raw)
    except ValueError:
        return datetime_param(params, name, default=default)
    first, following = day_bounds(_bounded(name, day))
    return following - dt.timedelta(microseconds=1) if end_of_day else first


def datetime_param(params: Mapping, name: str, *, default: dt.datetime) -> dt.datetime:
    """An ISO-8601 date or datetime from ``EARLIEST`` to ``LATEST``; without an offset it is business time."""
    raw = _raw(params, name)
    if raw is None:
        return default
    try:
        moment = dt.datetime.fromisoformat(raw)
    except ValueError as exc:
        raise ValidationError(
            {
                name: gettext("%(name)s must be an ISO-8601 date or datetime, not %(value)s.")
                % _said(name, raw)
            }
        ) from exc
    # The wall date is bounded, and an offset is under a day, so any conversion stays far inside the calendar.
    _bounded(name, moment.date())
    return moment if moment.tzinfo else moment.replace(tzinfo=business_tz())


# --- Bodies and pages -----------------------------------------------------------------------------------


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, refusing in the reader's language and saying where the body stops being JSON.

    DRF's message is Python's English error text; a body nested deeper than Python's parser can recurse is a
    400 like any bad JSON.
    """

    def parse(
        self,
        stream: IO[bytes],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError(gettext("The body is not valid JSON: it is nested too deeply.")) from exc
        except ParseError as exc:
            cause = exc.__context__
            if isinstance(cause, json.JSONDecodeError):
                raise ParseError(
                    gettext("The body is not valid JSON (at line %(line)d, column %(column)d).")
                    % {"line": cause.lineno, "column": cause.colno}
                ) from exc
            # Bytes that are not UTF-8, or NaN and Infinity (no JSON number stands for them).
            raise ParseError(gettext("The body is not valid JSON (UTF-8, finite numbers only).")) from exc


class Pagination(PageNumberPagination):
    """DRF's page-number pages; a bad ``page`` is a 400 and a page past the end a 404, both naming ``page``."""

    def get_page_number(self, request: Request, paginator: Paginator) -> int | str:
        if request.query_params.get(self.page_query_param) in self.last_page_strings:
            return paginator.num_pages
        return page_param(request.query_params)

    def paginate_queryset(
        self, queryset: QuerySet[Any] | Sequence[Any], request: Request, view: APIView | None = None
    ) -> list[Any]:
        try:
            page = super().paginate_queryset(queryset, request, view)
        except NotFound as exc:
            raise NotFound({self.page_query_param: [str(exc.detail)]}) from exc
        if page is None:
            # DRF pages nothing without a page size. Settings fix PAGE_SIZE and no page-size parameter is read,
            # so no request gets here: only a settings change that would make every list unbounded.
            raise ImproperlyConfigured("REST_FRAMEWORK['PAGE_SIZE'] must be set: the API lists come in pages")
        return page


class FormatNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, where ``?format=`` wins over the Accept header, and refusals say what would work.

    A ``?format=`` the view cannot render is a 400 naming ``format`` and listing the formats it can (DRF: a bare
    404); a format it can render is answered whatever the Accept header asks (DRF: a 406 when they disagree,
    so ``?format=csv`` failed from a client that sends ``Accept: text/html``). Without ``?format=``, an Accept
    header the view cannot satisfy is a 406 listing the media types it answers.
    """

    def select_renderer(
        self, request: Request, renderers: Sequence[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        name = api_settings.URL_FORMAT_OVERRIDE
        chosen = None
        if name and not format_suffix:
            formats = list(dict.fromkeys(r.format for r in renderers))  # a format may have two renderers
            if request.query_params.get(name):
                chosen = choice_param(request.query_params, name, choices=formats)
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except NotAcceptable as exc:
            if chosen is not None:
                renderer = next(r for r in renderers if r.format == chosen)
                return renderer, renderer.media_type
            types = ", ".join(dict.fromkeys(r.media_type for r in renderers))
            raise NotAcceptable(
                gettext(
                    "The Accept header asks for none of the media types this endpoint answers: %(types)s."
                )
                % {"types": types}
            ) from exc


# --- The schema of what these parsers accept and refuse (drf-spectacular) -------------------------------

ERROR_SCHEMA = {
    "type": "object",
    "description": (
        "Every error has this shape. A 400 about parameters or body fields also lists each one's messages "
        "under its name."
    ),
    "properties": {
        "error": {
            "type": "string",
            "description": "invalid, parse_error, not_authenticated, authentication_failed, permission_denied, "
            "not_found, method_not_allowed, not_acceptable, unsupported_media_type, throttled",
        },
        "detail": {"type": "string", "description": "One readable sentence."},
    },
    "required": ["error", "detail"],
    "additionalProperties": {"type": "array", "items": {"type": "string"}},
}
_ERROR_TEXT = {
    400: "A parameter or body field is refused; its name is a key of the body.",
    401: "No credentials or wrong ones; the WWW-Authenticate header names the Token scheme.",
    403: "Not allowed to do this: a portal token outside its scope, or staff without the view permission.",
    404: "No such object, or not visible to this token.",
    429: "Too many requests: wait the Retry-After seconds.",
}


_ERROR_EXAMPLE = {
    400: {
        "error": "invalid",
        "detail": "end must not be before start.",
        "end": ["end must not be before start."],
    },
    401: {"error": "not_authenticated", "detail": "Authentication credentials were not provided."},
    403: {"error": "permission_denied", "detail": "You do not have permission to perform this action."},
    404: {"error": "not_found", "detail": "No such partner."},
    429: {"error": "throttled", "detail": "Request was throttled. Expected available in 12 seconds."},
}


def error_responses(*statuses: int) -> dict:
    """The documented error responses for ``statuses`` (401, 403 and 429 are always possible); errors are JSON."""
    return {
        (status, "application/json"): OpenApiResponse(
            response=ERROR_SCHEMA,
            description=_ERROR_TEXT[status],
            examples=[OpenApiExample(f"{status}", value=_ERROR_EXAMPLE[status], status_codes=[status])],
        )
        for status in sorted({*statuses, 401, 403, 429})
    }


# --- Query serializers: the parsers above as DRF fields -------------------------------------------------
#
# An endpoint declares its query parameters as one serializer of these fields and validates
# ``request.query_params`` with it; drf-spectacular documents each field (type, format, enum, bounds, help
# text) from the same class. The fields parse with the functions above, so checks and messages are the same
# whether a parameter is read alone or through a serializer.


_T = TypeVar("_T")


def _as_field_error(name: str, parse: Callable[[], _T]) -> _T:
    try:
        return parse()
    except ValidationError as exc:  # the parsers name the parameter; a field's error is just its messages
        detail = exc.detail
        raise ValidationError(
            detail[name] if isinstance(detail, dict) and name in detail else detail
        ) from exc


class _QueryField:
    """An absent or empty parameter is left out of the validated data: the endpoint applies its default."""

    field_name: str  # set by the serializer field this mixes into

    def get_value(self, dictionary: Mapping[str, Any]) -> Any:
        value = dictionary.get(self.field_name, serializers.empty)
        return serializers.empty if value == "" else value


class QueryDate(_QueryField, serializers.DateField):
    """``YYYY-MM-DD``, from ``EARLIEST`` to ``LATEST``."""

    def to_internal_value(self, value: str) -> dt.date:
        name = self.field_name
        return _as_field_error(name, lambda: date_param({name: value}, name, default=EARLIEST))


@extend_schema_field({"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$", "example": "2026-11"})
class QueryMonth(_QueryField, serializers.Field):
    """``YYYY-MM``: its first and last day."""

    def to_internal_value(self, value: str) -> tuple[dt.date, dt.date] | None:
        name = self.field_name
        return _as_field_error(name, lambda: month_param({name: value}, name))


class QueryInt(_QueryField, serializers.IntegerField):
    """ASCII digits from ``min_value`` to ``max_value`` (both required)."""

    def to_internal_value(self, value: str) -> int:
        name = self.field_name
        return _as_field_error(
            name, lambda: int_param({name: value}, name, default=0, low=self.min_value, high=self.max_value)
        )


class QueryChoice(_QueryField, serializers.ChoiceField):
    """One of ``choices`` (strings or integers: an integer choice is answered as an int)."""

    def to_internal_value(self, value: str) -> str | int:
        name = self.field_name
        by_text = {str(choice): choice for choice in self.choices}
        return by_text[
            _as_field_error(name, lambda: choice_param({name: value}, name, choices=list(by_text)))
        ]


class QueryText(_QueryField, serializers.CharField):
    """Printable text of at most ``MAX_LENGTH`` characters, read further by the endpoint."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", MAX_LENGTH)
        super().__init__(**kwargs)

    def to_internal_value(self, value: str) -> str | None:
        name = self.field_name
        return _as_field_error(name, lambda: _raw({name: value}, name))


def query(serializer_class: type[serializers.Serializer], request: Request, **context: Any) -> dict[str, Any]:
    """Validate ``request``'s query parameters with ``serializer_class``; a 400 names each bad parameter."""
    serializer = serializer_class(data=request.query_params, context=context)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class BusinessDayRangeQuery(serializers.Serializer):
    """``start`` and ``end`` as whole business days, a week ending today by default: the range the conversions
    and quality reads share (``query(..., today=...)`` gives today)."""

    start = QueryDate(
        required=False,
        help_text="First business day, inclusive (YYYY-MM-DD, business time zone). Default: six days before end.",
    )
    end = QueryDate(
        required=False,
        help_text="Last business day, inclusive. Default: today. At most CPS_API_MAX_RANGE_DAYS days (366).",
    )

    def validate(self, attrs: dict) -> dict:
        today: dt.date = self.context["today"]
        attrs.setdefault("end", today)
        attrs.setdefault("start", attrs["end"] - dt.timedelta(days=6))
        check_date_range(attrs["start"], attrs["end"])
        return attrs
