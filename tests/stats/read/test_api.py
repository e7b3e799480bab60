"""The stats API (stats.read.api) where partner portals and staff look: stats, buckets, rankings, series.

The API reads the clock (today's default range, which days may still have Redis keys, the ranking windows),
so every test here runs under a fixed clock, several at the edges of a year, a month and February.
"""

import datetime as dt

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from cpsproject.common.timeutil import local_day
from stats.jobs.flush import flush
from tests.factories import at, create_staff, create_tree, feed, portal_client, pv_event, staff_client

pytestmark = pytest.mark.django_db


def clock(moment: str, name: str, *values):
    """Parameters ``(*values, moment)`` of a test that runs with the clock stopped at ``moment``."""
    return pytest.param(
        *values,
        dt.datetime.fromisoformat(moment),
        marks=pytest.mark.time_machine(moment, tick=False),
        id=name,
    )


@pytest.mark.parametrize(
    "now",
    [
        clock("2026-11-21T12:03:00+08:00", "noon"),
        clock("2026-12-31T23:58:00+08:00", "year end"),
        clock("2027-02-28T23:58:00+08:00", "end of february"),
        clock("2026-11-30T23:58:00+08:00", "month end"),
    ],
)
def test_api_shows_unflushed_counts_without_double_counting_flushed_ones(now):
    create_tree()
    client = staff_client()
    assert timezone.now() == now
    today = local_day(now)
    feed([pv_event(now - dt.timedelta(minutes=1), "A1", "u1")], now=now)
    flush(now=now, include_open=True)  # written but kept: the bucket is open
    feed([pv_event(now - dt.timedelta(seconds=5), "A1", "u2")], now=now)
    body = client.get(f"/api/v1/partners/A/stats/?start={today - dt.timedelta(days=1)}&end={today}").json()
    assert body["total_pv"] == 2
    assert body["days"][-1]["uv"] == 2 and body["days"][-1]["reconciled"] is False
    assert [d["date"] for d in body["days"]] == [str(today - dt.timedelta(days=1)), str(today)]
    assert [(d["pv"], d["pv_self"], d["uv_self"]) for d in body["days"]] == [(0, 0, 0), (2, 0, 0)]
    buckets = client.get("/api/v1/partners/A1/buckets/").json()
    assert sum(b["pv"] for b in buckets) == 2 and len(buckets) == 288
    assert (
        buckets[0]["start"] == f"{today}T00:00:00+08:00" and buckets[-1]["start"] == f"{today}T23:55:00+08:00"
    )
    default = client.get("/api/v1/partners/A/stats/").json()["days"]
    assert len(default) == 7 and default[-1]["date"] == str(today) and default[-1]["pv"] == 2


def test_api_rejects_bad_parameters_naming_them():
    create_tree()
    client = staff_client()
    response = client.get("/api/v1/partners/A/stats/?start=yesterday")
    assert response.status_code == 400 and "start" in response.json()
    assert client.get("/api/v1/partners/A/stats/?start=2026-11-10&end=2026-11-01").status_code == 400
    assert "date" in client.get("/api/v1/partners/A/buckets/?date=2026-13-01").json()
    assert client.get("/api/v1/partners/NOPE/stats/").status_code == 404


# --- portal tokens see their partner's subtree, and nothing else -------------------------------------------

DAY = "2026-11-21"
HALF_PAST = at("2026-11-21 12:30")


def feed_half_past_noon() -> None:
    """A1a ×3 (u1 u2 u3), A1 ×2 (u1 u4), A2 ×1 (u5), B ×4 (u6 u7): nothing flushed."""
    create_tree()
    values = [pv_event(HALF_PAST, "A1a", u) for u in ("u1", "u2", "u3")]
    values += [pv_event(HALF_PAST, "A1", u) for u in ("u1", "u4")]
    values += [pv_event(HALF_PAST, "A2", "u5")]
    values += [pv_event(HALF_PAST, "B", u) for u in ("u6", "u7", "u6", "u7")]
    feed(values, now=HALF_PAST)


