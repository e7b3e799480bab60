"""Conversions in a real browser (Debian's chromium under Playwright), in English and in Chinese.

Orders written with the models, relative to the real clock: SO-1 (129.99 CNY, A1a by a page view, paid
yesterday, 30.00 refunded today), SO-2 (19.99 USD = 142.40 CNY, explicit B, paid today), SO-4 (50.00 CNY, A2,
paid and cancelled today). Staff read today's orders, net and commission on the dashboard, the per-child table
on A's partner page, SO-1's explanation, and the statements with their CSV; screenshots (1366 px wide) go to
``.run/shots/conversions/`` for a person to look at.
"""

import csv
import datetime as dt
import io
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from conversions.models import ExchangeRate, Order, Statement
from cpsproject.common.timeutil import to_local
from tests.browser import PAGE_TIMEOUT_MS
from tests.browser.test_admin_browser import SCREENSHOTS, WIDTH, chromium, fits
from tests.conversions.test_admin import entries, event, make_order
from tests.factories import create_tree

# The pages in a browser, in the MariaDB pass of scripts/test only (tests/browser/__init__.py says why).
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.real_clock,
    pytest.mark.one_pass("mariadb"),
]

SHOTS = SCREENSHOTS / "conversions"


def build_orders(now: dt.datetime) -> None:
    tree = create_tree()
    a, a1, a1a, a2, b = (tree[code] for code in ("A", "A1", "A1a", "A2", "B"))
    yesterday = now - dt.timedelta(days=1)
    ExchangeRate.objects.create(currency="USD", valid_from=dt.date(2026, 1, 1), rate=Decimal("7.1234"))

    so1 = make_order(
        "SO-1",
        partner=a1a,
        openid="o-browser-one",
        currency="CNY",
        amount=12999,
        reporting=12999,
        paid_at=yesterday,
        chain=[(a1a, 8000), (a1, 1500), (a, 500)],
        bp=500,
        view_event_id="e-view-1",
        view_ts=yesterday - dt.timedelta(hours=2),
        view_url="/landing?id=3",
    )
    paid = event(so1, "paid", "paid", yesterday, 12999, 12999)
    entries(so1, paid, yesterday, "commission", [(a1a, 8000, 520), (a1, 1500, 98), (a, 500, 32)])
    refund = event(so1, "r1", "refunded", now, 3000, 3000)
    entries(so1, refund, now, "refund", [(a1a, 8000, -120), (a1, 1500, -23), (a, 500, -7)])

    so2 = make_order(
        "SO-2",
        partner=b,
        openid="o-browser-two",
        currency="USD",
        amount=1999,
        reporting=14240,
        paid_at=now,
        chain=[(b, 10000)],
        bp=500,
        attribution="explicit",
        rate=Decimal("7.1234"),
        rate_valid_from=dt.date(2026, 1, 1),
    )
    entries(so2, event(so2, "paid", "paid", now, 1999, 14240), now, "commission", [(b, 10000, 712)])

    so4 = make_order(
        "SO-4",
        partner=a2,
        openid="o-browser-two",
        currency="CNY",
        amount=5000,
        reporting=5000,
        paid_at=now,
        chain=[(a2, 8500), (a, 1500)],
        bp=300,
    )
    entries(
        so4, event(so4, "paid", "paid", now, 5000, 5000), now, "commission", [(a2, 8500, 128), (a, 1500, 22)]
    )
    cancel = event(so4, "c", "cancelled", now, 5000, 5000)
    entries(so4, cancel, now, "cancellation", [(a2, 8500, -128), (a, 1500, -22)])

    Statement.objects.create(partner=a, month=dt.date(2026, 10, 1), amount=1234567, rows=3)
    Statement.objects.create(partner=b, month=dt.date(2026, 10, 1), amount=-500, rows=1)


def test_staff_read_orders_and_their_money_in_both_languages(live_server):
    SHOTS.mkdir(parents=True, exist_ok=True)
    now = to_local(timezone.now()).replace(microsecond=0)
    build_orders(now)
    get_user_model().objects.create_superuser("boss", "boss@example.com", "pw")
    order = Order.objects.get(order_id="SO-1").pk
    today, yesterday = now.date().isoformat(), (now.date() - dt.timedelta(days=1)).isoformat()
    with chromium() as browser:
        for language in ("en", "zh-hans"):
            check_pages(browser, live_server.url, language, order, today, yesterday)


def log_in(browser, base: str, language: str):
    context = browser.new_context(
        locale="en-US", accept_downloads=True, viewport={"width": WIDTH, "height": 900}
    )
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(f"{base}/admin/")
    page.fill("#id_username", "boss")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector("#today-pv")
    if language != "en":
        with page.expect_navigation():
            page.select_option("#language-select", language)
    return context, page


