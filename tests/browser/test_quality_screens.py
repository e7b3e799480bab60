"""Traffic quality in a real browser, in English and in Chinese: screenshots for a person to look at.

The simulated week of ``quality.simulation`` (three honest partners, a bot farm, a reloader, a listed /24, a
cookie stuffer, a spike and a drop) written by ``simulate_quality``, replayed day by day by ``consume --source
file:`` with the clock on each day, flushed, and the judged day reconciled. The clock stands at the moment
the simulation is looked at (21:07 of the judged day, yesterday) while a reviewer (a statistics viewer who may
resolve findings) opens the dashboard, the reloader's partner page, the traffic to review, one finding's
resolve form, the list of partner-days and the quality API in DRF's browsable renderer, then resolves one
finding through its form. Every page fits a 1366-pixel screen, shows the flagged partners with their values
(shares as percentages, counts grouped, values against the side of their threshold), and in Chinese carries
none of the English words of its headings (in any case). The reloader has a descendant: its page adds a line of
the subtree's sums under each day, and its panel shows every finding, whole, at 1280 and 1440 pixels (no column
scrolled out of sight) and at 1024 (the numbers scroll, the findings stay in sight). Screenshots go to
``.run/screens/<language>/quality-*`` (``CPS_SCREENS``).
"""

import datetime as dt
import os
from pathlib import Path

import pytest
import time_machine
from django.conf import settings
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.utils import timezone

from cpsproject.common.timeutil import local_day
from partners.models import Partner
from quality.flush import flush_quality
from quality.models import Finding, QualityDay
from quality.simulation import PARTNERS, looked_at
from stats.jobs.reconcile import reconcile
from tests.browser import PAGE_TIMEOUT_MS
from tests.browser.test_admin_browser import WIDTH, chromium, fits
from tests.factories import create_partner, create_staff

# The pages in a browser, in the MariaDB pass of scripts/test only (tests/browser/__init__.py says why).
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.real_clock,
    pytest.mark.one_pass("mariadb"),
]

SCREENS = Path(os.environ.get("CPS_SCREENS") or Path(settings.RUN_DIR) / "screens")
BIG_DAY_BACK = 3
# The browsable API's titles: the JSON stays in the contract's English keys, the page around it does not.
API_TITLES = {
    "en": {
        "quality-5-api-partner": "Traffic quality of a partner",
        "quality-6-api-findings": "Traffic to review",
    },
    "zh-hans": {"quality-5-api-partner": "导流商的流量质量", "quality-6-api-findings": "待审核流量"},
}
REVIEWER = ("reviewer", "pw-reviewer")
# The reloader's descendant, its days as the flush writes them (by days back from the judged day): beside the
# reloader's own 200 views (199 repeats, every one with an address; the simulation), and alone the day before.
SUB_SHOP = "SUBSHOP"
SUB_SHOP_DAYS = {
    0: {
        "pv": 50,
        "automated_pv": 10,
        "repeat_pv": 5,
        "addressed_pv": 40,
        "listed_pv": 8,
        "orders_by_view": 2,
    },
    1: {"pv": 30, "automated_pv": 3, "addressed_pv": 30},
}
# Windows the partner panel must fit whole (the admin's navigation open beside it), and one narrower (a small
# laptop, or a larger screen zoomed in) where the table may scroll but the findings may not.
FITTING_WIDTHS = (1280, 1440)
NARROW_WIDTH = 1024
# Words of the quality headings and panels that must not stay English on a Chinese page (in any case).
ENGLISH = [
    "Traffic quality",
    "finding",
    "Spikes",
    "views",
    "busiest",
    "evidence",
    "automated",
    "repeat",
    "order",
    "Partner",
    "threshold",
    "rules broken",
    "share",
]


def seed_week(day: dt.date, tmp_path: Path) -> None:
    """The simulated week through the commands, each day consumed with the clock on it, then flushed."""
    week, networks = tmp_path / "week.jsonl", tmp_path / "networks.csv"
    call_command("simulate_quality", "--date", f"{day}", "--to", f"file:{week}", "--networks", f"{networks}")
    call_command("import_networks", f"{networks}")
    for code in PARTNERS:
        create_partner(code, name=f"Shop {code}")
    by_day: dict[str, list[bytes]] = {}
    for line in week.read_bytes().splitlines():
        by_day.setdefault(line.split(b'"ts":"')[1][:10].decode(), []).append(line)
    for date, lines in sorted(by_day.items()):
        part = tmp_path / f"{date}.jsonl"
        part.write_bytes(b"\n".join(lines) + b"\n")
        moment = (
            looked_at(day) if date == f"{day}" else looked_at(dt.date.fromisoformat(date)).replace(hour=23)
        )
        with time_machine.travel(moment, tick=False):
            call_command("consume", "--source", f"file:{part}")
            flush_quality(now=moment)


