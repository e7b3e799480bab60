"""Business time (cpsproject.common.timeutil), as stats uses it: days, periods and stamps in Shanghai time."""

import datetime as dt

import pytest

from cpsproject.common.timeutil import day_bounds, floor_local, local_day, stamp_day
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
