"""The seven login queries of the fourth design document, plus DAU/WAU/MAU.

Redis is read first; a month (per user) or a day (per population) that Redis no longer holds comes from
``LoginMonth``. Range edges are exact: every answer is masked to the days from ``start`` to ``end`` inclusive.
"""

import calendar
import datetime as dt
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.db.models import F
from django.utils import timezone
from django_redis import get_redis_connection

from loginlog.models import LoginMonth
from loginlog.bitmaps import month_bits_to_mask, set_bits
from loginlog.validation import user_types
from cpsproject.common import redis_keys
from loginlog import keys
from cpsproject.common.timeutil import local_day, stamp_day, stamp_month


def _months(start: dt.date, end: dt.date) -> list[dt.date]:
    months, current = [], start.replace(day=1)
    while current <= end:
        months.append(current)
        current = (current + dt.timedelta(days=32)).replace(day=1)
    return months


def _range_mask(month: dt.date, start: dt.date, end: dt.date) -> int:
    """Bits (d-1) for the days of ``month`` that fall within [start, end]."""
    last = calendar.monthrange(month.year, month.month)[1]
    first_day = start.day if (start.year, start.month) == (month.year, month.month) else 1
    last_day = end.day if (end.year, end.month) == (month.year, month.month) else last
    return sum(1 << (d - 1) for d in range(first_day, last_day + 1))


def login_days(*, user_type: str, user_id: int, start: dt.date, end: dt.date) -> list[dt.date]:
    """Query 5: the days from ``start`` to ``end`` the user logged in."""
    months = _months(start, end)
    client = get_redis_connection("default")
    pipe = client.pipeline(transaction=False)
    for month in months:
        pipe.get(keys.login_month(user_type, user_id, stamp_month(month)))
    masks = {
        month: month_bits_to_mask(bitmap)
        for month, bitmap in zip(months, pipe.execute(), strict=True)
        if bitmap
    }
    missing = [m for m in months if m not in masks]
    if missing:
        rows = LoginMonth.objects.filter(user_type=user_type, user_id=user_id, month__in=missing)
        masks.update(dict(rows.values_list("month", "days")))
    days = []
    for month in months:
        mask = masks.get(month, 0) & _range_mask(month, start, end)
        days.extend(month.replace(day=d) for d in range(1, 32) if mask >> (d - 1) & 1)
    return days


def logged_in_between(*, user_type: str, user_id: int, start: dt.date, end: dt.date) -> bool:
    """Query 4: did the user log in at all from ``start`` to ``end``."""
    return bool(login_days(user_type=user_type, user_id=user_id, start=start, end=end))


def logged_in_on(*, user_type: str, user_id: int, day: dt.date) -> bool:
    """Query 2: did the user log in on ``day``."""
    return logged_in_between(user_type=user_type, user_id=user_id, start=day, end=day)


def logged_in_in_month(*, user_type: str, user_id: int, year: int, month: int) -> bool:
    """Query 3: did the user log in during the month."""
    first = dt.date(year, month, 1)
    last = first.replace(day=calendar.monthrange(year, month)[1])
    return logged_in_between(user_type=user_type, user_id=user_id, start=first, end=last)


def retention_cutoff(today: dt.date | None = None) -> dt.date:
    """The oldest day whose login keys the weekly sync keeps in Redis."""
    days = max(31, int(settings.CPS_LOGINS["RETENTION_DAYS"]))
    return (today or local_day(timezone.now())) - dt.timedelta(days=days)


@dataclass(frozen=True)
class ActiveUsers:
    """Users active over a range: the OR of the Redis day bitmaps, plus ids from MySQL for expired days."""

    bitmap: bytes
    from_sql: set[int]

    def ids(self) -> list[int]:
        return sorted(set(set_bits(self.bitmap)) | self.from_sql)

    def count(self) -> int:
        if not self.from_sql:
            return int.from_bytes(self.bitmap, "big").bit_count()
        return len(set(set_bits(self.bitmap)) | self.from_sql)


def _active(*, user_type: str, start: dt.date, end: dt.date) -> ActiveUsers:
    """One round trip: which day bitmaps exist, and their BITOP OR (a missing key ORs as zeros)."""
    days = [start + dt.timedelta(days=n) for n in range((end - start).days + 1)]
    day_keys = [keys.login_day(user_type, stamp_day(d)) for d in days]
    scratch = redis_keys.scratch(uuid.uuid4().hex)
    pipe = get_redis_connection("default").pipeline(transaction=True)
    for key in day_keys:
        pipe.exists(key)
    pipe.bitop("OR", scratch, *day_keys)
    pipe.get(scratch)
    pipe.delete(scratch)
    replies = pipe.execute()
    present, bitmap = replies[: len(days)], replies[-2] or b""
    cutoff = retention_cutoff()
    expired = [d for d, exists in zip(days, present, strict=True) if not exists and d < cutoff]
    return ActiveUsers(bitmap, _ids_from_sql(user_type=user_type, days=expired) if expired else set())


def active_user_ids(*, user_type: str, start: dt.date, end: dt.date) -> list[int]:
    """Query 6: the ids of users of ``user_type`` who logged in from ``start`` to ``end``, ascending.

    One BITOP OR over the day bitmaps Redis holds; days whose bitmap has expired come from ``LoginMonth``.
    """
    return _active(user_type=user_type, start=start, end=end).ids()


def active_user_count(*, user_type: str, start: dt.date, end: dt.date) -> int:
    """How many users of ``user_type`` logged in from ``start`` to ``end``, without listing them."""
    return _active(user_type=user_type, start=start, end=end).count()


def _ids_from_sql(*, user_type: str, days: list[dt.date]) -> set[int]:
    masks: dict[dt.date, int] = {}
    for day in days:
        month = day.replace(day=1)
        masks[month] = masks.get(month, 0) | 1 << (day.day - 1)
    ids: set[int] = set()
    for month, mask in masks.items():
        rows = LoginMonth.objects.filter(user_type=user_type, month=month).annotate(
            hit=F("days").bitand(mask)
        )
        ids.update(rows.filter(hit__gt=0).values_list("user_id", flat=True))
    return ids


def active_users(*, start: dt.date, end: dt.date) -> list[tuple[str, int]]:
    """Query 7: every user of every type who logged in from ``start`` to ``end``."""
    return [(t, uid) for t in user_types() for uid in active_user_ids(user_type=t, start=start, end=end)]


def active_counts(*, user_type: str, day: dt.date) -> dict[str, int]:
    """DAU, WAU and MAU of ``user_type`` for the day, week and 30 days ending on ``day``."""
    return {
        name: active_user_count(user_type=user_type, start=day - dt.timedelta(days=span - 1), end=day)
        for name, span in (("dau", 1), ("wau", 7), ("mau", 30))
    }