def day_numbers(client: APIClient, code: str) -> tuple[int, int, int, int, bool]:
    response = client.get(f"/api/v1/partners/{code}/stats/?start={DAY}&end={DAY}")
    assert response.status_code == 200, (code, response.content)
    body = response.json()
    (day,) = body["days"]
    assert body["partner"] == code and day["date"] == DAY and body["total_pv"] == day["pv"]
    return day["pv"], day["uv"], day["pv_self"], day["uv_self"], day["reconciled"]


def refused(client: APIClient, code: str) -> bool:
    """Whether every per-partner endpoint answers 404 for ``code``, as for a partner that does not exist."""
    statuses = {
        client.get(f"/api/v1/partners/{code}/stats/?start={DAY}&end={DAY}").status_code,
        client.get(f"/api/v1/partners/{code}/buckets/?date={DAY}").status_code,
        client.get(f"/api/v1/series/?precision=60&partner={code}").status_code,
        client.get(f"/api/v1/partners/{code}/").status_code,
    }
    return statuses == {404}


@pytest.mark.time_machine("2026-11-21T12:40:00+08:00", tick=False)
def test_a_portal_token_sees_its_subtree_on_stats_buckets_series_and_rankings():
    feed_half_past_noon()
    a1 = portal_client("A1")
    assert day_numbers(a1, "A1") == (5, 4, 2, 2, False)
    assert day_numbers(a1, "A1a") == (3, 3, 3, 3, False)
    assert all(refused(a1, code) for code in ["A", "A2", "B", "NOPE"])
    buckets = a1.get(f"/api/v1/partners/A1a/buckets/?date={DAY}").json()
    assert [b for b in buckets if b["pv"]] == [{"start": "2026-11-21T12:30:00+08:00", "pv": 3, "pv_self": 3}]
    assert a1.get(f"/api/v1/partners/A1/buckets/?date={DAY}").json()[150] == {
        "start": "2026-11-21T12:30:00+08:00",
        "pv": 5,
        "pv_self": 2,
    }
    series = a1.get("/api/v1/series/?precision=60&partner=A1&start=2026-11-21T12:29&end=2026-11-21T12:31")
    assert [(p["ts"][11:16], p["count"]) for p in series.json()] == [("12:29", 0), ("12:30", 5), ("12:31", 0)]
    site_wide = a1.get("/api/v1/series/?precision=60")
    assert site_wide.status_code == 400 and "partner" in site_wide.json()
    assert a1.get("/api/v1/rankings/partners/?window=1h").json() == [
        {"rank": 1, "partner": "A1", "pv": 5},
        {"rank": 2, "partner": "A1a", "pv": 3},
    ]
    assert a1.get("/api/v1/rankings/partners/?window=24h&scope=self").json() == [
        {"rank": 1, "partner": "A1a", "pv": 3},
        {"rank": 2, "partner": "A1", "pv": 2},
    ]

    # A top partner's token reaches its grandchildren; a leaf's token only itself.
    a = portal_client("A")
    assert [day_numbers(a, code)[0] for code in ["A", "A1", "A1a", "A2"]] == [6, 5, 3, 1]
    assert refused(a, "B")
    assert [(r["partner"], r["pv"]) for r in a.get("/api/v1/rankings/partners/?window=1h").json()] == [
        ("A", 6),
        ("A1", 5),
        ("A1a", 3),
        ("A2", 1),
    ]
    a1a = portal_client("A1a")
    assert day_numbers(a1a, "A1a") == (3, 3, 3, 3, False)
    assert refused(a1a, "A1") and refused(a1a, "A")
    assert a1a.get("/api/v1/rankings/partners/?window=7d").json() == [{"rank": 1, "partner": "A1a", "pv": 3}]

    # Staff see everyone.
    staff = staff_client()
    assert day_numbers(staff, "B") == (4, 2, 4, 2, False)
    assert [r["partner"] for r in staff.get("/api/v1/rankings/partners/?window=1h").json()] == [
        "A",
        "A1",
        "B",
        "A1a",
        "A2",
    ]


