"""Business time (cpsproject.common.timeutil), as stats uses it: days, periods and stamps in Shanghai time."""

import datetime as dt

import pytest

from cpsproject.common.timeutil import (
    BatchClock,
    day_bounds,
    floor_local,
    local_day,
    next_period_start,
    stamp_day,
)
from tests.factories import SHANGHAI, at

UTC = dt.UTC


def test_shanghai_midnight_splits_days_that_share_a_utc_date():
    before, after = at("2026-11-21 23:59:59"), at("2026-11-22 00:00:00")
    assert before.astimezone(UTC).date() == after.astimezone(UTC).date()
    assert (local_day(before), local_day(after)) == (dt.date(2026, 11, 21), dt.date(2026, 11, 22))


@pytest.mark.parametrize(
    ("utc_moment", "day"),
    [
        (dt.datetime(2026, 12, 31, 15, 59, 59, tzinfo=UTC), dt.date(2026, 12, 31)),
        (dt.datetime(2026, 12, 31, 16, 0, tzinfo=UTC), dt.date(2027, 1, 1)),
        (dt.datetime(2027, 2, 28, 16, 0, tzinfo=UTC), dt.date(2027, 3, 1)),
        (dt.datetime(2026, 11, 30, 16, 0, tzinfo=UTC), dt.date(2026, 12, 1)),
    ],
)
def test_the_business_day_turns_at_shanghai_midnight_at_the_calendar_edges(utc_moment, day):
    assert local_day(utc_moment) == day


@pytest.mark.parametrize(
    ("day", "start", "end"),
    [
        (dt.date(2026, 12, 31), "2026-12-31 00:00", "2027-01-01 00:00"),
        (dt.date(2027, 2, 28), "2027-02-28 00:00", "2027-03-01 00:00"),
        (dt.date(2026, 11, 30), "2026-11-30 00:00", "2026-12-01 00:00"),
    ],
)
def test_day_bounds_are_shanghai_midnights(day, start, end):
    assert day_bounds(day) == (at(start), at(end))
    assert day_bounds(day)[1] - day_bounds(day)[0] == dt.timedelta(days=1)
    assert stamp_day(day) == start[:10].replace("-", "")


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (1, "2026-11-21 13:47:31"),
        (60, "2026-11-21 13:47:00"),
        (3600, "2026-11-21 13:00:00"),
        (18000, "2026-11-21 13:00:00"),  # 5 h periods tile wall-clock time from the epoch
        (86400, "2026-11-21 00:00:00"),
    ],
)
def test_floor_local_aligns_to_local_wall_clock(seconds, expected):
    assert floor_local(at("2026-11-21 13:47:31.250"), seconds) == at(expected).astimezone(SHANGHAI)


# New York: clocks go 01:59:59 EST (-5) -> 03:00 EDT (-4) on 2026-03-08 and 01:59:59 EDT -> 01:00 EST on
# 2026-11-01. Kolkata (+5:30) and Kathmandu (+5:45) have quarter-hour offsets.
@pytest.mark.parametrize(
    ("zone", "utc_moment", "bucket_stamp", "hour_start_utc", "day_stamp"),
    [
        ("America/New_York", "2026-03-08T06:59:59", "202603080155", "2026-03-08T06:00:00", "20260308"),
        ("America/New_York", "2026-03-08T07:00:00", "202603080300", "2026-03-08T07:00:00", "20260308"),
        ("America/New_York", "2026-11-01T05:59:59", "202611010155", "2026-11-01T05:00:00", "20261101"),
        ("America/New_York", "2026-11-01T06:00:00", "202611010100", "2026-11-01T06:00:00", "20261101"),
        ("America/New_York", "2026-11-01T04:30:00", "202611010030", "2026-11-01T04:00:00", "20261101"),
        ("Asia/Kolkata", "2026-12-31T18:29:59", "202612312355", "2026-12-31T17:30:00", "20261231"),
        ("Asia/Kolkata", "2026-12-31T18:30:00", "202701010000", "2026-12-31T18:30:00", "20270101"),
        ("Asia/Kathmandu", "2027-01-01T00:14:00", "202701010555", "2026-12-31T23:15:00", "20270101"),
        ("Asia/Shanghai", "2027-02-28T16:00:00", "202703010000", "2027-02-28T16:00:00", "20270301"),
    ],
)
def test_batch_clock_agrees_with_the_zone_across_offset_changes(
    settings, zone, utc_moment, bucket_stamp, hour_start_utc, day_stamp
):
    settings.TIME_ZONE = zone
    seconds = int(dt.datetime.fromisoformat(utc_moment).replace(tzinfo=UTC).timestamp())
    clock = BatchClock()
    bucket = clock.floor(seconds, 300)
    assert clock.stamp_minute(bucket) == bucket_stamp
    assert clock.floor(seconds, 3600) == int(dt.datetime.fromisoformat(hour_start_utc + "+00:00").timestamp())
    assert clock.day_stamp(seconds) == day_stamp
    # the same answers as the zoned-datetime functions the read side uses
    moment = dt.datetime.fromtimestamp(seconds, tz=UTC)
    assert clock.floor(seconds, 300) == int(floor_local(moment, 300).timestamp())
    assert clock.day_stamp(seconds) == stamp_day(local_day(moment))


