"""Pure time maths in the business time zone (``settings.TIME_ZONE``): buckets, days, slots."""

import datetime as dt
from zoneinfo import ZoneInfo

from django.conf import settings

UTC = dt.UTC


def business_tz() -> ZoneInfo:
    return ZoneInfo(settings.TIME_ZONE)


def to_local(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone(business_tz())


def local_offset(moment: dt.datetime) -> int:
    """Seconds the business time zone is ahead of UTC at ``moment``."""
    return int(to_local(moment).utcoffset().total_seconds())


def floor_epoch(seconds: int, period: int, offset: int) -> int:
    """Epoch start of the ``period`` holding epoch ``seconds``, periods counted in wall-clock time ``offset``."""
    wall = seconds + offset
    return wall - wall % period - offset


def floor_local(moment: dt.datetime, seconds: int) -> dt.datetime:
    """Return the start of the ``seconds``-long period holding ``moment``.

    Periods are counted in local wall-clock seconds, so 5-minute, hourly and daily periods start on local
    boundaries (a daily period starts at local midnight) and longer ones (5 h) tile time without gaps.
    """
    start = floor_epoch(int(moment.timestamp()), seconds, local_offset(moment))
    return from_epoch(start).astimezone(business_tz())


def local_day(moment: dt.datetime) -> dt.date:
    return to_local(moment).date()


def day_bounds(day: dt.date) -> tuple[dt.datetime, dt.datetime]:
    """Return [start, end) of a business day as aware datetimes."""
    start = dt.datetime.combine(day, dt.time(), tzinfo=business_tz())
    end = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=business_tz())
    return start, end


def stamp_minute(moment: dt.datetime) -> str:
    """``yyyyMMddHHmm`` of ``moment`` in business time: bucket key suffix and index score."""
    return to_local(moment).strftime("%Y%m%d%H%M")


def stamp_day(day: dt.date) -> str:
    return day.strftime("%Y%m%d")


def stamp_month(day: dt.date) -> str:
    return day.strftime("%Y%m")


def parse_stamp_month(stamp: str) -> dt.date:
    """First day of the ``yyyyMM`` month."""
    return dt.date(int(stamp[:4]), int(stamp[4:6]), 1)


def parse_stamp_minute(stamp: str) -> dt.datetime:
    return dt.datetime.strptime(stamp, "%Y%m%d%H%M").replace(tzinfo=business_tz())


def parse_stamp_day(stamp: str) -> dt.date:
    return dt.datetime.strptime(stamp, "%Y%m%d").date()


def epoch(moment: dt.datetime) -> int:
    return int(moment.timestamp())


def from_epoch(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=UTC)
