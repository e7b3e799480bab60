"""The product as the README runs it in production, in a real browser: collectstatic, then gunicorn with the
product's own settings (``DEBUG=0``, a ``SECRET_KEY``), no development server and no front proxy.

Staff log in, the dashboard and a list are styled by the admin's stylesheet, no asset answers an error,
Swagger UI renders the API's schema, and the API opens in the same browser (DRF's browsable API). Screenshots go to ``.run/screenshots/`` for a person to look at.
"""

import gzip
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from django.conf import global_settings
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model

from tests.browser import PAGE_TIMEOUT_MS
from tests.browser.test_admin_browser import chromium
from tests.conftest import ROOT, free_port, subprocess_env

# The pages in a browser, in the MariaDB pass of scripts/test only (tests/browser/__init__.py says why).
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.real_clock,
    pytest.mark.one_pass("mariadb"),
]

SCREENSHOTS = Path(django_settings.RUN_DIR) / "screenshots"
USER = ("operator", "a-long-operator-password")
# The admin's base.css paints the header with --header-bg (#417690); an unstyled page leaves it transparent.
ADMIN_HEADER_BG = "rgb(65, 118, 144)"


class Server(NamedTuple):
    url: str
    static_root: Path


def production_env(settings, static_root: Path, **extra: str) -> dict[str, str]:
    """The environment of the README's production run, on this test's database and Redis prefix."""
    env = subprocess_env(settings, **extra)
    env.pop("CPS_DEMO", None)
    env.update(
        DJANGO_SETTINGS_MODULE="cpsproject.settings",  # the product's settings, not the tests'
        DEBUG="0",
        SECRET_KEY="production-browser-test-" + "k" * 40,
        ALLOWED_HOSTS="127.0.0.1",
        CPS_STATIC_ROOT=str(static_root),
        # Kafka out of reach: nothing a person opens may depend on it.
        KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{free_port()}",
    )
    return env


@pytest.fixture
def gunicorn(settings, tmp_path) -> Iterator[Server]:
    """collectstatic into a fresh folder, then gunicorn on a port the system picks; yield where it serves."""
    static_root = tmp_path / "static"
    env = production_env(settings, static_root)
    manage = [sys.executable, str(ROOT / "manage.py")]
    collected = subprocess.run(
        [*manage, "collectstatic", "--noinput"], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert collected.returncode == 0, collected.stderr
    assert (static_root / "staticfiles.json").exists()  # the manifest of hashed names

    log = tmp_path / "gunicorn.log"
    with log.open("w") as log_file:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "cpsproject.wsgi",
                "-b",
                "127.0.0.1:0",
                "-w",
                "1",
                "--no-control-socket",
            ],
            env=env,
            cwd=ROOT,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        # Bound to port 0: gunicorn logs the port the system picked.
        deadline = time.monotonic() + 30
        while not (found := re.search(r"Listening at: (http://127\.0\.0\.1:\d+)", log.read_text())):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"gunicorn did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield Server(found.group(1), static_root)
    finally:
        server.terminate()
        # gunicorn lets its worker finish for up to its graceful timeout (30 s): on a loaded machine that took
        # more than 10 s (2026-11-27); after it, the test is over either way.
        try:
            server.wait(timeout=35)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_gunicorn_serves_the_admin_styled_and_the_api_docs_rendered(gunicorn, settings):
    # The server runs the product's settings: hash the operator's password with its hasher, not the tests' fast one.
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    get_user_model().objects.create_superuser(USER[0], "operator@example.com", USER[1])
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with chromium() as browser:
        failed_assets = check_pages(browser, gunicorn.url)
    assert failed_assets == []


def check_pages(browser, base: str) -> list[str]:
    """Walk the pages; return every static asset request that failed or answered 4xx/5xx."""
    context = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    assets: list[str] = []
    failed: list[str] = []

    def on_response(response) -> None:
        if "/static/" in response.url:
            assets.append(response.url)
            if response.status >= 400:
                failed.append(f"{response.status} {response.url}")

    page.on("response", on_response)
    page.on("requestfailed", lambda request: failed.append(f"failed {request.url}"))

    page.goto(f"{base}/admin/")
    assert header_background(page) == ADMIN_HEADER_BG
    page.screenshot(path=SCREENSHOTS / "production-1-login.png", full_page=True)
    page.fill("#id_username", USER[0])
    page.fill("#id_password", USER[1])
    page.click("input[type=submit]")
    page.wait_for_selector("#today-pv")
    assert header_background(page) == ADMIN_HEADER_BG
    page.screenshot(path=SCREENSHOTS / "production-2-dashboard.png", full_page=True)

    page.goto(f"{base}/admin/stats/dailystat/")
    page.wait_for_selector("#changelist")
    assert header_background(page) == ADMIN_HEADER_BG
    page.screenshot(path=SCREENSHOTS / "production-3-daily-list.png", full_page=True)

    page.goto(f"{base}/api/v1/docs/")
    page.wait_for_selector(".swagger-ui .opblock")
    assert "CPS partner statistics API" in page.inner_text(".swagger-ui .info .title")
    assert page.locator(".swagger-ui .opblock").count() >= 10  # one block per operation of the schema
    page.screenshot(path=SCREENSHOTS / "production-4-api-docs.png", full_page=True)

    # The API itself opens in the same browser (DRF's browsable API, with DEBUG off too), styled.
    answer = page.goto(f"{base}/api/v1/partners/")
    assert answer.status == 200 and answer.headers["content-type"].startswith("text/html")
    assert page.inner_text("h1") == "Partner list"
    # Bootstrap's grey breadcrumb bar: unstyled, it would be transparent.
    breadcrumb = "getComputedStyle(document.querySelector('.breadcrumb')).backgroundColor"
    assert page.evaluate(breadcrumb) == "rgb(245, 245, 245)"
    page.screenshot(path=SCREENSHOTS / "production-5-api.png", full_page=True)
    context.close()

    # The pages name hashed files (collectstatic's manifest), the admin's stylesheet among them.
    assert any(re.search(r"/static/admin/css/base\.[0-9a-f]{12}\.css$", url) for url in assets), assets
    assert any("/static/drf_spectacular_sidecar/swagger-ui-dist/" in url for url in assets), assets
    assert any(
        re.search(r"/static/rest_framework/css/bootstrap\.min\.[0-9a-f]{12}\.css$", url) for url in assets
    )
    return failed


def header_background(page) -> str:
    return page.evaluate("getComputedStyle(document.querySelector('#header')).backgroundColor")


def test_static_files_are_served_compressed_and_cached_as_immutable(gunicorn):
    css = gunicorn.static_root / "admin" / "css"
    base_css = [name for name in os.listdir(css) if re.fullmatch(r"base\.[0-9a-f]{12}\.css", name)]
    assert len(base_css) == 1
    request = urllib.request.Request(
        f"{gunicorn.url}/static/admin/css/{base_css[0]}", headers={"Accept-Encoding": "gzip"}
    )
    # The first request of a fresh server waits for its worker to load the project and WhiteNoise to index the
    # collected files: seconds on a quiet machine, past 10 s twice under a loaded test run.
    with urllib.request.urlopen(request, timeout=90) as response:
        assert response.status == 200
        assert response.headers["Content-Encoding"] == "gzip"
        # A hashed name changes with its content: browsers may keep it for ten years (WhiteNoise's "forever").
        assert "max-age=315360000" in response.headers["Cache-Control"]
        assert b"--header-bg" in gzip.decompress(response.read())
