"""The dashboard (the admin index) and the partner page show the numbers the inputs imply."""

import re
from html import unescape

import pytest

from stats.jobs.flush import flush
from stats.jobs.reconcile import reconcile
from tests.admin.conftest import CLOCK, NOON, YESTERDAY
from tests.factories import at, create_tree, feed, pv_event

CLOCK_MOMENT = at("2026-11-22 09:00")

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine(CLOCK, tick=False)]


def text_of(html: str, element_id: str) -> str:
    match = re.search(rf'id="{element_id}"[^>]*>([^<]*)<', html)
    assert match, f"no element #{element_id}"
    return match.group(1).strip()


def page_messages(html: str) -> list[str]:
    """The texts of the admin's messages, as a reader sees them."""
    return [unescape(text).strip() for text in re.findall(r'<li class="[a-z]+">(.*?)</li>', html, re.S)]


def day_row(html: str, table_id: str, day: str) -> list[str]:
    """The texts of the cells of the row of ``day`` in table ``table_id``."""
    table = html[html.index(f'id="{table_id}"') :]
    row = table[table.index(f'data-date="{day}"') :]
    row = row[: row.index("</tr>")]
    return [
        re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)
    ]


def test_admin_index_is_the_dashboard_with_todays_unflushed_traffic(boss, two_days):
    html = boss.get("/admin/").content.decode()
    assert "Statistics dashboard" in html
    # This morning is only in Redis: A1's two views and one with no partner; users u1 and u5.
    assert text_of(html, "today-pv") == "3"
    assert text_of(html, "today-uv") == "2"
    # Yesterday: A's subtree 6 + B 1 + no partner 2; users u1 u2 u3 u4 u9 (a union, not 4 + 1 + 1).
    assert day_row(html, "days-table", "2026-11-21")[1:3] == ["9", "5"]
    assert text_of(html, "range-pv") == "12"
    # Users over both days: u1 u2 u3 u4 u9 yesterday, u1 u5 today: 6, where adding the days' UVs says 7.
    assert text_of(html, "range-uv") == "6"
    assert text_of(html, "minute-total") == "3"
    # The model list is still on the index page.
    assert "/admin/stats/dailystat/" in html and "/admin/partners/partner/" in html


def test_dashboard_for_one_partner_shows_its_subtree_and_the_range_uv_as_a_union(boss, two_days):
    html = boss.get("/admin/", {"partner": "A", "start": "2026-11-16", "end": "2026-11-22"}).content.decode()
    assert text_of(html, "today-pv") == "2"
    assert text_of(html, "today-uv") == "2"
    assert text_of(html, "range-pv") == "8"
    # u1..u5 over the two days: 5, where adding the days' UVs would say 4 + 2 = 6.
    assert text_of(html, "range-uv") == "5"
    assert day_row(html, "days-table", "2026-11-21")[1:4] == ["6", "4", "✓"]
    own = boss.get("/admin/", {"partner": "A1", "scope": "self"}).content.decode()
    assert day_row(own, "days-table", "2026-11-21")[1:3] == ["4", "3"]


def test_dashboard_ranks_partners_over_each_window(boss, two_days):
    html = boss.get("/admin/").content.decode()
    board = html[html.index('id="top-24h"') : html.index('id="top-7d"')]
    rows = re.findall(r"<td>(\d+)</td><td><a [^>]*>([^<]+)</a>.*?<td class=\"pv\">(\d+)</td>", board, re.S)
    assert rows == [("1", "A", "8"), ("2", "A1", "8"), ("3", "A1a", "2"), ("4", "B", "1")]
    last_hour = html[html.index('id="top-1h"') : html.index('id="top-24h"')]
    assert re.findall(r'<td class="pv">(\d+)</td>', last_hour) == ["2", "2"]


def test_dashboard_bad_parameters_become_messages_not_errors(boss, two_days):
    response = boss.get("/admin/", {"start": "2026-02-30", "partner": "NOPE", "scope": "x"})
    assert response.status_code == 200
    html = response.content.decode()
    assert page_messages(html) == [
        "The date range was not understood (“From” must be a date as YYYY-MM-DD, not “2026-02-30”); "
        "showing 2026-10-24 to 2026-11-22 instead.",
        "No partner has the code or name NOPE; showing all traffic.",
        # The labels of the scope selector, not the values it sends ("tree", "self").
        "Scope must be “with sub-partners” or “traffic without a partner”; showing “with sub-partners”.",
    ]
    assert text_of(html, "today-pv") == "3"  # the defaults: all traffic, the last 30 days
    assert boss.get("/admin/", {"start": "2026-11-22", "end": "2026-11-01"}).status_code == 200


