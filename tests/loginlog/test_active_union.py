"""Active users over long ranges: the union of the range's day bitmaps, however many days and wherever they live.

Redis ORs many bitmaps in steps (at most sixteen at a time); these tests write logins day by day and check the
answer against the users written, over ranges of more days than one step takes, with empty days, bitmaps of
very different lengths, days that expired to MySQL, and a login that lands after a first answer.
"""

import datetime as dt

import numpy as np
import pytest

from loginlog import keys
from loginlog.selectors import active_page, active_user_count, active_user_ids
from loginlog.services import login_record, sync_logins
from tests.factories import at

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine("2026-11-21T13:00:00+08:00", tick=False)]

D = dt.date
NOW = at("2026-11-21 13:00")


def ids(*, start: dt.date, end: dt.date) -> list[int]:
    found = active_user_ids(user_type="client", start=start, end=end)
    assert found.dtype == np.int64
    return found.tolist()


def user_of(day: dt.date) -> int:
    """The user who logs in on ``day``: every third day a low id (a bitmap of a few bytes), else an id up to
    9.7 million (a bitmap up to 1.2 MB long)."""
    if day.toordinal() % 3 == 0:
        return day.toordinal() % 800
    return (day.toordinal() * 7919) % 9_700_000


def record_days(first: dt.date, last: dt.date, *, every_fifth_empty: bool = True) -> dict[dt.date, set[int]]:
    """A login a day from ``first`` to ``last`` (optionally none every fifth day); return who logged in when."""
    logins: dict[dt.date, set[int]] = {}
    day = first
    while day <= last:
        if not (every_fifth_empty and day.toordinal() % 5 == 0):
            logins[day] = {user_of(day)}
            login_record(user_type="client", user_id=user_of(day), day=day)
        day += dt.timedelta(days=1)
    return logins


def day_keys(redis_client, day_stamp: str) -> int:
    """How many blocks of client ids hold a bitmap of the day."""
    blocks = range(10_000_000 // keys.BLOCK_IDS + 1)
    return redis_client.exists(*(keys.login_day(keys.Block("client", n), day_stamp) for n in blocks))


def users_between(logins: dict[dt.date, set[int]], start: dt.date, end: dt.date) -> list[int]:
    return sorted(set().union(*(users for day, users in logins.items() if start <= day <= end)))


# 16 and 17 days without a gap: the most one BITOP takes, and one more.
@pytest.mark.parametrize(("span", "gaps"), [(1, False), (16, False), (17, False), (40, True), (300, True)])
def test_a_range_of_many_days_is_the_union_of_its_days(span, gaps, redis_client, redis_prefix):
    end = D(2026, 11, 20)
    start = end - dt.timedelta(days=span - 1)
    # A day either side of the range, with users of their own that must not show.
    logins = record_days(start - dt.timedelta(days=1), end + dt.timedelta(days=1), every_fifth_empty=gaps)
    outside = {user_of(start - dt.timedelta(days=1)), user_of(end + dt.timedelta(days=1))}
    expected = users_between(logins, start, end)
    assert expected and not outside & set(expected)

    assert ids(start=start, end=end) == expected
    assert active_user_count(user_type="client", start=start, end=end) == len(expected)
    middle = len(expected) // 2
    assert active_page(user_types=["client"], start=start, end=end, offset=middle, limit=3) == (
        len(expected),
        [("client", u) for u in expected[middle : middle + 3]],
    )
    # Every step of the union is deleted with the answer, in every block: nothing of it stays in Redis.
    assert list(redis_client.scan_iter(match=f"{{{redis_prefix}:login:*}}:tmp:*")) == []


def test_a_range_over_expired_and_kept_days_is_the_union_of_both(redis_client):
    logins = record_days(D(2026, 7, 25), D(2026, 11, 21))
    sync_logins(now=NOW)  # the retention keeps 62 days: July and August move to MySQL only
    assert day_keys(redis_client, "20260810") == 0
    assert day_keys(redis_client, "20260920") == 1

    start, end = D(2026, 8, 3), D(2026, 11, 21)
    expected = users_between(logins, start, end)
    assert ids(start=start, end=end) == expected
    assert active_user_count(user_type="client", start=start, end=end) == len(expected)
    assert ids(start=D(2026, 8, 3), end=D(2026, 8, 31)) == users_between(
        logins, D(2026, 8, 3), D(2026, 8, 31)
    )


def test_a_login_that_lands_after_an_answer_shows_in_the_next_one():
    logins = record_days(D(2026, 10, 1), D(2026, 11, 21))
    start, end = D(2026, 10, 5), D(2026, 11, 21)
    before = ids(start=start, end=end)
    assert before == users_between(logins, start, end)
    # A late login on a day long past, one on a day that had none, and one today.
    empty_day = next(
        start + dt.timedelta(days=n) for n in range(10) if start + dt.timedelta(days=n) not in logins
    )
    late = [(D(2026, 10, 6), 4_321_000), (empty_day, 123_457), (D(2026, 11, 21), 9_999_999)]
    assert not {user_id for _, user_id in late} & set(before)
    for day, user_id in late:
        login_record(user_type="client", user_id=user_id, day=day)
    assert ids(start=start, end=end) == sorted({*before, *(user_id for _, user_id in late)})
    assert active_user_count(user_type="client", start=start, end=end) == len(before) + 3