# (zone, precision, moment UTC, start of its local period UTC, start of the next period UTC), from the calendars:
# New York springs forward 02:00 EST -> 03:00 EDT at 07:00Z on 2026-03-08, so 2-hour periods have no 02:00 and
# one begins at the jump; Lord Howe (+10:30 / +11, a half-hour change) falls back 02:00 -> 01:30 at 15:00Z on
# 2026-04-04 (its 01:00 hour lasts 90 minutes) and springs forward 02:00 -> 02:30 at 15:30Z on 2026-10-03.
@pytest.mark.parametrize(
    ("zone", "precision", "moment", "start", "following"),
    [
        ("America/New_York", 7200, "2026-03-08T06:59:59", "2026-03-08T05:00:00", "2026-03-08T07:00:00"),
        ("America/New_York", 7200, "2026-03-08T07:00:00", "2026-03-08T07:00:00", "2026-03-08T08:00:00"),
        ("America/New_York", 7200, "2026-03-08T07:59:59", "2026-03-08T07:00:00", "2026-03-08T08:00:00"),
        ("America/New_York", 86400, "2026-11-01T23:00:00", "2026-11-01T04:00:00", "2026-11-02T05:00:00"),
        ("America/New_York", 86400, "2026-03-08T23:00:00", "2026-03-08T05:00:00", "2026-03-09T04:00:00"),
        ("Australia/Lord_Howe", 3600, "2026-04-04T14:59:59", "2026-04-04T14:00:00", "2026-04-04T15:30:00"),
        ("Australia/Lord_Howe", 3600, "2026-04-04T15:29:59", "2026-04-04T14:00:00", "2026-04-04T15:30:00"),
        ("Australia/Lord_Howe", 3600, "2026-04-04T15:30:00", "2026-04-04T15:30:00", "2026-04-04T16:30:00"),
        ("Australia/Lord_Howe", 3600, "2026-10-03T15:29:59", "2026-10-03T14:30:00", "2026-10-03T15:30:00"),
        ("Australia/Lord_Howe", 3600, "2026-10-03T15:45:00", "2026-10-03T15:30:00", "2026-10-03T16:00:00"),
        ("Asia/Shanghai", 300, "2026-11-21T05:47:31", "2026-11-21T05:45:00", "2026-11-21T05:50:00"),
    ],
)
def test_a_local_period_over_a_change_of_offset_starts_once_and_lasts_until_the_next(
    settings, zone, precision, moment, start, following
):
    settings.TIME_ZONE = zone

    def seconds(text: str) -> int:
        return int(dt.datetime.fromisoformat(text + "+00:00").timestamp())

    clock = BatchClock()
    assert clock.floor(seconds(moment), precision) == seconds(start)
    assert next_period_start(seconds(start), precision, clock.offset) == seconds(following)
    # the zoned-datetime function the read side uses agrees
    assert floor_local(dt.datetime.fromtimestamp(seconds(moment), tz=UTC), precision).timestamp() == seconds(
        start
    )
