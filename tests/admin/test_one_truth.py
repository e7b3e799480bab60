"""Today has one truth: the daily list, its CSV and totals, the dashboard and the API agree at one moment,
and the dashboard's scope applies to every panel, the last hour's chart included."""

import datetime as dt
import re

import pytest
from django.utils import timezone

from stats.jobs.flush import flush
from stats.models import DailyStat
from stats.read.selectors import open_list_days
from tests.admin.conftest import CLOCK, TODAY
from tests.admin.test_dashboard import text_of
from tests.admin.test_lists import csv_of, totals
from tests.factories import at, feed, pv_event
from tests.test_admin import result_rows

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine(CLOCK, tick=False)]

DAILY = "/admin/stats/dailystat/"


@pytest.fixture
def open_bucket(two_days):
    """This morning flushed at 09:00 while the bucket of 08:55 is still open: A1 by u6 and u7 at 08:58.

    Today so far: A1 by u1 u5 (08:30, settled and flushed) and u6 u7 (08:58, only in Redis); no partner by u1.
    """
    flush(now=at("2026-11-22 08:59"))  # 08:30 is settled: today's rows exist, holding it
    feed(
        [pv_event(at("2026-11-22 08:58"), "A1", "u6"), pv_event(at("2026-11-22 08:58"), "A1", "u7")],
        now=at("2026-11-22 08:58"),
    )
    flush(now=at("2026-11-22 09:00"))  # the 08:55 bucket is open: its views stay in Redis
    return two_days


def api_today_pv(client, code: str) -> int:
    body = client.get(f"/api/v1/partners/{code}/stats/", {"start": TODAY, "end": TODAY}).json()
    return body["days"][0]["pv"]


def test_the_daily_lists_today_row_shows_what_the_dashboard_and_the_api_show(boss, open_bucket):
    html = boss.get(DAILY, {"date__gte": "2026-11-22", "date__lte": "2026-11-22"}).content.decode()
    rows = dict(
        (partner, (pv, uv, pv_self))
        for partner, pv, uv, pv_self in result_rows(html, "partner", "pv", "uv", "pv_self")
    )
    # A1: u1 u5 at 08:30 and u6 u7 at 08:58: 4 views by 4 users, all its own; A its parent: the same 4.
    assert rows["A1 (Partner A1)"] == ("4", "4", "4")
    assert rows["A (Partner A)"] == ("4", "4", "0")
    dashboard = boss.get("/admin/", {"partner": "A1"}).content.decode()
    assert text_of(dashboard, "today-pv") == "4"
    assert api_today_pv(boss, "A1") == 4
    # The row says its figures are live, not yet reconciled.
    assert re.search(r"not yet: live, as of 09:00", html)
    # Totals: A's 4 (A1's inside it) and the 1 view with no partner; own PV 0 + 4 + 1.
    assert totals(html)["pv"] == "5" and totals(html)["pv_self"] == "5"
    assert totals(html)["uv"] == "4"  # u1 u5 u6 u7; u1 with no partner is the same user
    site = boss.get("/admin/").content.decode()
    assert text_of(site, "today-pv") == "5"


def test_the_daily_csv_holds_todays_live_figures_raw(boss, open_bucket):
    lines = csv_of(boss, DAILY + "export.csv", {"date__gte": "2026-11-22", "q": "A1"})
    assert [line.split(",")[:8] for line in lines[1:]] == [
        ["2026-11-22", "A1", "Partner A1", "2", "4", "4", "4", "4"],
    ]


@pytest.mark.parametrize(
    ("params", "today_pv", "minute_total"),
    [
        ({}, "3", "3"),  # all traffic: A1's two views and one with no partner at 08:30
        ({"scope": "self"}, "1", "1"),  # the traffic without a partner only
        ({"partner": "A"}, "2", "2"),
        ({"partner": "A", "scope": "self"}, "0", "0"),  # A's views are all its child A1's
        ({"partner": "A1", "scope": "self"}, "2", "2"),
    ],
)
def test_the_last_hours_chart_follows_the_scope(boss, two_days, params, today_pv, minute_total):
    html = boss.get("/admin/", params).content.decode()
    # Today's traffic all fell within the last hour: the chart's total is today's PV in every scope.
    assert text_of(html, "today-pv") == today_pv
    assert text_of(html, "minute-total") == minute_total
    chart = html[html.index('id="last-hour"') :]
    chart = chart[: chart.index("</svg>")]
    assert dict(re.findall(r'data-label="([^"]+)" data-value="(\d+)"', chart))["08:30"] == minute_total


def test_the_rankings_follow_the_scope(boss, two_days):
    def board(html: str) -> list[tuple[str, str]]:
        table = html[html.index('id="top-24h"') : html.index('id="top-7d"')]
        return re.findall(r'<td><a [^>]*>([^<]+)</a>.*?<td class="pv">(\d+)</td>', table, re.S)

    # The last 24 hours: yesterday noon and this morning. Subtrees: A 8, A1 8, A1a 2, B 1.
    assert board(boss.get("/admin/").content.decode()) == [("A", "8"), ("A1", "8"), ("A1a", "2"), ("B", "1")]
    # Own views: A1 by u1 u2 u3 u1 and u1 u5, A1a 2, B 1; A has none of its own.
    html = boss.get("/admin/", {"scope": "self"}).content.decode()
    assert board(html) == [("A1", "6"), ("A1a", "2"), ("B", "1")]
    assert "Top partners by own PV, last 24h" in html


def test_an_open_row_under_a_reconciled_parent_is_not_added_twice(boss, open_bucket):
    # A's row of today closed (as a recount would) while A1's is still open: A's 2 views hold A1's.
    DailyStat.objects.filter(partner=open_bucket["A"], date=TODAY).update(reconciled_at=timezone.now())
    html = boss.get(DAILY, {"date__gte": "2026-11-22", "date__lte": "2026-11-22"}).content.decode()
    assert totals(html)["pv"] == "3"  # A's 2 and the 1 view with no partner; A1's live 4 is inside A


@pytest.mark.parametrize(
    ("moment", "first"),
    [
        ("2026-11-22 09:00", "2026-11-22"),
        # Just after midnight yesterday's last bucket has not settled (5 minutes, then 5 more): still open.
        ("2026-11-22 00:03", "2026-11-21"),
        ("2026-11-22 00:09:59", "2026-11-21"),
        ("2026-11-22 00:10", "2026-11-22"),
    ],
)
def test_the_lists_read_live_today_and_yesterday_until_it_settles(moment, first):
    now = at(moment)
    assert open_list_days(now) == (dt.date.fromisoformat(first), now.date())


def test_the_page_of_todays_row_shows_the_live_figures(boss, open_bucket):
    row = DailyStat.objects.get(partner=open_bucket["A1"], date=TODAY)
    html = boss.get(f"/admin/stats/dailystat/{row.pk}/change/").content.decode()
    fields = dict(re.findall(r'<label>([^<]+):</label>\s*<div class="readonly">([^<]*)</div>', html))
    assert fields["PV"] == "4" and fields["Own PV"] == "4" and fields["UV"] == "4"
    assert fields["Reconciled at"] == "not yet: live, as of 09:00"
    assert fields["Realtime PV"] == "2"  # what the last flush stored: the 08:30 views
