"""The admin in a real browser (Debian's chromium driven by Playwright) on the demo dataset.

A staff user logs in, lands on the dashboard, opens the partner page and the daily list, and finds on each the
numbers the API gives for the same partner and day; switches to Chinese; downloads a CSV. Screenshots go to
``.run/screenshots/`` for a person to look at.
"""

import csv
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
from stats.devtools.demo import DEMO_USER, seed_demo
from stats.models import DeadLetter
from tests.factories import feed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.real_clock]

CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = Path(settings.RUN_DIR) / "screenshots"
PARTNER = "P001"


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


def test_staff_sees_the_apis_numbers_in_the_admin_in_both_languages(live_server):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    seed_demo(events=3000)
    # A dead letter whose payload has no place to break: it must wrap, not widen the page.
    feed([b"{" + b"A" * 5000], now=timezone.now())
    letter = DeadLetter.objects.filter(reason="not_json").order_by("-pk").first().pk
    today = local_day(timezone.now()).isoformat()
    with chromium() as browser:
        check_pages(browser, live_server.url, today, letter)


def check_pages(browser, base: str, today: str, letter: int) -> None:
    context = browser.new_context(
        locale="en-US", accept_downloads=True, viewport={"width": 1280, "height": 900}
    )
    page = context.new_page()
    page.set_default_timeout(30_000)

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

    page.goto(f"{base}/admin/?partner={PARTNER}&start={today}&end={today}")
    assert number(page.inner_text("#today-pv")) == day["pv"]
    assert number(page.inner_text("#today-uv")) == day["uv"]
    assert page.locator("svg.cps-chart").count() == 2
    page.screenshot(path=SCREENSHOTS / "2-dashboard-partner.png", full_page=True)

    page.click("#partner-page-link")
    row = page.locator(f'#network-table tr[data-date="{today}"]')
    assert number(row.locator("td.pv").inner_text()) == day["pv"]
    assert number(row.locator("td.uv").inner_text()) == day["uv"]
    assert number(row.locator("td.pv_self").inner_text()) == day["pv_self"]
    page.screenshot(path=SCREENSHOTS / "3-partner-page.png", full_page=True)

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
    context.close()
