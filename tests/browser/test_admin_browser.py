"""The admin in a real browser (Debian's chromium driven by Playwright) on the demo dataset.

A staff user logs in, lands on the dashboard, finds a partner by its name, opens the partner page and the daily
list, and finds on each the numbers the API gives for the same partner and day (the comparison with yesterday
and the partner chart included); switches to Chinese; downloads a CSV; finds a partner by name again in Chinese.
In both languages: the last hour's chart follows the scope, the daily list's row of today holds what the
dashboard and the API hold while views wait unflushed in Redis, a login month is a page to view with its
dates, and no list is wider than a 1366-pixel screen. Screenshots (1366 px wide) go to ``.run/shots/`` for a
person to look at.
"""

import csv
import datetime as dt
import io
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from cpsproject.common.timeutil import local_day
from loginlog.services import sync_logins
from stats.devtools.demo import DEMO_USER, seed_demo
from stats.models import DeadLetter
from tests.browser import PAGE_TIMEOUT_MS
from tests.factories import feed, pv_event

# The pages in a browser, in the MariaDB pass of scripts/test only (tests/browser/__init__.py says why).
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.real_clock,
    pytest.mark.one_pass("mariadb"),
]

CHROMIUM = "/usr/bin/chromium"
# CPS_SCREENSHOTS puts them elsewhere (several checkouts running the test at once).
SCREENSHOTS = Path(os.environ.get("CPS_SCREENSHOTS") or Path(settings.RUN_DIR) / "shots")
PARTNER = "P001"
# A partner with children: its own traffic differs from its subtree's. Views fed unflushed just before the
# pages are read: own 3, its child's 2.
MIDDLE, MIDDLE_CHILD = "P001A", "P001A1"
WIDTH = 1366  # the narrowest screen staff use


