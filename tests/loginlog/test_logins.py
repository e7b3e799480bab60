"""Login bitmaps: the seven queries from Redis, from MySQL after expiry, across month/year/February edges."""

import datetime as dt
import random

import pytest
from django.contrib.auth.models import Permission
from django_redis import get_redis_connection
from rest_framework.test import APIClient

from loginlog import keys
from loginlog.bitmaps import queue_login
from loginlog.models import LoginMonth
from loginlog.selectors import (
    active_counts,
    active_page,
    active_user_count,
    active_user_ids,
    active_users,
    logged_in_between,
    logged_in_in_month,
    logged_in_on,
    login_days,
)
from loginlog.services import login_record, months_to_sync, sync_logins
from stats.models import DeadLetter
from tests.factories import at, create_staff, feed, login_event

pytestmark = pytest.mark.django_db

D = dt.date
# Logins around a month boundary, a year boundary and the end of February (2024 is a leap year).
LOGINS = [
    ("client", 1001, D(2025, 10, 29)),
    ("client", 1001, D(2025, 10, 31)),
    ("client", 1001, D(2025, 11, 2)),
    ("client", 1001, D(2025, 11, 3)),
    ("client", 1002, D(2025, 10, 30)),
    ("office", 7, D(2025, 11, 1)),
    ("client", 1001, D(2025, 12, 31)),
    ("client", 1003, D(2026, 1, 1)),
    ("client", 1001, D(2024, 2, 28)),
    ("client", 1001, D(2024, 2, 29)),
    ("client", 1001, D(2024, 3, 1)),
    ("client", 1004, D(2025, 2, 28)),
    ("client", 1004, D(2025, 3, 1)),
]


def answers() -> dict:
    """Every query the document lists, over the tricky ranges."""
    return {
        "days_oct30_nov2": login_days(
            user_type="client", user_id=1001, start=D(2025, 10, 30), end=D(2025, 11, 2)
        ),
        "days_year_edge": login_days(
            user_type="client", user_id=1001, start=D(2025, 12, 30), end=D(2026, 1, 2)
        ),
        "days_leap_feb": login_days(
            user_type="client", user_id=1001, start=D(2024, 2, 28), end=D(2024, 3, 1)
        ),
        "on_day": logged_in_on(user_type="client", user_id=1001, day=D(2025, 10, 31)),
        "not_on_day": logged_in_on(user_type="client", user_id=1001, day=D(2025, 10, 30)),
        "in_month": logged_in_in_month(user_type="office", user_id=7, year=2025, month=11),
        "not_in_month": logged_in_in_month(user_type="office", user_id=7, year=2025, month=10),
        "between_edge_excluded": logged_in_between(
            user_type="client", user_id=1001, start=D(2025, 11, 4), end=D(2025, 12, 30)
        ),
        "active_client_oct30_nov2": active_user_ids(
            user_type="client", start=D(2025, 10, 30), end=D(2025, 11, 2)
        ).tolist(),
        "active_client_year_edge": active_user_ids(
            user_type="client", start=D(2025, 12, 31), end=D(2026, 1, 1)
        ).tolist(),
        "active_feb_2025": active_user_ids(
            user_type="client", start=D(2025, 2, 27), end=D(2025, 2, 28)
        ).tolist(),
        "active_all": active_users(start=D(2025, 10, 30), end=D(2025, 11, 2)),
        "counts": active_counts(user_type="client", day=D(2025, 11, 2)),
    }


EXPECTED = {
    "days_oct30_nov2": [D(2025, 10, 31), D(2025, 11, 2)],
    "days_year_edge": [D(2025, 12, 31)],
    "days_leap_feb": [D(2024, 2, 28), D(2024, 2, 29), D(2024, 3, 1)],
    "on_day": True,
    "not_on_day": False,
    "in_month": True,
    "not_in_month": False,
    "between_edge_excluded": False,
    "active_client_oct30_nov2": [1001, 1002],
    "active_client_year_edge": [1001, 1003],
    "active_feb_2025": [1004],
    "active_all": [("client", 1001), ("client", 1002), ("office", 7)],
    "counts": {"dau": 1, "wau": 2, "mau": 2},
}


def record_all() -> None:
    for user_type, user_id, day in LOGINS:
        login_record(user_type=user_type, user_id=user_id, day=day)


def test_every_query_answers_from_redis():
    record_all()
    assert answers() == EXPECTED
    assert LoginMonth.objects.count() == 0


