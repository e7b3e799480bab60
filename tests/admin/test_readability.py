"""What a staff member reads: numbers grouped in both languages, a partner box that finds codes in any case and
offers its matches as links, no future range, no internal value or untranslated word on a Chinese page."""

import datetime as dt
import re
from html import unescape

import pytest
from django.utils import timezone, translation

from partners.services import partner_create
from stats.dashboard.charts import bar_chart
from stats.models import DailyStat
from tests.admin.conftest import CLOCK, YESTERDAY
from tests.admin.test_dashboard import page_messages, text_of
from tests.admin.test_lists import csv_of, totals
from tests.test_admin import result_rows

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine(CLOCK, tick=False)]

DAILY = "/admin/stats/dailystat/"


@pytest.fixture
def big_day(two_days):
    """A reconciled day of 2026-11-20 with counts in the tens of thousands: A 32,925 views by 25,000 users."""
    DailyStat.objects.create(
        partner=two_days["A"],
        date=dt.date(2026, 11, 20),
        pv=32925,
        uv=25000,
        pv_self=1234,
        uv_self=1000,
        bot_pv=50533,
        reconciled_at=timezone.now(),
    )
    return two_days


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_list_rows_and_the_total_row_group_thousands_alike(settings, boss, big_day, language):
    settings.LANGUAGE_CODE = language
    params = {"date__gte": "2026-11-20", "date__lte": "2026-11-20"}
    html = boss.get(DAILY, params).content.decode()
    assert result_rows(html, "pv", "uv", "pv_self", "uv_self", "bot_pv") == [
        ("32,925", "25,000", "1,234", "1,000", "50,533")
    ]
    assert totals(html)["pv"] == "32,925" and totals(html)["bot_pv"] == "50,533"
    # The CSV stays raw, for spreadsheets.
    assert csv_of(boss, DAILY + "export.csv", params)[1].split(",")[4:9] == [
        "32925",
        "25000",
        "1234",
        "1000",
        "50533",
    ]


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_dashboard_numbers_and_chart_axes_group_thousands(settings, boss, big_day, language):
    settings.LANGUAGE_CODE = language
    html = boss.get("/admin/", {"partner": "A", "start": "2026-11-20", "end": "2026-11-22"}).content.decode()
    assert text_of(html, "range-pv") == "32,933"  # 32,925 + 6 yesterday + 2 today
    chart = html[html.index('id="days-chart"') :]
    axis = re.findall(r'<text class="axis"[^>]*>([^<]*)</text>', chart[: chart.index("</svg>")])
    assert "50,000" in axis and "25,000" in axis  # the peak 32,925 rounded up to 50,000
    with translation.override(language):
        svg = str(bar_chart(labels=["a"], values=[100000], title="t"))
    assert re.findall(r'<text class="axis"[^>]*>([^<]*)</text>', svg)[:3] == ["0", "50,000", "100,000"]


def test_the_partner_box_finds_a_code_in_any_case(boss, two_days):
    partner_create(code="P001A", name="华东一区", parent=None)
    html = boss.get("/admin/", {"partner": "p001a"}).content.decode()
    assert page_messages(html) == []
    assert re.search(r'class="cps-subject">\s*P001A · 华东一区\s*<', html)


def test_several_matches_are_links_to_choose_from(boss, two_days):
    html = boss.get("/admin/", {"partner": "Partner", "start": "2026-11-21"}).content.decode()
    box = html[html.index('id="partner-matches"') :]
    box = box[: box.index("</nav>")]
    links = re.findall(r'<a href="([^"]+)">([^<]+)</a>', box)
    assert [code for _url, code in links] == ["A", "A1", "A1a", "A2", "B"]
    # Each link shows that partner, the page's other choices kept.
    assert unescape(links[1][0]) == "/admin/?partner=A1&start=2026-11-21"
    assert re.search(
        r'class="cps-subject">\s*A1 · Partner A1\s*<', boss.get(unescape(links[1][0])).content.decode()
    )