def test_traffic_quality_reads_in_both_languages(live_server, settings, tmp_path):
    SCREENS.mkdir(parents=True, exist_ok=True)
    settings.RUN_DIR = tmp_path
    day = local_day(timezone.now()) - dt.timedelta(days=1)
    seed_week(day, tmp_path)
    reconcile(day=day, now=looked_at(day) + dt.timedelta(hours=5))
    user = create_staff(*REVIEWER)
    user.user_permissions.add(Permission.objects.get(codename="change_finding"))
    finding = Finding.objects.get(partner__code="RELOADER", rule="repeats").pk
    # What each language's reviewer resolves at the end of the walk: the bot farm confirmed, the rotator cleared.
    resolved = {
        "en": (Finding.objects.get(partner__code="BOTFARM").pk, "confirmed"),
        "zh-hans": (Finding.objects.get(partner__code="ROTATOR").pk, "cleared"),
    }
    # An earlier day of the reloader, large and honest, as the flush writes one: counts must read grouped.
    QualityDay.objects.create(
        partner=Partner.objects.get(code="RELOADER"),
        date=day - dt.timedelta(days=BIG_DAY_BACK),
        pv=12345,
        automated_pv=1234,
        addressed_pv=12345,
        distinct_ips=9876,
        distinct_networks=5432,
    )
    reloader = Partner.objects.get(code="RELOADER")
    sub_shop = create_partner(SUB_SHOP, parent=reloader, name="Sub shop")
    for back, counts in SUB_SHOP_DAYS.items():
        QualityDay.objects.create(partner=sub_shop, date=day - dt.timedelta(days=back), **counts)
    with time_machine.travel(looked_at(day), tick=True), chromium() as browser:
        for language in ("en", "zh-hans"):
            walk(browser, live_server.url, language, finding, day - dt.timedelta(days=BIG_DAY_BACK))
            resolve_one(browser, live_server.url, language, *resolved[language])


def walk(browser, base: str, language: str, finding: int, big_day: dt.date) -> None:
    context = browser.new_context(locale="en-US", viewport={"width": WIDTH, "height": 900})
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(f"{base}/admin/")
    page.fill("#id_username", REVIEWER[0])
    page.fill("#id_password", REVIEWER[1])
    page.click("input[type=submit]")
    page.wait_for_selector("#quality-panel")
    if page.locator("#language-select").input_value() != language:
        with page.expect_navigation():
            page.select_option("#language-select", language)
    shots = SCREENS / language
    shots.mkdir(parents=True, exist_ok=True)
    pages = [
        ("quality-1-dashboard", "/admin/"),
        ("quality-2-partner-page", "/admin/network/RELOADER/"),
        ("quality-2b-stuffer-page", "/admin/network/STUFFER/"),
        ("quality-3-to-review", "/admin/quality/finding/"),
        ("quality-4-resolve", f"/admin/quality/finding/{finding}/change/"),
        ("quality-4b-days", "/admin/quality/qualityday/"),
        ("quality-5-api-partner", "/api/v1/partners/RELOADER/quality/"),
        ("quality-6-api-findings", "/api/v1/quality/findings/"),
    ]
    for name, path in pages:
        page.goto(f"{base}{path}")
        page.screenshot(path=shots / f"{name}.png", full_page=True)
        page.screenshot(path=shots / f"{name}-top.png")  # the first screen, at its size: easier to look at
        assert fits(page), name
        CHECKS[name](page, language, big_day)
        if name.startswith("quality-5") or name.startswith("quality-6"):
            assert page.inner_text(".page-header h1") == API_TITLES[language][name], name
        elif language != "en":
            text = page.inner_text("#content").lower()  # headings are upper-cased by the admin's CSS
            assert not [word for word in ENGLISH if word.lower() in text], name
    for width in (*FITTING_WIDTHS, NARROW_WIDTH):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{base}/admin/network/RELOADER/")
        page.locator("#quality-partner").screenshot(path=shots / f"quality-2-partner-panel-{width}.png")
        assert fits(page), width
        # Both findings of the judged day, each whole where the reader sees it.
        assert len(cells(page, "#quality-days td.findings .finding")) == 2
        assert findings_in_sight(page) == cells(page, "#quality-days td.findings .finding"), width
        if width in FITTING_WIDTHS:
            assert page.evaluate(TABLE_IN_ITS_BOX), width
    context.close()