@pytest.mark.time_machine("2026-11-22T00:40:00+08:00", tick=False)
def test_a_day_shows_reconciled_true_with_exact_numbers_after_reconcile(capsys):
    create_tree()
    noon = at("2026-11-21 12:00")
    feed(
        [pv_event(noon, "B", "u1"), pv_event(noon, "B", "u2"), pv_event(noon, "B", "u1", event_id="twice")],
        now=noon,
    )
    feed([pv_event(noon, "B", "u1", event_id="twice")], now=noon)  # the client sent it twice
    feed([pv_event(at("2026-11-22 00:10"), "B", "u3")], now=at("2026-11-22 00:10"))
    flush()
    client = portal_client("B")
    url = "/api/v1/partners/B/stats/?start=2026-11-21&end=2026-11-22"

    def days() -> list[tuple]:
        return [(d["date"], d["pv"], d["uv"], d["reconciled"]) for d in client.get(url).json()["days"]]

    assert days() == [("2026-11-21", 4, 2, False), ("2026-11-22", 1, 1, False)]
    call_command("reconcile")  # yesterday by default
    assert "reconciled 2026-11-21" in capsys.readouterr().out
    assert days() == [("2026-11-21", 3, 2, True), ("2026-11-22", 1, 1, False)]
    assert client.get(url).json()["total_pv"] == 4
    feed([pv_event(noon, "B", "u9", event_id="late")], now=at("2026-11-22 00:40"))  # after the recount
    flush()
    assert days() == [("2026-11-21", 3, 2, True), ("2026-11-22", 1, 1, False)]  # a reconciled day is final


@pytest.mark.parametrize(
    ("day", "now"),
    [
        clock("2026-11-22T00:02:00+08:00", "ordinary day", dt.date(2026, 11, 21)),
        clock("2027-01-01T00:02:00+08:00", "year end", dt.date(2026, 12, 31)),
        clock("2027-03-01T00:02:00+08:00", "end of february", dt.date(2027, 2, 28)),
        clock("2026-12-01T00:02:00+08:00", "month end", dt.date(2026, 11, 30)),
    ],
)
def test_the_five_minute_buckets_of_a_day_sum_to_the_days_pv(day, now):
    create_tree()

    def moment(offset: dt.timedelta) -> dt.datetime:
        return at(f"{day} 00:00") + offset

    minute, second = dt.timedelta(minutes=1), dt.timedelta(seconds=1)
    feed([pv_event(moment(-second), "A1a", "u9")], now=moment(dt.timedelta(0)))  # the day before
    feed(
        [
            pv_event(moment(0 * minute), "A1a", "u1"),
            pv_event(moment(5 * minute - second), "A1a", "u2"),
            pv_event(moment(5 * minute), "A1a", "u1"),
            pv_event(moment(12 * 60 * minute), "A1", "u3"),
        ],
        now=moment(12 * 60 * minute),
    )
    flush(now=moment(12 * 60 * minute + 30 * minute))  # these are flushed and their keys deleted
    feed(
        [
            pv_event(moment(24 * 60 * minute - 5 * minute), "A1a", "u4"),
            pv_event(moment(24 * 60 * minute - second), "A1a", "u5"),
            pv_event(moment(24 * 60 * minute), "A1a", "u9"),  # the next day
        ],
        now=now,
    )  # these are still in Redis only
    client = staff_client()
    for code, pv, uv in [("A1a", 5, 4), ("A1", 6, 5), ("A", 6, 5)]:
        buckets = client.get(f"/api/v1/partners/{code}/buckets/?date={day}").json()
        assert len(buckets) == 288
        assert (buckets[0]["start"], buckets[-1]["start"]) == (
            f"{day}T00:00:00+08:00",
            f"{day}T23:55:00+08:00",
        )
        assert sum(b["pv"] for b in buckets) == pv, code
        stats = client.get(f"/api/v1/partners/{code}/stats/?start={day}&end={day}").json()
        assert (stats["days"][0]["pv"], stats["days"][0]["uv"], stats["total_pv"]) == (pv, uv, pv), code
    buckets = client.get(f"/api/v1/partners/A1a/buckets/?date={day}").json()
    assert {b["start"][11:16]: b["pv"] for b in buckets if b["pv"]} == {"00:00": 2, "00:05": 1, "23:55": 2}
    around = client.get(
        f"/api/v1/partners/A1a/stats/?start={day - dt.timedelta(days=1)}&end={day + dt.timedelta(days=1)}"
    ).json()
    assert [d["pv"] for d in around["days"]] == [1, 5, 1]


# --- rankings and series --------------------------------------------------------------------------------------


