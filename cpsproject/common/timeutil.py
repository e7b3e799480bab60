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


def months_touched(start: dt.date, end: dt.date) -> list[dt.date]:
    """First days of the months ``start..end`` touches, in order."""
    months, month = [], start.replace(day=1)
    while month <= end:
        months.append(month)
        month = (month + dt.timedelta(days=32)).replace(day=1)
    return months


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


class BatchClock:
    """Business-time arithmetic on epoch seconds for one batch of events, with the zone consulted rarely.

    A batch holds thousands of timestamps in a few minutes or days; converting each to a zoned datetime costs
    more than everything else the counters do. The zone's offset is looked up once per quarter hour of epoch
    time, and cached only when the quarter starts and ends with the same offset, so a quarter that holds a
    DST change (or any other offset change) is computed per moment and stays exact.
    """

    QUARTER = 900

    def __init__(self) -> None:
        self._zone = business_tz()
        self._offsets: dict[int, int | None] = {}
        self._minute_stamps: dict[int, str] = {}
        self._day_stamps: dict[int, str] = {}
        self._days: dict[int, dt.date] = {}

    def _offset_at(self, seconds: int) -> int:
        return int(dt.datetime.fromtimestamp(seconds, tz=self._zone).utcoffset().total_seconds())

    def offset(self, seconds: int) -> int:
        """Seconds the business time zone is ahead of UTC at epoch ``seconds``."""
        quarter = seconds // self.QUARTER
        try:
            cached = self._offsets[quarter]
        except KeyError:
            start = quarter * self.QUARTER
            first, last = self._offset_at(start), self._offset_at(start + self.QUARTER - 1)
            cached = self._offsets[quarter] = first if first == last else None
        return self._offset_at(seconds) if cached is None else cached

    def floor(self, seconds: int, period: int) -> int:
        """Epoch start of the local ``period`` holding ``seconds`` (as ``floor_local``)."""
        return floor_epoch(seconds, period, self.offset(seconds))

    def stamp_minute(self, seconds: int) -> str:
        """``yyyyMMddHHmm`` of epoch ``seconds`` in business time (as ``stamp_minute``)."""
        try:
            return self._minute_stamps[seconds]
        except KeyError:
            wall = dt.datetime.fromtimestamp(seconds + self.offset(seconds), tz=UTC)
            stamp = self._minute_stamps[seconds] = wall.strftime("%Y%m%d%H%M")
            return stamp

    def day(self, seconds: int) -> dt.date:
        """The business day holding epoch ``seconds`` (as ``local_day``)."""
        wall_day = (seconds + self.offset(seconds)) // 86400
        try:
            return self._days[wall_day]
        except KeyError:
            day = self._days[wall_day] = dt.date.fromordinal(wall_day + 719163)
            return day

    def day_stamp(self, seconds: int) -> str:
        """``yyyyMMdd`` of the business day holding epoch ``seconds`` (as ``stamp_day(local_day(...))``)."""
        wall_day = (seconds + self.offset(seconds)) // 86400
        try:
            return self._day_stamps[wall_day]
        except KeyError:
            stamp = self._day_stamps[wall_day] = dt.date.fromordinal(wall_day + 719163).strftime("%Y%m%d")
            return stamp