def test_a_future_end_date_stops_at_today_and_says_so(boss, two_days):
    html = boss.get("/admin/", {"start": "2026-11-20", "end": "2026-12-31"}).content.decode()
    assert page_messages(html) == [
        "The end date 2026-12-31 is in the future; showing 2026-11-20 to today, 2026-11-22."
    ]
    assert 'name="end" value="2026-11-22"' in html
    # Far ahead, with the default start: still today, not a range "too long" to show.
    far = boss.get("/admin/", {"end": "2099-01-01"}).content.decode()
    assert page_messages(far) == [
        "The end date 2099-01-01 is in the future; showing 2026-10-24 to today, 2026-11-22."
    ]
    future = boss.get("/admin/", {"start": "2026-12-01", "end": "2026-12-31"}).content.decode()
    assert page_messages(future) == [
        "The range starts on 2026-12-01, after today: no traffic is counted yet; showing 2026-10-24 to "
        "2026-11-22 instead."
    ]


def test_the_future_date_message_is_in_the_pages_language(settings, boss, two_days):
    settings.LANGUAGE_CODE = "zh-hans"
    html = boss.get("/admin/", {"start": "2026-11-20", "end": "2026-12-31"}).content.decode()
    assert page_messages(html) == ["结束日期 2026-12-31 在未来；改为显示 2026-11-20 至今天（2026-11-22）。"]


def test_a_bad_scope_names_the_labels_on_screen_in_chinese(settings, boss, two_days):
    settings.LANGUAGE_CODE = "zh-hans"
    html = boss.get("/admin/", {"partner": "A", "scope": "x"}).content.decode()
    assert page_messages(html) == ["范围只能是“含下级导流商”或“仅自身流量”；已显示“含下级导流商”。"]
    assert "tree" not in page_messages(html)[0] and "self" not in page_messages(html)[0]


def test_the_tab_title_says_what_the_header_says(boss, two_days):
    html = boss.get(DAILY).content.decode()
    title = re.search(r"<title>(.*?)</title>", html).group(1)
    header = re.search(r'id="site-name"><a [^>]*>(.*?)</a>', html, re.S).group(1).strip()
    assert title.endswith(f"| {header}") and header == "CPS partner statistics"


def test_a_chinese_index_names_every_app_in_chinese(settings, boss, two_days):
    settings.LANGUAGE_CODE = "zh-hans"
    html = boss.get("/admin/").content.decode()
    assert "Django Q" not in html and "任务队列" in html


def test_a_daily_statistic_has_a_readable_title(settings, boss, two_days):
    row = DailyStat.objects.get(partner=two_days["A1"], date=YESTERDAY)
    site = DailyStat.objects.get(partner__isnull=True, date=YESTERDAY)
    assert str(row) == "A1 Partner A1 on 11/21/2026"
    settings.LANGUAGE_CODE = "zh-hans"
    with translation.override("zh-hans"):
        assert str(row) == "A1 Partner A1，2026年11月21日"
        assert str(site) == "无导流商的流量，2026年11月21日"
    html = boss.get(f"/admin/stats/dailystat/{row.pk}/change/").content.decode()
    assert "A1 Partner A1，2026年11月21日" in html and "pv=" not in html


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"end": "yesterday"}, "“to” must be a date as YYYY-MM-DD, not “yesterday”"),
        ({"start": "2026-11-22", "end": "2026-11-01"}, "“to” is before “From”"),
        ({"start": "2024-11-01", "end": "2026-11-22"}, "the range covers more than 366 days"),
    ],
)
def test_a_bad_range_names_the_fields_by_their_labels(boss, two_days, params, problem):
    html = boss.get("/admin/", params).content.decode()
    assert page_messages(html) == [
        f"The date range was not understood ({problem}); showing 2026-10-24 to 2026-11-22 instead."
    ]


def test_a_bad_range_in_chinese_names_the_chinese_labels(settings, boss, two_days):
    settings.LANGUAGE_CODE = "zh-hans"
    html = boss.get("/admin/", {"start": "2026-11-22", "end": "2026-11-01"}).content.decode()
    assert page_messages(html) == ["无法识别日期范围（“至”早于“从”），改为显示 2026-10-24 至 2026-11-22。"]


def test_the_rows_without_a_partner_say_so(boss, two_days):
    html = boss.get(DAILY, {"date__gte": "2026-11-21", "date__lte": "2026-11-21"}).content.decode()
    assert ("traffic without a partner", "2") in result_rows(html, "partner", "pv")