@pytest.mark.time_machine("2026-12-31T23:59:30+08:00", tick=True)
def test_rankings_api_scopes_portal_tokens_and_rejects_unknown_windows(capsys):
    create_tree()
    now = timezone.now()
    feed([pv_event(now, "B")] * 1 + [pv_event(now, "A1")] * 2 + [pv_event(now, "A2")] * 3, now=now)
    create_staff()
    staff = APIClient()
    staff.login(username="staff", password="pw")
    assert staff.get("/api/v1/rankings/partners/?window=1h&limit=2").json() == [
        {"rank": 1, "partner": "A", "pv": 5},
        {"rank": 2, "partner": "A2", "pv": 3},
    ]
    assert staff.get("/api/v1/rankings/partners/?window=1h&scope=self").json()[0] == {
        "rank": 1,
        "partner": "A2",
        "pv": 3,
    }
    bad = staff.get("/api/v1/rankings/partners/?window=2h")
    assert bad.status_code == 400 and "1h, 24h, 7d" in bad.json()["window"][0]
    call_command("portal_token", "A1")
    portal = APIClient()
    portal.credentials(HTTP_AUTHORIZATION="Token " + capsys.readouterr().out.split()[-1])
    assert portal.get("/api/v1/rankings/partners/?window=24h").json() == [
        {"rank": 1, "partner": "A1", "pv": 2}
    ]


def test_series_api_zero_fills_in_business_time_and_names_bad_parameters():
    create_tree()
    client = staff_client()
    feed([pv_event(at("2026-11-21 08:01:30"), "A1")], now=at("2026-11-21 08:05"))
    body = client.get(
        "/api/v1/series/?precision=60&partner=A&start=2026-11-21T08:00&end=2026-11-21T08:03"
    ).json()
    assert body == [
        {"ts": "2026-11-21T08:00:00+08:00", "count": 0},
        {"ts": "2026-11-21T08:01:00+08:00", "count": 1},
        {"ts": "2026-11-21T08:02:00+08:00", "count": 0},
        {"ts": "2026-11-21T08:03:00+08:00", "count": 0},
    ]
    assert "precision" in client.get("/api/v1/series/?precision=7").json()
    assert "start" in client.get("/api/v1/series/?precision=60&start=noon").json()
    assert client.get("/api/v1/series/?precision=60&partner=NOPE").status_code == 404


# --- whole days on series/, as on stats/ --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("day", "now"),
    [
        clock("2026-11-22T00:02:00+08:00", "ordinary day", dt.date(2026, 11, 21)),
        clock("2027-01-01T00:02:00+08:00", "year end", dt.date(2026, 12, 31)),
        clock("2027-03-01T00:02:00+08:00", "end of february", dt.date(2027, 2, 28)),
    ],
)
def test_series_with_date_bounds_covers_the_whole_day_at_every_precision(day, now):
    create_tree()
    midnight = at(f"{day} 00:00")
    second = dt.timedelta(seconds=1)
    inside = [
        midnight,
        midnight + dt.timedelta(hours=12, minutes=30),
        midnight + dt.timedelta(days=1) - second,
    ]
    outside = [midnight - second, midnight + dt.timedelta(days=1)]  # the last second before, the first after
    feed([pv_event(t, "A1a", f"u{n}") for n, t in enumerate(inside + outside)], now=now)
    feed([pv_event(inside[1], "B", "u9")], now=now)  # another subtree: only in the site-wide series
    client = staff_client()
    for precision, samples in [(60, 1440), (300, 288), (3600, 24)]:
        for partner, pv in [("A", 3), ("A1a", 3), ("B", 1), (None, 4)]:
            query = f"precision={precision}&start={day}&end={day}" + (
                f"&partner={partner}" if partner else ""
            )
            body = client.get(f"/api/v1/series/?{query}").json()
            assert len(body) == samples, (precision, partner)
            assert body[0]["ts"] == f"{day}T00:00:00+08:00"
            assert sum(p["count"] for p in body) == pv, (precision, partner)
    # Both bounds on the same date at a day's precision: one sample, the day's PV.
    assert client.get(f"/api/v1/series/?precision=86400&partner=A&start={day}&end={day}").json() == [
        {"ts": f"{day}T00:00:00+08:00", "count": 3}
    ]
    # A datetime keeps its exact meaning: the sample holding that instant, no more.
    exact = client.get(f"/api/v1/series/?precision=60&partner=A&start={day}T00:00&end={day}T00:00").json()
    assert exact == [{"ts": f"{day}T00:00:00+08:00", "count": 1}]