def test_sync_then_expiry_loses_nothing(redis_client):
    record_all()
    before = answers()
    result = sync_logins(now=at("2026-11-22 03:00"))
    assert result.deleted_keys > 0
    assert redis_client.exists(keys.login_month("client", 1001, "202510")) == 0
    assert redis_client.exists(keys.login_day(keys.block_of("client", 1001), "20251030")) == 0
    assert LoginMonth.objects.get(user_type="client", user_id=1001, month=D(2025, 10, 1)).day_numbers() == [
        29,
        31,
    ]
    assert answers() == before == EXPECTED
    sync_logins(now=at("2026-11-22 03:00"))  # a re-run changes nothing
    assert answers() == EXPECTED


def test_sync_keeps_months_within_retention_and_follows_the_day_8_rule(redis_client):
    login_record(user_type="client", user_id=5, day=D(2026, 10, 20))
    login_record(user_type="client", user_id=5, day=D(2026, 11, 3))
    sync_logins(now=at("2026-11-05 03:00"))  # before the 8th: last month and this month
    assert sorted(LoginMonth.objects.values_list("month", "days")) == [
        (D(2026, 10, 1), 1 << 19),
        (D(2026, 11, 1), 1 << 2),
    ]
    assert redis_client.exists(keys.login_month("client", 5, "202610")) == 1
    assert months_to_sync(D(2026, 11, 8)) == [D(2026, 11, 1)]
    assert months_to_sync(D(2026, 1, 7)) == [D(2025, 12, 1), D(2026, 1, 1)]


def test_logins_through_the_consumer_dedupe_and_reject_bad_ones():
    now = at("2026-11-21 12:00")
    result = feed(
        [
            login_event(now, "client", 1001),
            login_event(now, "client", 1001),
            login_event(now, "office", "42"),
            login_event(now, "martian", 1),
            login_event(now, "client", -5),
            login_event(now, "client", "abc"),
        ],
        now=now,
    )
    assert result.counted == 3
    assert sorted(DeadLetter.objects.values_list("reason", flat=True)) == ["bad_field"] * 3
    assert active_user_ids(user_type="client", start=D(2026, 11, 21), end=D(2026, 11, 21)).tolist() == [1001]
    assert logged_in_on(user_type="office", user_id=42, day=D(2026, 11, 21))


def test_login_api():
    create_staff().user_permissions.add(Permission.objects.get(codename="add_loginmonth"))
    client = APIClient()
    client.login(username="staff", password="pw")
    created = client.post(
        "/api/v1/logins/", {"user_type": "client", "user_id": 1001, "date": "2025-10-31"}, format="json"
    )
    assert created.status_code == 201
    client.post(
        "/api/v1/logins/", {"user_type": "client", "user_id": 1002, "date": "2025-11-01"}, format="json"
    )
    bad = client.post("/api/v1/logins/", {"user_type": "client", "user_id": -1}, format="json")
    assert bad.status_code == 400 and "user_id" in bad.json()
    assert (
        "user_type" in client.post("/api/v1/logins/", {"user_type": "x", "user_id": 1}, format="json").json()
    )
    user = client.get("/api/v1/logins/client/1001/?start=2025-10-30&end=2025-11-02").json()
    assert user == {"logged_in": True, "days": ["2025-10-31"]}
    assert client.get("/api/v1/logins/client/1001/?month=2025-11").json() == {"logged_in": False, "days": []}
    page = client.get("/api/v1/logins/active/?user_type=client&start=2025-10-30&end=2025-11-02").json()
    assert page["count"] == 2 and page["results"] == [1001, 1002]
    assert "user_type" in client.get("/api/v1/logins/active/?user_type=robot").json()
    assert client.get("/api/v1/logins/counts/?user_type=client&date=2025-11-01").json()["wau"] == 2
    assert APIClient().get("/api/v1/logins/active/").status_code == 401


def test_active_ids_and_pages_over_a_large_sparse_id_space():
    """Ids up to 9 million: the bitmap is read in several chunks, and pages start deep inside it."""
    rng = random.Random(7)
    days = [D(2026, 11, 1), D(2026, 11, 2), D(2026, 11, 3)]
    users = sorted(rng.sample(range(9_000_000), 3000)) + [0, 9_000_001]
    pipe = get_redis_connection("default").pipeline(transaction=False)
    for user_id in users:
        queue_login(pipe, user_type="client", user_id=user_id, day=rng.choice(days))
    queue_login(pipe, user_type="client", user_id=5, day=D(2026, 11, 4))  # outside the range
    pipe.execute()
    expected = sorted(users)
    assert active_user_ids(user_type="client", start=days[0], end=days[-1]).tolist() == expected
    assert active_user_count(user_type="client", start=days[0], end=days[-1]) == 3002
    for offset in (0, 1, 1499, 2950, 3001, 3002):
        count, page = active_page(
            user_types=["client"], start=days[0], end=days[-1], offset=offset, limit=100
        )
        assert (count, page) == (3002, [("client", u) for u in expected[offset : offset + 100]])
