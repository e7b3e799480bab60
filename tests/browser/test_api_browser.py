"""The API in a real browser (Debian's chromium driven by Playwright): staff signed in to the admin open it.

A staff user logs in to the admin, then opens the stats endpoint, as a browser asks for it (``Accept:
text/html``, DRF's browsable API), in English and in Chinese, and a refused request in both; each page holds
the numbers and messages in its language. Screenshots go to ``.run/screenshots/`` (``CPS_SCREENSHOTS``).
"""

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from cpsproject.common.timeutil import local_day
from tests.browser import PAGE_TIMEOUT_MS
from tests.browser.test_admin_browser import SCREENSHOTS, chromium
from tests.factories import create_tree, feed, pv_event

# The pages in a browser, in the MariaDB pass of scripts/test only (tests/browser/__init__.py says why).
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.real_clock,
    pytest.mark.one_pass("mariadb"),
]


def test_staff_read_the_stats_endpoint_in_the_browser_in_both_languages(live_server, settings):
    settings.LANGUAGE_CODE = (
        "zh-hans"  # the product's default: English must come from the browser's Accept-Language
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    create_tree()
    now = timezone.now()
    # A1: 4 views by 3 users; A1a (its child): 3 views by 3 others. A1's subtree: 7 PV, 6 users.
    feed(
        [pv_event(now - dt.timedelta(seconds=n + 1), "A1", f"u{n % 3}") for n in range(4)]
        + [pv_event(now - dt.timedelta(seconds=n + 1), "A1a", f"v{n}") for n in range(3)],
        now=now,
    )
    get_user_model().objects.create_superuser("boss", "boss@example.com", "pw")
    today = local_day(now).isoformat()
    with chromium() as browser:
        for language, locale, wants in (
            ("en", "en-US", ["Daily PV and UV of a partner", "CPS partner statistics API"]),
            ("zh", "zh-CN", ["导流商每日 PV 与 UV", "CPS 导流商统计 API"]),
        ):
            context = browser.new_context(locale=locale, viewport={"width": 1280, "height": 900})
            page = context.new_page()
            page.set_default_timeout(PAGE_TIMEOUT_MS)
            page.goto(f"{live_server.url}/admin/login/")
            page.fill("#id_username", "boss")
            page.fill("#id_password", "pw")
            page.click("input[type=submit]")
            page.wait_for_load_state()

            response = page.goto(f"{live_server.url}/api/v1/partners/A1/stats/?start={today}&end={today}")
            assert response.status == 200 and response.headers["content-type"].startswith("text/html")
            text = page.inner_text("body")
            for shown in [
                '"partner": "A1"',
                '"pv": 7',
                '"uv": 6',
                '"pv_self": 4',
                '"uv_self": 3',
                '"total_pv": 7',
            ]:
                assert shown in text, (language, shown, text[-600:])
            assert all(word in text for word in wants), (language, text[:600])
            page.screenshot(path=SCREENSHOTS / f"api-stats-{language}.png", full_page=True)

            refused = page.goto(f"{live_server.url}/api/v1/partners/A1/stats/?start=yesterday")
            assert refused.status == 400
            text = page.inner_text("body")
            message = {
                "en": "start must be a date as YYYY-MM-DD, not 'yesterday'.",
                "zh": "start 必须是 YYYY-MM-DD 格式的日期，不能是 'yesterday'。",
            }[language]
            assert f'"detail": "{message}"' in text, (language, text[-600:])
            page.screenshot(path=SCREENSHOTS / f"api-refused-{language}.png", full_page=True)
            context.close()
