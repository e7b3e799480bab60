"""Pure time maths in the business time zone (``settings.TIME_ZONE``): buckets, days, slots."""

import datetime as dt
from collections.abc import Callable
from zoneinfo import ZoneInfo

from django.conf import settings

UTC = dt.UTC


def business_tz() -> ZoneInfo:
    return ZoneInfo(settings.TIME_ZONE)


def to_local(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone(business_tz())


def _offset_seconds(aware: dt.datetime) -> int:
    offset = aware.utcoffset()
    if offset is None:  # only a naive moment has none, and ``astimezone`` never returns one
        raise ValueError(f"{aware} has no time zone")
    return int(offset.total_seconds())


def local_offset(moment: dt.datetime) -> int:
    """Seconds the business time zone is ahead of UTC at ``moment``."""
    return _offset_seconds(to_local(moment))


def period_start(seconds: int, period: int, offset_at: Callable[[int], int]) -> int:
    """Epoch start of the local ``period`` holding epoch ``seconds``; ``offset_at`` gives the zone's offset.

    Periods are counted in local wall-clock seconds since 1970, so 5-minute, hourly and daily periods start on
    local boundaries (a daily period at local midnight) and longer ones (5 h) tile time without gaps. A period
    that holds a change of offset began when the wall clock read its boundary under the offset of that time,
    not this moment's: a DST day is 23 or 25 hours long and every moment of it has the same start. (At most
    one change of offset is assumed within a period and the lateness before it.)
    """
    offset = offset_at(seconds)
    wall = seconds + offset
    boundary = wall - wall % period
    start = boundary - offset
    before = offset_at(start)
    if before == offset:
        return start
    # The offset changed since the boundary's reading under this moment's offset: read it under the old one.
    start = boundary - before
    if start <= seconds and offset_at(start) == before:
        return start
    # The clock jumped over the boundary (spring forward past it): the period began at the jump.
    not_yet, already = boundary - offset, seconds
    while already - not_yet > 1:
        middle = (not_yet + already) // 2
        if offset_at(middle) == offset:
            already = middle
        else:
            not_yet = middle
    return already


def next_period_start(start: int, period: int, offset_at: Callable[[int], int]) -> int:
    """Epoch start of the local ``period`` after the one starting at ``start`` (see ``period_start``)."""
    # A period over a change of offset is longer than ``period`` by the change: look that much further.
    for slack in (0, 1800, 3600, 7200):
        following = period_start(start + period + slack, period, offset_at)
        if following > start:
            return following
    return start + period


def _zone_offset_at(seconds: int) -> int:
    return local_offset(from_epoch(seconds))


def floor_local(moment: dt.datetime, seconds: int) -> dt.datetime:
    """Return the start of the ``seconds``-long local period holding ``moment`` (see ``period_start``)."""
    start = period_start(int(moment.timestamp()), seconds, _zone_offset_at)
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
        return _offset_seconds(dt.datetime.fromtimestamp(seconds, tz=self._zone))

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
        return period_start(seconds, period, self.offset)

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
