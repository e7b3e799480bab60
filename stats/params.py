"""Query-parameter parsing for the API: a bad value is a 400 whose body names the parameter."""

import datetime as dt

from rest_framework.exceptions import ValidationError

from stats.timeutil import business_tz


def date_param(params, name: str, *, default: dt.date | None = None) -> dt.date:
    raw = params.get(name)
    if raw in (None, ""):
        if default is None:
            raise ValidationError({name: f"{name} is required (YYYY-MM-DD)."})
        return default
    try:
        return dt.date.fromisoformat(raw)
    except ValueError as exc:
        raise ValidationError({name: f"{name} must be a date as YYYY-MM-DD, not {raw!r}."}) from exc


def date_range_params(params, *, default_start: dt.date, default_end: dt.date, max_days: int = 366):
    start = date_param(params, "start", default=default_start)
    end = date_param(params, "end", default=default_end)
    if end < start:
        raise ValidationError({"end": "end must not be before start."})
    if (end - start).days >= max_days:
        raise ValidationError({"end": f"the range may span at most {max_days} days."})
    return start, end


def int_param(params, name: str, *, default: int, low: int, high: int) -> int:
    raw = params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ValidationError({name: f"{name} must be an integer, not {raw!r}."}) from exc
    if not low <= value <= high:
        raise ValidationError({name: f"{name} must be between {low} and {high}."})
    return value


def choice_param(params, name: str, *, choices, default: str | None = None) -> str:
    raw = params.get(name) or default
    if raw not in choices:
        raise ValidationError({name: f"{name} must be one of {', '.join(map(str, choices))}, not {raw!r}."})
    return raw


def datetime_param(params, name: str, *, default: dt.datetime) -> dt.datetime:
    """An ISO-8601 date or datetime; without an offset it is business time."""
    raw = params.get(name)
    if raw in (None, ""):
        return default
    try:
        moment = dt.datetime.fromisoformat(raw)
    except ValueError as exc:
        raise ValidationError({name: f"{name} must be an ISO-8601 date or datetime, not {raw!r}."}) from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=business_tz())