def resolve_one(browser, base: str, language: str, finding: int, status: str) -> None:
    """Resolve a finding through its form; the list then says so and shows who resolved it."""
    context = browser.new_context(locale="en-US", viewport={"width": WIDTH, "height": 900})
    page = context.new_page()
    page.goto(f"{base}/admin/")
    page.fill("#id_username", REVIEWER[0])
    page.fill("#id_password", REVIEWER[1])
    page.click("input[type=submit]")
    if page.locator("#language-select").input_value() != language:
        with page.expect_navigation():
            page.select_option("#language-select", language)
    page.goto(f"{base}/admin/quality/finding/{finding}/change/")
    page.select_option("#id_status", status)
    page.fill("#id_reason", "checked the addresses")
    with page.expect_navigation():
        page.click("input[name=_save]")
    shots = SCREENS / language
    page.screenshot(path=shots / "quality-7-resolved.png", full_page=True)
    assert fits(page)
    row = page.locator("#result_list tbody tr", has=page.locator(f"a[href$='/{finding}/change/']"))
    assert cells(row, "td.field-status") == [{"en": status, "zh-hans": "已排除"}[language]]
    assert cells(row, "td.field-resolved_column")[0].split()[0] == REVIEWER[0]
    context.close()


def cells(page, selector: str) -> list[str]:
    return [text.strip() for text in page.locator(selector).all_inner_texts()]


# The quality table no wider than the box it scrolls in: every column in sight.
TABLE_IN_ITS_BOX = (
    "(box => box.scrollWidth <= box.clientWidth)(document.querySelector('#quality-partner .cps-scroll'))"
)
# Each finding whose whole box lies inside its scrolling box and the window, and is what the reader sees at its
# middle (not covered by the numbers scrolling under it); the page scrolled down to it, the table left as it is.
FINDINGS_IN_SIGHT = """() => {
  const box = document.querySelector('#quality-partner .cps-scroll'), seen = [];
  for (const finding of document.querySelectorAll('#quality-days td.findings .finding')) {
    window.scrollBy(0, finding.getBoundingClientRect().top - innerHeight / 2);
    const edge = box.getBoundingClientRect(), f = finding.getBoundingClientRect();
    const right = Math.min(innerWidth, edge.left + box.clientWidth);
    const top = document.elementFromPoint((f.left + f.right) / 2, (f.top + f.bottom) / 2);
    if (f.left >= edge.left && f.right <= right && finding.contains(top)) seen.push(finding.innerText.trim());
  }
  return seen;
}"""


def findings_in_sight(page) -> list[str]:
    return page.evaluate(FINDINGS_IN_SIGHT)


def line(page, selector: str) -> list[str]:
    """A table row's cells as a reader sees them: a count and its share on one line, "10 4%"."""
    return [" ".join(text.split()) for text in page.locator(selector).locator("th, td").all_inner_texts()]


def dashboard(page, language: str, big_day: dt.date) -> None:
    """The open findings, the partners with most and what they broke, the spike and the drop with their factor."""
    # The English walk ends by confirming the bot farm's finding: the Chinese one sees five open.
    worst = (
        ["RELOADER", "STUFFER", "BOTFARM", "ROTATOR"]
        if language == "en"
        else ["RELOADER", "STUFFER", "ROTATOR"]
    )
    assert cells(page, "#quality-worst tbody th") == worst
    assert cells(page, "#quality-worst td.count") == ["2", "2", "1", "1"][: len(worst)]
    rules = cells(page, "#quality-worst td.rules")[0]  # the reloader's: address concentration, repeat views
    assert len(rules.split(",")) == 2
    assert page.locator("#quality-open").inner_text().split()[0] == ("6" if language == "en" else "5")
    assert cells(page, "#quality-changes tbody th") == ["SPIKER", "DROPPER"]
    assert [c.split()[-1] for c in cells(page, "#quality-changes td.change")] == ["×5", "÷15"]
    assert cells(page, "#quality-changes td.views") == ["600", "20"]
    assert cells(page, "#quality-changes td.median") == ["120", "300"]


def partner_page(page, language: str, big_day: dt.date) -> None:
    """The reloader's day: counts grouped, shares as percentages, its findings against their thresholds, and
    the evidence: its one busiest address with every view; a large partner's earlier day grouped by thousands."""
    day = page.locator("#quality-days tbody tr[data-date]:not(.evidence)").first
    assert day.locator("td.pv").inner_text() == "200"
    assert day.locator("td.repeats").inner_text().split() == ["199", "99.5%"]
    assert day.locator("td.top-share").inner_text() == "100%"
    found = [text.split("·")[0].split()[-3:] for text in cells(day, "td.findings .finding")]
    assert found == [["100%", "(>", "50%)"], ["99.5%", "(>", "30%)"]]
    busiest = page.locator("tr.evidence .busiest tbody tr").first
    assert cells(busiest, "td") == ["198.18.0.7", "200", "100%"]
    big = page.locator(f"#quality-days tr[data-date='{big_day}']:not(.evidence)")
    assert big.locator("td.pv").inner_text() == "12,345"
    assert big.locator("td.automated").inner_text().split() == ["1,234", "10%"]
    subtree_lines(page, language, big_day)