def test_a_bad_date_is_one_readable_sentence_naming_the_parameter(boss, two_days):
    html = boss.get("/admin/?start=2026-13-01&end=yesterday").content.decode()
    assert page_messages(html) == [
        "The date range was not understood (“From” must be a date as YYYY-MM-DD, not “2026-13-01”); "
        "showing 2026-10-24 to 2026-11-22 instead."
    ]


def test_partner_page_puts_children_side_by_side_with_a_union_total(boss, two_days):
    html = boss.get("/admin/network/A/", {"start": "2026-11-21", "end": "2026-11-22"}).content.decode()
    # Columns: date, A pv uv pv_self uv_self, then A1 pv uv, A2 pv uv (children by code).
    assert day_row(html, "network-table", "2026-11-21")[1:] == ["6", "4", "0", "0", "6", "4", "0", "0"]
    assert day_row(html, "network-table", "2026-11-22")[1:] == ["2", "2", "0", "0", "2", "2", "0", "0"]
    total = html[html.index('id="network-total"') :]
    total = total[: total.index("</tr>")]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", total)
    assert cells == ["8", "5", "0", "0", "8", "5", "0", "0"]


def test_partner_page_csv_holds_the_same_table(boss, two_days):
    response = boss.get("/admin/network/A/", {"start": "2026-11-21", "end": "2026-11-22", "format": "csv"})
    assert response.status_code == 200 and response.streaming
    text = b"".join(response.streaming_content).decode("utf-8-sig")
    assert text.splitlines() == [
        "date,PV,UV,own PV,own UV,A1 PV,A1 UV,A2 PV,A2 UV",
        "2026-11-21,6,4,0,0,6,4,0,0",
        "2026-11-22,2,2,0,0,2,2,0,0",
        "total,8,5,0,0,8,5,0,0",
    ]


def test_partner_page_of_an_unknown_code_is_404_inside_the_admin_with_a_way_back(boss, two_days):
    response = boss.get("/admin/network/NOPE/")
    assert response.status_code == 404
    html = response.content.decode()
    assert unescape(text_of(html, "partner-missing")) == (
        "No partner has the code NOPE. It may have been mistyped, or the link is out of date."
    )
    assert 'id="back-to-dashboard"' in html and 'href="/admin/"' in html
    assert 'href="/admin/partners/partner/?q=NOPE" id="search-partners"' in html
    assert 'id="user-tools"' in html  # the admin's header and navigation are there