def test_a_whole_day_at_one_second_is_too_many_samples_and_the_400_says_why():
    create_tree()
    client = staff_client()
    day = client.get("/api/v1/series/?precision=1&partner=A&start=2026-11-21&end=2026-11-21")
    assert day.status_code == 400
    message = day.json()["start"][0]  # in whichever language: the count and the limit are in it
    assert day.json()["error"] == "invalid" and "86400" in message and "5000" in message
    hour = client.get("/api/v1/series/?precision=1&partner=A&start=2026-11-21T08:00&end=2026-11-21T08:59:59")
    assert hour.status_code == 200 and len(hour.json()) == 3600


@pytest.mark.parametrize(
    ("url", "param"),
    [
        ("partners/A/stats/?start=2026-11-21&end=2026-11-20", "end"),
        ("series/?partner=A&start=2026-11-21&end=2026-11-20", "end"),
        ("series/?partner=A&start=2026-11-21T10:00&end=2026-11-21T09:59", "end"),
        ("partners/A/stats/?start=2025-11-20&end=2026-11-21", "end"),  # 367 days
        ("series/?partner=A&precision=86400&start=2025-11-20&end=2026-11-21", "end"),
        ("logins/active/?start=2025-11-20&end=2026-11-21", "end"),
        ("partners/A/stats/?start=2026-11-31", "start"),
        ("series/?partner=A&start=2026-02-29", "start"),
        ("rankings/partners/?window=2d", "window"),
        ("rankings/partners/?scope=all", "scope"),
        ("series/?precision=120", "precision"),
        ("partners/A/stats/?format=xml", "format"),
        ("partners/?format=csv", "format"),
        ("logins/counts/?user_type=client&format=csv", "format"),
    ],
)
def test_bad_ranges_and_choices_are_a_400_naming_the_parameter_in_the_one_error_shape(url, param):
    create_tree()
    response = staff_client().get(f"/api/v1/{url}")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"error", "detail", param}
    assert body["error"] == "invalid" and param in body["detail"]


def test_the_longest_range_is_a_setting(settings):
    create_tree()
    client = staff_client()
    year = "partners/A/stats/?start=2025-11-21&end=2026-11-21"  # 366 days, the default limit
    assert len(client.get(f"/api/v1/{year}").json()["days"]) == 366
    settings.CPS_API_MAX_RANGE_DAYS = 31
    assert client.get(f"/api/v1/{year}").status_code == 400
    month = client.get("/api/v1/partners/A/stats/?start=2026-10-22&end=2026-11-21")
    assert month.status_code == 200 and len(month.json()["days"]) == 31
    assert client.get("/api/v1/partners/A/stats/?start=2026-10-21&end=2026-11-21").status_code == 400
    assert (
        client.get("/api/v1/series/?partner=A&precision=86400&start=2026-10-01&end=2026-11-21").status_code
        == 400
    )


@pytest.mark.parametrize(
    ("status", "url", "client_kind"),
    [
        (400, "series/?precision=7", "staff"),
        (401, "partners/", "anonymous"),
        (403, "logins/counts/?user_type=client", "portal"),
        (404, "partners/NOPE/stats/", "staff"),
        (404, "partners/NOPE/stats/?format=csv", "staff"),
        (429, "partners/", "throttled portal"),
    ],
)
def test_every_error_has_the_same_shape(settings, status, url, client_kind):
    create_tree()
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "portal": "1/min"},
    }
    client = {
        "staff": staff_client,
        "anonymous": APIClient,
        "portal": lambda: portal_client("A1"),
        "throttled portal": lambda: portal_client("A1"),
    }[client_kind]()
    if client_kind == "throttled portal":
        assert client.get("/api/v1/partners/").status_code == 200
    response = client.get(f"/api/v1/{url}")
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert isinstance(body["error"], str) and isinstance(body["detail"], str) and body["detail"]
    assert all(isinstance(v, list) for k, v in body.items() if k not in ("error", "detail"))