def subtree_lines(page, language: str, big_day: dt.date) -> None:
    """Under each day, the reloader and its sub shop added up: the judged day's 200 + 50 views, 0 + 10 automated
    (4%), 199 + 5 repeats (81.6%), 0 + 8 listed of 200 + 40 addressed (3.3%), 0 + 2 orders; the day before only
    the sub shop's (the reloader's own line 0); the large day only the reloader's. Addresses and networks, the
    busiest share and the median stay the partner's own."""
    judged = big_day + dt.timedelta(days=BIG_DAY_BACK)
    before = judged - dt.timedelta(days=1)
    label, own_only = {"en": ("with descendants", "own only"), "zh-hans": ("含下级合计", "仅自身")}[language]
    subtree = "#quality-days tr.subtree[data-subtree-date='{}']"
    seen_lines = {
        judged: [label, "250", "10 4%", "204 81.6%", own_only, "8 3.3%", "2", "-", ""],
        before: [label, "30", "3 10%", "0 0%", own_only, "0 0%", "0", "-", ""],
    }
    for date, seen in seen_lines.items():
        assert line(page, subtree.format(date)) == seen, date
    assert line(page, f"#quality-days tr[data-date='{before}']:not(.evidence)")[:2] == [f"{before}", "0"]
    assert line(page, subtree.format(big_day))[1:3] == ["12,345", "1,234 10%"]
    assert page.locator("#quality-subtree-note").is_visible()


def stuffer_page(page, language: str, big_day: dt.date) -> None:
    """The cookie stuffer's evidence: its 30 orders all under 10 s after the view, a median of 3 s."""
    day = page.locator("#quality-days tbody tr[data-date]:not(.evidence)").first
    assert (day.locator("td.orders").inner_text(), day.locator("td.median").inner_text()) == ("30", "3")
    assert cells(page, "tr.evidence .to-order tbody td") == ["30", "0", "0", "0", "0", "0"]


def to_review(page, language: str, big_day: dt.date) -> None:
    """Every finding with its value in its rule's unit and the side of the threshold that breaks it."""
    rows = [
        [cells(row, "th")[0], *cells(row, "td.field-value_column"), *cells(row, "td.field-threshold_column")]
        for row in page.locator("#result_list tbody tr").all()
    ]
    assert rows == [
        ["BOTFARM", "40%", "> 20%"],
        ["RELOADER", "100%", "> 50%"],
        ["RELOADER", "99.5%", "> 30%"],
        ["ROTATOR", "100%", "> 20%"],
        ["STUFFER", "×10", "> ×5"],
        ["STUFFER", *(["3 s", "< 10 s"] if language == "en" else ["3 秒", "< 10 秒"])],
    ]
    assert page.locator("#quality-list-help").is_visible()


def resolve(page, language: str, big_day: dt.date) -> None:
    """The reloader's repeats: how to resolve it, its value against the threshold, the evidence in words."""
    assert page.locator("#quality-resolve-help li").count() == 2
    assert page.locator(".field-value_column .readonly").inner_text() == "99.5%"
    assert page.locator(".field-threshold_column .readonly").inner_text() == "> 30%"
    evidence = page.locator(".field-evidence .readonly").inner_text()
    assert "99.5%" in evidence and "198.18.0.7 (200)" in evidence
    assert "RELOADER" in page.locator("#content h2").inner_text()


def days_list(page, language: str, big_day: dt.date) -> None:
    """Every partner-day's signals: the large day's counts grouped, its share a percentage."""
    row = page.locator("#result_list tbody tr", has_text="12,345")
    assert cells(row, "td.field-automated_column") == ["1,234 (10%)"]
    assert cells(row, "td.field-top_share") == ["0%"]
    assert cells(row, "td.field-date_column") == [f"{big_day}"]  # not reconciled: no mark
    reconciled = page.locator("#result_list tbody tr", has_text="RELOADER").first
    assert cells(reconciled, "td.field-date_column")[0].endswith("✓")


def api_partner(page, language: str, big_day: dt.date) -> None:
    """The reloader's days as JSON: the shares stay fractions (the contract), the title in the reader's language."""
    text = page.inner_text("#content")
    assert '"top_addresses_share": 1.0' in text and '"repeat_pv": 199' in text


def api_findings(page, language: str, big_day: dt.date) -> None:
    text = page.inner_text("#content")
    assert '"count": 6' in text and '"partner": "STUFFER"' in text


CHECKS = {
    "quality-1-dashboard": dashboard,
    "quality-2-partner-page": partner_page,
    "quality-2b-stuffer-page": stuffer_page,
    "quality-3-to-review": to_review,
    "quality-4-resolve": resolve,
    "quality-4b-days": days_list,
    "quality-5-api-partner": api_partner,
    "quality-6-api-findings": api_findings,
}