def check_pages(browser, base: str, language: str, order: int, today: str, yesterday: str) -> None:
    context, page = log_in(browser, base, language)
    shots = SHOTS / language
    shots.mkdir(parents=True, exist_ok=True)
    zh = language != "en"

    # The dashboard: SO-2 and SO-4 paid today by one buyer; 192.40 paid less 80.00 refunded; today's entries
    # -1.50 + 7.12 + 1.50 - 1.50.
    page.goto(f"{base}/admin/?start={yesterday}&end={today}")
    assert page.inner_text("#today-orders") == "2"
    assert page.inner_text("#today-buyers") == "1"
    assert page.inner_text("#today-net") == "112.40 CNY"
    assert page.inner_text("#today-commission") == "5.62 CNY"
    assert ("今日订单" if zh else "Orders today") in page.inner_text("#conversions-today")
    top = page.locator("#top-net tbody tr").evaluate_all("rs => rs.map(r => r.dataset.partner)")
    assert top == ["B", "A1a", "A2"]
    chart = page.locator("#conversions-chart svg.cps-chart")
    assert chart.bounding_box()["height"] > 150
    points = chart.locator("g[data-series] circle").evaluate_all("cs => cs.map(c => +c.dataset.value)")
    assert points == [1, 2, 1, 1]  # orders yesterday, today; buyers yesterday, today
    page.screenshot(path=shots / "1-dashboard.png", full_page=True)
    assert fits(page)

    # A's subtree: SO-4 today; today's refunds of SO-1 and SO-4; A's own entries today -0.07 + 0.22 - 0.22.
    page.goto(f"{base}/admin/?partner=A&start={yesterday}&end={today}")
    assert [page.inner_text(f"#today-{k}") for k in ("orders", "net", "commission")] == [
        "1",
        "-30.00 CNY",
        "-0.07 CNY",
    ]
    page.screenshot(path=shots / "2-dashboard-partner.png", full_page=True)

    # The partner page: A's own orders, A1's and A2's subtrees, totals that add up.
    page.click("#partner-page-link")
    table = page.locator("#network-orders")
    assert table.locator('tr[data-partner="A1"] td.net').inner_text() == "99.99 CNY"
    assert table.locator('tr[data-partner="A2"] td.refunded').inner_text() == "50.00 CNY"
    total = table.locator("#network-orders-total")
    assert [
        total.locator(f"td.{k}").inner_text() for k in ("orders", "gross", "refunded", "net", "commission")
    ] == [
        "2",
        "179.99 CNY",
        "80.00 CNY",
        "99.99 CNY",
        "5.00 CNY",
    ]
    page.screenshot(path=shots / "3-partner-page.png", full_page=True)
    assert fits(page)

    # SO-1's explanation: the view that attributed it, and the sums of the refund.
    page.goto(f"{base}/admin/conversions/order/{order}/change/")
    assert page.inner_text("#view-event") == "e-view-1"
    refund = page.locator("#step-2")
    assert refund.locator("dd.net").inner_text() == "12,999 − 3,000 = 9,999"
    assert refund.locator("dd.commission").inner_text() == "9,999 × 500 bp ÷ 10,000 = 499.95 → 500"
    assert refund.locator("td.entry").all_inner_texts() == [
        "400 − 520 = -120",
        "75 − 98 = -23",
        "25 − 32 = -7",
    ]
    assert page.inner_text("#ledger-total") == "500"
    assert "o-browser" not in page.content()
    assert ("归因" if zh else "Attribution") in page.inner_text("#attribution h2")
    page.screenshot(path=shots / "4-order-explanation.png", full_page=True)
    assert fits(page)

    page.goto(f"{base}/admin/conversions/order/")
    page.screenshot(path=shots / "5-orders.png", full_page=True)
    assert fits(page)

    # The statements and the CSV finance pays from.
    page.goto(f"{base}/admin/conversions/statement/?month=2026-10")
    assert page.locator("#result_list td.field-amount_column").all_inner_texts() == [
        "12,345.67 CNY",
        "-5.00 CNY",
    ]
    page.screenshot(path=shots / "6-statements.png", full_page=True)
    assert fits(page)
    with page.expect_download() as download:
        page.click("a.cps-csv")
    rows = list(csv.reader(io.StringIO(Path(download.value.path()).read_text(encoding="utf-8-sig"))))
    assert [row[:6] for row in rows[1:]] == [
        ["2026-10", "A", "Partner A", "CNY", "1234567", "3"],
        ["2026-10", "B", "Partner B", "CNY", "-500", "1"],
    ]
    assert rows[0][0] == ("月份" if zh else "month")

    page.goto(f"{base}/admin/conversions/ledgerentry/")
    page.screenshot(path=shots / "7-ledger.png", full_page=True)
    assert fits(page)
    context.close()
