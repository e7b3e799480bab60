import datetime as dt

import pytest

from cpsproject.common.timeutil import floor_local, local_day, stamp_minute
from stats.counters.pageviews import bucket_start
from tests.factories import SHANGHAI, at

UTC = dt.UTC


@pytest.mark.parametrize(
    ("moment", "bucket"),
    [
        (at("2026-11-21 01:00:00"), "202611210100"),
        (at("2026-11-21 01:04:59"), "202611210100"),
        (at("2026-11-21 01:05:00"), "202611210105"),
        (at("2026-11-21 23:59:59"), "202611212355"),
        (dt.datetime(2026, 11, 20, 16, 0, tzinfo=UTC), "202611210000"),  # UTC 16:00 is Shanghai midnight
    ],
)
def test_bucket_of_a_timestamp_is_in_business_time(moment, bucket):
    assert stamp_minute(bucket_start(moment)) == bucket


def test_shanghai_midnight_splits_days_that_share_a_utc_date():
    before, after = at("2026-11-21 23:59:59"), at("2026-11-22 00:00:00")
    assert before.astimezone(UTC).date() == after.astimezone(UTC).date()
    assert (local_day(before), local_day(after)) == (dt.date(2026, 11, 21), dt.date(2026, 11, 22))


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