def comparison(html: str) -> dict[str, list[str]]:
    """The comparison table: each figure's key to its this-period, previous, change and change-% texts."""
    table = html[
        html.index('id="comparison-table"') : html.index("</table>", html.index('id="comparison-table"'))
    ]
    rows = re.findall(r'<tr data-key="(\w+)">(.*?)</tr>', table, re.S)
    return {
        key: [unescape(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", cells, re.S)]
        for key, cells in rows
    }


def test_dashboard_compares_the_range_with_as_many_days_just_before(boss, two_days):
    html = boss.get("/admin/", {"start": "2026-11-22", "end": "2026-11-22"}).content.decode()
    # Today 3 views by u1 u5; yesterday 9 views by u1 u2 u3 u4 u9.
    assert comparison(html) == {"pv": ["3", "9", "−6", "−66.7%"], "uv": ["2", "5", "−3", "−60.0%"]}
    assert (
        "11/22/2026 – 11/22/2026 against the same number of days just before it, 11/21/2026 – 11/21/2026."
        in html
    )
    two_days_range = boss.get("/admin/", {"start": "2026-11-21", "end": "2026-11-22"}).content.decode()
    # Nothing on Nov 19-20: a change from 0 has no percentage.
    assert comparison(two_days_range) == {"pv": ["12", "0", "+12", "—"], "uv": ["6", "0", "+6", "—"]}


def test_dashboard_compares_a_partners_numbers_and_its_share_of_all_traffic(boss, two_days):
    html = boss.get("/admin/", {"partner": "A", "start": "2026-11-22", "end": "2026-11-22"}).content.decode()
    # A today: 2 views (u1 u5) of the site's 3 (u1 u5); yesterday 6 views (u1..u4) of 9 (u1 u2 u3 u4 u9).
    assert comparison(html) == {
        "pv": ["2", "6", "−4", "−66.7%"],
        "uv": ["2", "4", "−2", "−50.0%"],
        "pv_share": ["66.7%", "66.7%", "0.0 pp", "0.0%"],
        "uv_share": ["100.0%", "80.0%", "+20.0 pp", "+25.0%"],
    }


def test_partner_page_compares_with_the_previous_period_and_charts_the_partner_and_its_children(
    boss, two_days
):
    html = boss.get("/admin/network/A/", {"start": "2026-11-22", "end": "2026-11-22"}).content.decode()
    assert comparison(html)["pv"] == ["2", "6", "−4", "−66.7%"]
    assert comparison(html)["uv_share"] == ["100.0%", "80.0%", "+20.0 pp", "+25.0%"]
    week = boss.get("/admin/network/A/", {"start": "2026-11-21", "end": "2026-11-22"}).content.decode()
    chart = week[week.index('id="network-chart"') :]
    chart = chart[: chart.index("</svg>")]
    series = {
        name: re.findall(r'data-label="([^"]+)" data-value="(\d+)"', points)
        for name, points in re.findall(r'data-series="(\w+)">(.*?)</g>', chart, re.S)
    }
    assert series == {
        "A": [("11-21", "6"), ("11-22", "2")],
        "A1": [("11-21", "6"), ("11-22", "2")],
        "A2": [("11-21", "0"), ("11-22", "0")],
    }


@pytest.mark.parametrize(
    ("typed", "subject"),
    [("Partner A1a", "A1a · Partner A1a"), ("partner a1a", "A1a · Partner A1a"), ("1a", "A1a · Partner A1a")],
)
def test_the_dashboard_finds_a_partner_by_its_name(boss, two_days, typed, subject):
    html = boss.get("/admin/", {"partner": typed}).content.decode()
    assert page_messages(html) == []
    assert (
        re.sub(r"\s+", " ", re.search(r'class="cps-subject">(.*?)</h2>', html, re.S).group(1)).strip()
        == subject
    )
    assert text_of(html, "today-pv") == "0" and text_of(html, "range-pv") == "2"


def test_a_name_matching_several_partners_lists_them(boss, two_days):
    html = boss.get("/admin/", {"partner": "partner a"}).content.decode()  # Partner A's name: that one
    assert re.search(r'class="cps-subject">\s*A · Partner A\s*<', html)
    html = boss.get("/admin/", {"partner": "Partner"}).content.decode()
    assert page_messages(html) == [
        "Several partners match Partner: A (Partner A), A1 (Partner A1), A1a (Partner A1a), "
        "A2 (Partner A2), B (Partner B); showing all traffic."
    ]


def test_pages_link_to_each_other(boss, two_days):
    assert "/admin/network/A/" in boss.get("/admin/", {"partner": "A"}).content.decode()
    assert "/admin/network/A/" in boss.get("/admin/partners/partner/").content.decode()
    partner_id = two_days["A"].pk
    assert "/admin/network/A/" in boss.get(f"/admin/partners/partner/{partner_id}/change/").content.decode()


def test_pipeline_health_panel_shows_jobs_drift_and_todays_dead_letters(boss, two_days):
    from tests.factories import feed, pv_event

    feed(
        [pv_event(at("2026-11-22 08:50"), "NOPE"), pv_event(at("2026-11-22 08:51"), "NOPE")], now=CLOCK_MOMENT
    )
    html = boss.get("/admin/").content.decode()
    panel = html[html.index('id="pipeline-health"') : html.index('id="model-list"')]
    # The jobs ran under the fixed clock (09:00); nothing listens on the test's Kafka address.
    assert text_of(panel, "last-flush") == "Nov. 22, 2026, 9 a.m."
    assert text_of(panel, "last-reconcile") == "Nov. 22, 2026, 9 a.m."
    assert "No end offset recorded yet" in panel  # read from Redis: Kafka is never asked for a page
    drift = panel[panel.index('id="drift"') :]
    assert re.findall(r"<dd>([^<]*)</dd>", drift)[:3] == ["11/21/2026", "0", "0"]
    letters = panel[panel.index('id="dead-letters-today"') :]
    assert re.findall(r"<tr><td>([^<]*)</td><td>(\d+)</td></tr>", letters) == [("unknown partner code", "2")]


def test_a_one_day_comparison_shows_the_days_uv_as_its_list_does_not_a_hyperloglog_estimate(boss):
    """111 buyers (o-1 … o-111) of the lone root B yesterday, reconciled: Redis' HyperLogLog counts that set as
    110, the day list and the API show the exact 111, and the comparison must say the same, for the site and
    for B."""
    create_tree()
    feed([pv_event(NOON, "B", f"o-{n}") for n in range(1, 112)], now=NOON)
    flush(now=at("2026-11-21 13:00"))
    reconcile(day=YESTERDAY, now=at("2026-11-22 00:40"))
    for partner in ({}, {"partner": "B"}):
        html = boss.get("/admin/", {"start": "2026-11-21", "end": "2026-11-21", **partner}).content.decode()
        assert comparison(html)["uv"][0] == "111", partner
        assert day_row(html, "days-table", "2026-11-21")[2] == "111", partner
