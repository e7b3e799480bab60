"""The admin pages staff use render, with data in them: the numbers on each page are the ones counted.

The pages read the clock (date filters, the login activity's 30 days), so these tests run under a fixed one.
"""

import datetime as dt
from html.parser import HTMLParser

import pytest
from django.contrib.auth import get_user_model

from loginlog.services import login_record, sync_logins
from stats.jobs.flush import flush
from stats.jobs.reconcile import reconcile
from tests.factories import at, create_tree, feed, pv_event

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine("2026-11-22T09:00:00+08:00", tick=False)]

DAY = dt.date(2026, 11, 21)
NOON = at("2026-11-21 12:00")
LATER = at("2026-11-21 13:00")


class _ResultRows(HTMLParser):
    """Collect the change list's rows as {column class: text}, e.g. {"field-pv": "7", ...}."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str]] = []
        self._in_table = False
        self._cell: str | None = None

    def handle_starttag(self, tag, attrs) -> None:
        attrs = dict(attrs)
        if tag == "table" and attrs.get("id") == "result_list":
            self._in_table = True
        elif self._in_table and tag == "tr":
            self.rows.append({})
        elif self._in_table and tag in ("td", "th") and self.rows:
            fields = [c for c in (attrs.get("class") or "").split() if c.startswith("field-")]
            self._cell = fields[0] if fields else None
            if self._cell:
                self.rows[-1][self._cell] = ""

    def handle_endtag(self, tag) -> None:
        if tag == "table" and self._in_table:
            self._in_table = False
        elif tag in ("td", "th"):
            self._cell = None

    def handle_data(self, data) -> None:
        if self._in_table and self._cell and self.rows:
            self.rows[-1][self._cell] += data.strip()


def result_rows(page: str, *columns: str) -> list[tuple[str, ...]]:
    """The change list's rows as tuples of the given columns' texts, in page order."""
    parser = _ResultRows()
    parser.feed(page)
    return [tuple(row.get(f"field-{c}", "<no such column>") for c in columns) for row in parser.rows if row]


@pytest.fixture
def admin_client(client):
    get_user_model().objects.create_superuser("boss", "boss@example.com", "pw")
    client.login(username="boss", password="pw")
    return client


@pytest.fixture
def counted_day():
    """A day of traffic, flushed and reconciled, two dead letters, and a synced login month.

    A1: 4 views by u1 u2 u3 (u1 twice); A1a: 2 views by u4, one of them sent twice (realtime 3, exact 2).
    """
    create_tree()
    feed(
        [
            pv_event(NOON, "A1", "u1"),
            pv_event(NOON, "A1", "u2"),
            pv_event(NOON, "A1", "u3"),
            pv_event(NOON + dt.timedelta(minutes=7), "A1", "u1"),
            pv_event(NOON, "A1a", "u4", event_id="twice"),
            pv_event(NOON, "A1a", "u4"),
            pv_event(NOON, "NOPE"),
            pv_event(NOON, "NOPE"),
        ],
        now=NOON,
    )
    feed([pv_event(NOON, "A1a", "u4", event_id="twice")], now=NOON)
    flush(now=LATER)
    reconcile(day=DAY, now=LATER)
    login_record(user_type="client", user_id=1001, day=DAY)
    login_record(user_type="client", user_id=1001, day=dt.date(2026, 11, 3))
    sync_logins(now=LATER)


def page(admin_client, url: str) -> str:
    response = admin_client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_partner_list_shows_the_tree(admin_client, counted_day):
    rows = result_rows(page(admin_client, "/admin/partners/partner/"), "code", "level")
    assert sorted(rows) == [("A", "1"), ("A1", "2"), ("A1a", "3"), ("A2", "2"), ("B", "1")]


def test_daily_stats_show_each_partners_exact_day(admin_client, counted_day):
    rows = result_rows(
        page(admin_client, "/admin/stats/dailystat/"), "partner", "pv", "uv", "pv_self", "uv_self", "bot_pv"
    )
    assert sorted(rows) == [
        ("A (Partner A)", "6", "4", "0", "0", "0"),
        ("A1 (Partner A1)", "6", "4", "4", "3", "0"),
        ("A1a (Partner A1a)", "2", "1", "2", "1", "0"),
    ]


def test_bucket_stats_show_the_five_minute_rows(admin_client, counted_day):
    rows = result_rows(page(admin_client, "/admin/stats/bucketstat/"), "partner", "pv", "pv_self")
    # Realtime buckets: A1a's duplicate is in them (3), the 12:05 view is a bucket of its own.
    assert sorted(rows) == [
        ("A (Partner A)", "1", "0"),
        ("A (Partner A)", "6", "0"),
        ("A1 (Partner A1)", "1", "1"),
        ("A1 (Partner A1)", "6", "3"),
        ("A1a (Partner A1a)", "3", "3"),
    ]


def test_dead_letters_filtered_by_reason_show_both_unknown_partners(admin_client, counted_day):
    html = page(admin_client, "/admin/stats/deadletter/?reason__exact=unknown_partner")
    rows = result_rows(html, "reason", "payload_head")
    assert len(rows) == 2
    assert all(reason == "unknown partner code" and '"partner": "NOPE"' in head for reason, head in rows)
    assert "2 dead letters" in html


def test_reconcile_drift_shows_realtime_against_exact(admin_client, counted_day):
    rows = result_rows(
        page(admin_client, "/admin/stats/reconciledrift/"), "partner", "realtime_pv", "exact_pv", "pv_drift"
    )
    assert sorted(rows) == [
        ("A (Partner A)", "7", "6", "-1"),
        ("A1 (Partner A1)", "7", "6", "-1"),
        ("A1a (Partner A1a)", "3", "2", "-1"),
    ]


def test_login_months_show_the_days_logged_in(admin_client, counted_day):
    rows = result_rows(
        page(admin_client, "/admin/loginlog/loginmonth/"), "user_type_shown", "user_id", "login_days"
    )
    assert rows == [("client", "1001", "3, 21")]


def test_login_activity_page_shows_a_users_calendar_and_dau(admin_client):
    today = dt.date(2026, 11, 22)  # the fixed clock's business day
    login_record(user_type="client", user_id=1001, day=today)
    login_record(user_type="client", user_id=1002, day=today)
    login_record(user_type="client", user_id=1001, day=DAY)
    response = admin_client.get("/admin/loginlog/loginmonth/activity/?user_type=client&user_id=1001")
    assert response.status_code == 200
    html = response.content.decode()
    assert today.isoformat() in html
    assert "Daily active users" in html
    assert "client 1001</strong>: 2 days" in html and DAY.isoformat() in html
    assert [(day, count) for day, count, _ in response.context["dau"]["client"][-3:]] == [
        (DAY - dt.timedelta(days=1), 0),
        (DAY, 1),
        (today, 2),
    ]
    bad = admin_client.get("/admin/loginlog/loginmonth/activity/?user_type=client&user_id=-3")
    assert "user_id must be an integer" in bad.content.decode()


def test_dead_letters_show_escaped_truncated_payloads_filterable_by_reason_and_date(admin_client, settings):
    from stats.models import DeadLetter

    settings.CPS_STATS = {**settings.CPS_STATS, "MAX_EVENT_BYTES": 2 * 1024 * 1024}
    create_tree()
    now = at("2026-11-22 08:59")
    script = (
        b'{"event_id":"x","type":"pv","ts":"'
        + now.isoformat().encode()
        + b'","partner":"<script>alert(1)</script>"}'
    )
    huge = b'{"event_id":"big","junk":"' + b"A" * 1_000_000 + b'"\xff}'
    feed([script, huge], now=now)
    assert DeadLetter.objects.count() == 2
    page = admin_client.get("/admin/stats/deadletter/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page
    assert "1000029" in page.replace(",", "")  # 26 + 1,000,000 + 3 bytes: the size is shown, not the megabyte
    assert len(page) < 200_000
    assert "AAAA" in page and "A" * 2000 not in page
    by_reason = admin_client.get("/admin/stats/deadletter/?reason__exact=not_utf8").content.decode()
    assert "1000029" in by_reason.replace(",", "") and "alert(1)" not in by_reason
    # The date filter's "Today" link: business midnights.
    today = admin_client.get(
        "/admin/stats/deadletter/",
        {"received_at__gte": "2026-11-22 00:00:00+08:00", "received_at__lt": "2026-11-23 00:00:00+08:00"},
    )
    assert len(result_rows(today.content.decode(), "reason")) == 2
    letter = DeadLetter.objects.get(reason="not_utf8")
    detail = admin_client.get(f"/admin/stats/deadletter/{letter.pk}/change/").content.decode()
    assert "AAAA" in detail and len(detail) < 200_000


def login_month_url(admin_client) -> str:
    from loginlog.models import LoginMonth

    return f"/admin/loginlog/loginmonth/{LoginMonth.objects.get().pk}/change/"


def test_a_login_month_is_a_view_page_listing_the_dates(admin_client, counted_day):
    html = page(admin_client, login_month_url(admin_client))
    assert "View login month" in html
    # Days 3 and 21 of November: dates, not the bitmask 2**2 + 2**20 = 1048580.
    assert "11/03/2026, 11/21/2026" in html and "1048580" not in html
    assert 'name="_save"' not in html and "deletelink" not in html
    # The index offers to view the login months, not to change them.
    index = page(admin_client, "/admin/")
    row = index[index.index('href="/admin/loginlog/loginmonth/"') :]
    row = row[: row.index("</tr>")]
    assert "viewlink" in row and "changelink" not in row
    assert admin_client.post(login_month_url(admin_client), {"days": "1"}).status_code == 403


def test_login_months_are_filtered_by_month_not_by_day(admin_client, counted_day):
    html = page(admin_client, "/admin/loginlog/loginmonth/")
    assert "Past 7 days" not in html and "Today" not in html
    assert 'href="?month=2026-11"' in html and ">November 2026</a>" in html
    assert result_rows(html, "month_shown") == [("November 2026",)]
    assert result_rows(page(admin_client, "/admin/loginlog/loginmonth/?month=2026-11"), "user_id") == [
        ("1001",)
    ]
    assert result_rows(page(admin_client, "/admin/loginlog/loginmonth/?month=2026-10"), "user_id") == []


def test_login_pages_in_chinese_name_types_months_and_days_in_chinese(settings, admin_client, counted_day):
    settings.LANGUAGE_CODE = "zh-hans"
    html = page(admin_client, "/admin/loginlog/loginmonth/")
    assert result_rows(html, "user_type_shown", "month_shown", "login_days") == [
        ("客户", "2026年11月", "3, 21")
    ]
    view = page(admin_client, login_month_url(admin_client))
    assert "2026年11月3日, 2026年11月21日" in view and "客户 1001，2026年11月" in view
    activity = page(admin_client, "/admin/loginlog/loginmonth/activity/?user_type=client&user_id=1001")
    assert "客户 1001</strong>: 2 天" in activity and "day(s)" not in activity
