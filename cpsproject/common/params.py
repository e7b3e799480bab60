"""Request input for the API: query and path parameters, JSON bodies and page numbers.

Every parser here is total: any input becomes a value or a 400 whose body names the parameter
(``{"start": ["…"]}``), never a 500. Dates are bounded to ``EARLIEST``..``LATEST``, so the date arithmetic
downstream (a range's end plus a day, a day's bounds, epoch seconds, a month's last day) can never leave the
calendar (``date.max + 1 day`` raises ``OverflowError``).
"""

import datetime as dt
import re
from collections.abc import Mapping, Sequence

from rest_framework import parsers
from rest_framework.exceptions import NotFound, ParseError, ValidationError
from rest_framework.pagination import PageNumberPagination

from cpsproject.common.timeutil import business_tz

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


def _raw(params: Mapping, name: str) -> str | None:
    """The parameter as a string, or None when absent or empty; refuse what no parser should see."""
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise ValidationError({name: f"{name} must be a string, not {shown(raw)}."})
    if len(raw) > MAX_LENGTH:
        raise ValidationError({name: f"{name} is longer than {MAX_LENGTH} characters."})
    if not raw.isprintable():
        raise ValidationError({name: f"{name} holds unprintable characters: {shown(raw)}."})
    return raw


def _bounded(name: str, day: dt.date) -> dt.date:
    if not EARLIEST <= day <= LATEST:
        raise ValidationError({name: f"{name} must be from {EARLIEST} to {LATEST}, not {day.isoformat()}."})
    return day


def date_param(params: Mapping, name: str, *, default: dt.date | None = None) -> dt.date:
    """A ``YYYY-MM-DD`` date from ``EARLIEST`` to ``LATEST``; ``default`` when absent (required if None)."""
    raw = _raw(params, name)
    if raw is None:
        if default is None:
            raise ValidationError({name: f"{name} is required (YYYY-MM-DD)."})
        return default
    try:
        if not _DATE.fullmatch(raw):
            raise ValueError(raw)
        day = dt.date.fromisoformat(raw)
    except ValueError as exc:
        raise ValidationError({name: f"{name} must be a date as YYYY-MM-DD, not {shown(raw)}."}) from exc
    return _bounded(name, day)


def date_range_params(
    params: Mapping, *, default_start: dt.date, default_end: dt.date, max_days: int = 366
) -> tuple[dt.date, dt.date]:
    """``?start=&end=`` (inclusive), at most ``max_days`` long."""
    start = date_param(params, "start", default=default_start)
    end = date_param(params, "end", default=default_end)
    if end < start:
        raise ValidationError({"end": "end must not be before start."})
    if (end - start).days >= max_days:
        raise ValidationError({"end": f"end may be at most {max_days - 1} days after start."})
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
        raise ValidationError({name: f"{name} must be a month as YYYY-MM, not {shown(raw)}."}) from exc
    _bounded(name, first)
    following = (first.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
    return first, following - dt.timedelta(days=1)


def int_param(params: Mapping, name: str, *, default: int, low: int, high: int) -> int:
    """An integer of ASCII digits (``int`` would also take ``"١٢"``, ``" 1"`` and ``"1_0"``) from low to high."""
    raw = _raw(params, name)
    if raw is None:
        return default
    if not _INT.fullmatch(raw):
        raise ValidationError({name: f"{name} must be an integer, not {shown(raw)}."})
    value = int(raw)
    if not low <= value <= high:
        raise ValidationError({name: f"{name} must be between {low} and {high}."})
    return value


MAX_PAGE = 10**9


def page_param(params: Mapping, name: str = "page") -> int:
    """A page number from 1; a page past the last is the caller's to refuse (404)."""
    return int_param(params, name, default=1, low=1, high=MAX_PAGE)


def choice_param(params: Mapping, name: str, *, choices: Sequence[str], default: str | None = None) -> str:
    """One of ``choices``; ``default`` when absent (required if None)."""
    raw = _raw(params, name)
    value = default if raw is None else raw
    if value not in choices:
        raise ValidationError(
            {name: f"{name} must be one of {', '.join(map(str, choices))}, not {shown(value)}."}
        )
    return value


def datetime_param(params: Mapping, name: str, *, default: dt.datetime) -> dt.datetime:
    """An ISO-8601 date or datetime from ``EARLIEST`` to ``LATEST``; without an offset it is business time."""
    raw = _raw(params, name)
    if raw is None:
        return default
    try:
        moment = dt.datetime.fromisoformat(raw)
    except ValueError as exc:
        raise ValidationError(
            {name: f"{name} must be an ISO-8601 date or datetime, not {shown(raw)}."}
        ) from exc
    # The wall date is bounded, and an offset is under a day, so any conversion stays far inside the calendar.
    _bounded(name, moment.date())
    return moment if moment.tzinfo else moment.replace(tzinfo=business_tz())


# --- Bodies and pages -----------------------------------------------------------------------------------


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser; a body nested deeper than Python's parser can recurse is a 400 like any bad JSON."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError("JSON parse error - the body is nested too deeply.") from exc


class Pagination(PageNumberPagination):
    """DRF's page-number pages; a bad ``page`` is a 400 and a page past the end a 404, both naming ``page``."""

    def get_page_number(self, request, paginator) -> int | str:
        if request.query_params.get(self.page_query_param) in self.last_page_strings:
            return paginator.num_pages
        return page_param(request.query_params)

    def paginate_queryset(self, queryset, request, view=None):
        try:
            return super().paginate_queryset(queryset, request, view)
        except NotFound as exc:
            raise NotFound({self.page_query_param: [str(exc.detail)]}) from exc
