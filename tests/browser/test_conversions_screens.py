"""The demo's orders in a real browser, in English and in Chinese: screenshots for a person to look at.

The demo's own data (``seed_demo``: the sample tree and rates, yesterday reconciled, today's traffic with its
orders, all through the consumer), and a simulated day of the month before last, consumed and closed, so the
statements list has a month. Staff open the dashboard, a partner page, the explanation of an order attributed by
a page view and partly refunded, the orders, the statements, the order drift and the ledger. Every page fits a 1366-pixel
screen, shows its money grouped with its currency, and in Chinese carries none of the English words of its
headings. Screenshots go to ``.run/screens/<language>/`` (``CPS_SCREENS`` elsewhere).
"""

import datetime as dt
import os
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.db.models import Sum
from django.utils import timezone

from conversions.models import LedgerEntry, Order, OrderDrift
from conversions.statements import close_month
from cpsproject.common.timeutil import local_day
from stats.devtools.demo import DEMO_USER, seed_demo
from stats.devtools.simulate import simulate_events
from tests.browser import PAGE_TIMEOUT_MS
from tests.browser.test_admin_browser import WIDTH, chromium, fits
from tests.factories import feed

# The pages in a browser, in the MariaDB pass of scripts/test only (tests/browser/__init__.py says why).
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.real_clock,
    pytest.mark.one_pass("mariadb"),
]

SCREENS = Path(os.environ.get("CPS_SCREENS") or Path(settings.RUN_DIR) / "screens")
PARTNER = "P001"  # a root with two levels under it
# Money as the admin writes it: grouped major units and the currency's code ("1,299.99 CNY", "-5.00 CNY").
MONEY = re.compile(r"^-?\d{1,3}(,\d{3})*\.\d{2} CNY$")
# Words of the conversions headings and panels that must not stay English on a Chinese page.
ENGLISH = [
    "Orders today",
    "Commission",
    "Net amount",
    "Statements",
    "Attribution",
    "Ledger",
    "drift",
    "Buyers",
]


def closed_month_before_last(now: dt.datetime) -> dt.date:
    """Simulate the last day of the month before last through the pipeline, and close that month."""
    first_of_last = (local_day(now).replace(day=1) - dt.timedelta(days=1)).replace(day=1)
    day = first_of_last - dt.timedelta(days=1)
    values, _truth = simulate_events(events=800, day=day, users=80, seed=71, orders_share=0.15)
    end = dt.datetime.combine(day, dt.time(23, 59), tzinfo=now.astimezone().tzinfo)
    feed(values, now=end + dt.timedelta(hours=1))
    close_month(month=day.replace(day=1), now=now)
    return day.replace(day=1)


def test_the_demos_orders_read_in_both_languages(live_server, settings, tmp_path):
    SCREENS.mkdir(parents=True, exist_ok=True)
    settings.RUN_DIR = tmp_path  # the demo's replay files: not shared with a test running beside this one
    seed_demo(events=4000)
    now = timezone.now()
    month = closed_month_before_last(now)
    # An order of today's demo in a foreign currency, attributed by a page view and refunded: every kind of step.
    order = (
        Order.objects.filter(attribution="view", paid_date=local_day(now), events__status="refunded")
        .exclude(currency="CNY")  # converted: the page shows its exchange rate too
        .order_by("paid_at")
        .first()
    )
    assert order is not None
    booked = LedgerEntry.objects.filter(booked_date__gte=month, booked_date__lt=month + dt.timedelta(days=32))
    # What each statement must show: its partner's entries booked in the month, by partner code.
    owed = booked.values("partner__code").annotate(total=Sum("amount")).order_by("partner__code")
    statements = [f"{row['total'] / 100:,.2f} CNY" for row in owed]
    assert len(statements) >= 5 and OrderDrift.objects.exists()
    with chromium() as browser:
        for language in ("en", "zh-hans"):
            walk(browser, live_server.url, language, order.pk, month, statements)


def widths(page) -> list:
    """The page's and each list's scroll width against its box, to say what is too wide."""
    return page.evaluate(
        "[[document.documentElement.scrollWidth, window.innerWidth],"
        " ...[...document.querySelectorAll('.results')].map(b => [b.scrollWidth, b.clientWidth])]"
    )


def walk(browser, base: str, language: str, order: int, month: dt.date, statements: list[str]) -> None:
    context = browser.new_context(locale="en-US", viewport={"width": WIDTH, "height": 900})
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(f"{base}/admin/")
    page.fill("#id_username", DEMO_USER[0])
    page.fill("#id_password", DEMO_USER[1])
    page.click("input[type=submit]")
    page.wait_for_selector("#today-pv")
    if page.locator("#language-select").input_value() != language:
        with page.expect_navigation():
            page.select_option("#language-select", language)
    shots = SCREENS / language
    shots.mkdir(parents=True, exist_ok=True)
    pages = [
        ("1-dashboard", "/admin/", ["#today-net", "#today-commission"]),
        ("2-partner-page", f"/admin/network/{PARTNER}/", ["#network-orders-total td.net"]),
        ("3-order-explanation", f"/admin/conversions/order/{order}/change/", []),
        ("4-orders", "/admin/conversions/order/", ["#result_list td.field-reporting_column"]),
        ("5-statements", f"/admin/conversions/statement/?month={month:%Y-%m}", ["td.field-amount_column"]),
        ("6-order-drift", "/admin/conversions/orderdrift/", ["td.field-exact_gross_column"]),
        ("7-ledger", "/admin/conversions/ledgerentry/", ["td.field-amount_column"]),
    ]
    for name, path, money_cells in pages:
        page.goto(f"{base}{path}")
        page.screenshot(path=shots / f"{name}.png", full_page=True)
        page.screenshot(path=shots / f"{name}-top.png")  # the first screen, at its size: easier to look at
        assert fits(page), (name, widths(page))
        for selector in money_cells:
            texts = page.locator(selector).all_inner_texts()
            assert texts and all(MONEY.match(text) for text in texts), (name, selector, texts[:5])
        if name == "5-statements":
            assert page.locator("td.field-amount_column").all_inner_texts() == statements
        if language != "en":
            text = page.inner_text("#content")
            assert not [word for word in ENGLISH if word in text], name
    context.close()