@contextmanager
def chromium() -> Iterator:
    """Debian's chromium under Playwright. Start it only once the test is done with the ORM: Playwright's sync
    API keeps an event loop running in this thread, where Django refuses database calls."""
    if not shutil.which(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: run scripts/test, or apt-get install chromium")
    os.environ["PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD"] = "1"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def number(text: str) -> int:
    """A number as the page shows it, grouping separators and all."""
    return int(text.strip().replace(",", "").replace("\u00a0", "").replace(" ", ""))


def test_staff_sees_the_apis_numbers_in_the_admin_in_both_languages(live_server, settings, tmp_path):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    settings.RUN_DIR = tmp_path  # the demo's replay files: not shared with a test running beside this one
    seed_demo(events=3000)
    # A dead letter whose payload has no place to break: it must wrap, not widen the page.
    feed([b"{" + b"A" * 5000], now=timezone.now())
    letter = DeadLetter.objects.filter(reason="not_json").order_by("-pk").first().pk
    now = timezone.now()
    sync_logins(now=now)  # the login months the list shows
    # Views left in Redis, as between two flushes: the daily list must show them as the dashboard does.
    fresh = [pv_event(now, MIDDLE, f"browser-{n}") for n in range(3)]
    fresh += [pv_event(now, MIDDLE_CHILD, f"browser-{n}") for n in range(3, 5)]
    feed(fresh, now=now)
    today = local_day(now)
    with chromium() as browser:
        check_pages(
            browser, live_server.url, today.isoformat(), (today - dt.timedelta(days=1)).isoformat(), letter
        )
        for language in ("en", "zh-hans"):
            check_one_truth(browser, live_server.url, today.isoformat(), language)


def check_pages(browser, base: str, today: str, yesterday: str, letter: int) -> None:
    context = browser.new_context(
        locale="en-US", accept_downloads=True, viewport={"width": WIDTH, "height": 900}
    )
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)

    page.goto(f"{base}/admin/")
    page.fill("#id_username", DEMO_USER[0])
    page.fill("#id_password", DEMO_USER[1])
    page.click("input[type=submit]")
    page.wait_for_selector("#today-pv")
    assert page.url.rstrip("/").endswith("/admin")  # the first page after login is the dashboard
    page.screenshot(path=SCREENSHOTS / "1-dashboard.png", full_page=True)

    api = page.request.get(f"{base}/api/v1/partners/{PARTNER}/stats/?start={today}&end={today}")
    assert api.ok, api.text()
    day = api.json()["days"][0]
    assert day["pv"] > 0

    before = api_day(page, base, yesterday)
    partner = page.request.get(f"{base}/api/v1/partners/{PARTNER}/").json()
    children = page.request.get(f"{base}/api/v1/partners/?parent={PARTNER}").json()["results"]

    # Found by its name, as staff remember it: the same numbers as by its code.
    page.goto(f"{base}/admin/?start={today}&end={today}")
    page.fill("input[name=partner]", partner["name"].lower())
    with page.expect_navigation():
        page.click("#dashboard-filters button[type=submit]")
    assert page.inner_text(".cps-subject").split() == [PARTNER, "·", *partner["name"].split()]
    assert number(page.inner_text("#today-pv")) == day["pv"]
    assert number(page.inner_text("#today-uv")) == day["uv"]
    assert page.locator("#days-chart svg.cps-chart, #last-hour svg.cps-chart").count() == 2
    # Today against yesterday, as the API counts both.
    check_comparison(page, day, before)
    page.screenshot(path=SCREENSHOTS / "2-dashboard-partner.png", full_page=True)

    page.click("#partner-page-link")
    row = page.locator(f'#network-table tr[data-date="{today}"]')
    assert number(row.locator("td.pv").inner_text()) == day["pv"]
    assert number(row.locator("td.uv").inner_text()) == day["uv"]
    assert number(row.locator("td.pv_self").inner_text()) == day["pv_self"]
    check_comparison(page, day, before)
    # The chart: the partner and each child, one line each, today's point holding the API's PV.
    chart = page.locator("#network-chart svg.cps-chart")
    assert chart.locator("g.series").evaluate_all("gs => gs.map(g => g.dataset.series)") == [
        PARTNER,
        *sorted(child["code"] for child in children),
    ]
    label = today[5:]  # MM-DD
    point = chart.locator(f'g[data-series="{PARTNER}"] circle[data-label="{label}"]')
    assert int(point.get_attribute("data-value")) == day["pv"]
    for child in children:
        child_day = api_day(page, base, today, child["code"])
        point = chart.locator(f'g[data-series="{child["code"]}"] circle[data-label="{label}"]')
        assert int(point.get_attribute("data-value")) == child_day["pv"]
    assert chart.bounding_box()["height"] > 150  # drawn, not collapsed
    page.screenshot(path=SCREENSHOTS / "3-partner-page.png", full_page=True)

    # A mistyped partner page: a 404 inside the admin, whose link leads back to the dashboard.
    missing = page.goto(f"{base}/admin/network/P00l/")
    assert missing.status == 404
    assert "No partner has the code P00l." in page.inner_text("#partner-missing")
    page.screenshot(path=SCREENSHOTS / "3a-partner-missing.png", full_page=True)
    page.click("#back-to-dashboard")
    page.wait_for_selector("#today-pv")

    # Delete explains that partners are deactivated, and offers that instead.
    page.goto(f"{base}/admin/partners/partner/?q={PARTNER}")
    page.click(f'#result_list a:text-is("{PARTNER}")')
    page.click("a.deletelink")
    assert page.inner_text("#not-deleted").startswith("Partners are deactivated, not deleted")
    assert page.locator("#deactivate").get_attribute("value") == f"Deactivate {PARTNER}"
    page.screenshot(path=SCREENSHOTS / "3b-partner-deactivate.png", full_page=True)

    page.goto(f"{base}/admin/stats/dailystat/?date__gte={today}&date__lte={today}&q={PARTNER}")
    row = page.locator("#result_list tbody tr", has=page.locator("td.field-partner", has_text=f"{PARTNER} ("))
    assert number(row.locator("td.field-pv").inner_text()) == day["pv"]
    assert number(row.locator("td.field-uv").inner_text()) == day["uv"]
    page.screenshot(path=SCREENSHOTS / "4-daily-list.png", full_page=True)

    with page.expect_navigation():
        page.select_option("#language-select", "zh-hans")
    assert "统计看板" not in page.content()  # still the daily list, now in Chinese
    assert "每日统计" in page.inner_text("#content")
    assert "下载 CSV" in page.inner_text("#content")
    page.screenshot(path=SCREENSHOTS / "5-daily-list-zh.png", full_page=True)

    page.goto(f"{base}/admin/stats/deadletter/?reason__exact=not_json")
    head = page.locator("#result_list td.field-payload_head").first
    assert "AAAA" in head.inner_text()
    assert head.bounding_box()["width"] < 600  # 40em at most; unwrapped, 120 letters are far wider
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=SCREENSHOTS / "6-dead-letters.png", full_page=True)
    page.goto(f"{base}/admin/stats/deadletter/{letter}/change/")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=SCREENSHOTS / "7-dead-letter.png", full_page=True)

    page.goto(f"{base}/admin/stats/dailystat/?date__gte={today}&date__lte={today}&q={PARTNER}")
    with page.expect_download() as download:
        page.click("a.cps-csv")
    rows = list(csv.reader(io.StringIO(Path(download.value.path()).read_text(encoding="utf-8-sig"))))
    assert rows[0][:2] == ["日期", "导流商代码"]
    mine = [r for r in rows[1:] if r[1] == PARTNER]
    assert mine and [int(mine[0][4]), int(mine[0][5])] == [day["pv"], day["uv"]]

    page.goto(f"{base}/admin/")
    assert "统计看板" in page.content()
    assert "今日 PV" in page.inner_text("#today")
    page.screenshot(path=SCREENSHOTS / "8-dashboard-zh.png", full_page=True)

    # In Chinese too: a partner found by part of its name, the comparison and the partner chart.
    page.goto(f"{base}/admin/?start={today}&end={today}")
    page.fill("input[name=partner]", partner["name"].split()[-1])  # "Group": one partner's name holds it
    with page.expect_navigation():
        page.click("#dashboard-filters button[type=submit]")
    assert page.inner_text(".cps-subject").split()[0] == PARTNER
    assert "与上一周期对比" in page.inner_text("#comparison")
    assert [th.strip() for th in page.locator("#comparison-table tbody th").all_inner_texts()] == [
        "PV",
        "UV",
        "占全部 PV 的比例",
        "占全部 UV 的比例",
    ]
    check_comparison(page, day, before)
    page.screenshot(path=SCREENSHOTS / "9-dashboard-partner-zh.png", full_page=True)
    page.click("#partner-page-link")
    assert f"{PARTNER} 及其下级导流商每日 PV" in page.inner_text("#network-chart h2")
    page.screenshot(path=SCREENSHOTS / "10-partner-page-zh.png", full_page=True)
    context.close()


def log_in(browser, base: str, language: str):
    context = browser.new_context(locale="en-US", viewport={"width": WIDTH, "height": 900})
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(f"{base}/admin/")
    page.fill("#id_username", DEMO_USER[0])
    page.fill("#id_password", DEMO_USER[1])
    page.click("input[type=submit]")
    page.wait_for_selector("#today-pv")
    if language != "en":
        with page.expect_navigation():
            page.select_option("#language-select", language)
    return context, page


def minute_bars(page) -> dict[str, int]:
    """The last hour's chart: each minute's label to its PV."""
    return dict(
        page.locator("#last-hour rect").evaluate_all("rs => rs.map(r => [r.dataset.label, +r.dataset.value])")
    )


def fits(page) -> bool:
    """Whether the page is no wider than the window and no list wider than its box: no column cut off or
    scrolled out of sight."""
    return page.evaluate(
        "document.documentElement.scrollWidth <= window.innerWidth"
        " && [...document.querySelectorAll('.results')].every(box => box.scrollWidth <= box.clientWidth)"
    )


def check_one_truth(browser, base: str, today: str, language: str) -> None:
    """Scope on every panel, the daily list's today row against the dashboard and the API, the login month."""
    context, page = log_in(browser, base, language)
    shots = SCREENSHOTS / language
    shots.mkdir(parents=True, exist_ok=True)
    page.goto(f"{base}/admin/")  # in the chosen language from here on
    page.goto(f"{base}/admin/?partner={MIDDLE}&scope=self")
    own_today, own_hour = number(page.inner_text("#today-pv")), number(page.inner_text("#minute-total"))
    own = minute_bars(page)
    assert sum(own.values()) == own_hour
    # The partner's own traffic of the last hour holds the 3 own views fed just now; past the first hour of the
    # business day the last hour is part of today (in its first hour it holds the end of yesterday too).
    assert own_hour >= 3
    if local_day(timezone.now() - dt.timedelta(hours=1)).isoformat() == today:
        assert own_hour <= own_today
    assert fits(page)
    page.screenshot(path=shots / "dashboard-scope-self.png", full_page=True)
    page.goto(f"{base}/admin/?partner={MIDDLE}")
    tree_today, tree = number(page.inner_text("#today-pv")), minute_bars(page)
    children = []
    for child in (MIDDLE_CHILD, f"{MIDDLE}2"):
        page.goto(f"{base}/admin/?partner={child}")
        children.append(minute_bars(page))
    # Own traffic is the subtree's less the children's subtrees, minute by minute (the minutes all pages show:
    # the hour slides between two page loads).
    shared = set(own) & set(tree) & set(children[0]) & set(children[1])
    assert len(shared) >= 58
    assert {m: own[m] for m in shared} == {m: tree[m] - children[0][m] - children[1][m] for m in shared}
    assert sum(children[0][m] for m in shared) >= 2
    # Several partners match: links to choose from; a code matches in any case.
    page.goto(f"{base}/admin/?partner=north+media&end=2099-01-01")
    links = page.locator("#partner-matches a")
    assert links.count() >= 4 and "2099-01-01" in page.inner_text(
        "ul.messagelist"
    )  # the end clamped, said so
    page.screenshot(path=shots / "dashboard-matches.png", full_page=True)
    links.first.click()
    page.wait_for_selector("#today-pv")
    assert page.inner_text(".cps-subject").split()[0] == PARTNER
    page.goto(f"{base}/admin/?partner={MIDDLE.lower()}")
    assert page.inner_text(".cps-subject").split()[0] == MIDDLE
    api = api_day(page, base, today, MIDDLE)
    assert (tree_today, own_today) == (api["pv"], api["pv_self"])

    # The daily list's row of today: what the dashboard and the API show, marked as live.
    page.goto(f"{base}/admin/stats/dailystat/?date__gte={today}&date__lte={today}&q={MIDDLE}")
    row = page.locator("#result_list tbody tr", has=page.locator("td.field-partner", has_text=f"{MIDDLE} ("))
    assert number(row.locator("td.field-pv").inner_text()) == api["pv"]
    assert number(row.locator("td.field-uv").inner_text()) == api["uv"]
    assert number(row.locator("td.field-pv_self").inner_text()) == api["pv_self"]
    assert ("live" if language == "en" else "实时") in row.locator("td.field-reconciled_at").inner_text()
    assert fits(page)
    page.screenshot(path=shots / "daily-list-today.png", full_page=True)
    page.goto(f"{base}/admin/stats/dailystat/")  # every partner, every column
    assert fits(page)
    page.screenshot(path=shots / "daily-list.png")
    for path in ("stats/reconciledrift/", "stats/deadletter/", "stats/bucketstat/", "partners/partner/"):
        page.goto(f"{base}/admin/{path}")
        page.screenshot(path=shots / f"list-{path.split('/')[1]}.png")
        assert fits(page), path

    # A login month: a page to view, with its dates; the list filtered by month.
    page.goto(f"{base}/admin/loginlog/loginmonth/")
    # Months to choose, not Django's "Today / Past 7 days" of a date.
    assert page.locator('#changelist-filter a[href*="month="]').count() >= 1
    assert page.locator('#changelist-filter a[href*="month__gte"]').count() == 0
    page.screenshot(path=shots / "login-months.png", full_page=True)
    page.locator("#result_list tbody tr th a").first.click()
    assert page.locator("input[name=_save]").count() == 0 and page.locator("a.deletelink").count() == 0
    dates = page.locator(".field-login_dates .readonly").inner_text()
    assert dates and all(ch.isdigit() or ch in "/, 年月日" for ch in dates), dates
    page.screenshot(path=shots / "login-month.png", full_page=True)
    context.close()


def api_day(page, base: str, day: str, code: str = PARTNER) -> dict:
    response = page.request.get(f"{base}/api/v1/partners/{code}/stats/?start={day}&end={day}")
    assert response.ok, response.text()
    return response.json()["days"][0]


def check_comparison(page, day: dict, before: dict) -> None:
    """The comparison table's PV and UV rows: today against yesterday as the API gives them."""
    for key in ("pv", "uv"):
        row = page.locator(f'#comparison-table tr[data-key="{key}"]')
        assert number(row.locator("td.current").inner_text()) == day[key]
        assert number(row.locator("td.previous").inner_text()) == before[key]
        delta = row.locator("td.delta").inner_text().replace("−", "-").replace("+", "")
        assert number(delta) == day[key] - before[key]
        expected = f"{100 * (day[key] - before[key]) / before[key]:+.1f}%" if before[key] else "—"
        assert row.locator("td.percent").inner_text().replace("−", "-") == expected
