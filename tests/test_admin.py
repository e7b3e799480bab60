"""The admin pages staff use render, with data in them."""

import datetime as dt

import pytest
from django.contrib.auth import get_user_model

from loginlog.services import login_record
from stats.jobs.flush import flush
from tests.factories import create_tree, feed, pv_event

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    get_user_model().objects.create_superuser("boss", "boss@example.com", "pw")
    client.login(username="boss", password="pw")
    return client


@pytest.mark.parametrize(
    "url",
    [
        "/admin/partners/partner/",
        "/admin/stats/dailystat/",
        "/admin/stats/bucketstat/",
        "/admin/stats/deadletter/?reason__exact=unknown_partner",
        "/admin/stats/reconciledrift/",
        "/admin/loginlog/loginmonth/",
    ],
)
def test_admin_lists_render(admin_client, url):
    create_tree()
    now = dt.datetime.now(tz=dt.UTC)
    feed([pv_event(now, "A1"), pv_event(now, "NOPE")], now=now)
    flush(now=now, include_open=True)
    assert admin_client.get(url).status_code == 200


def test_login_activity_page_shows_a_users_calendar_and_dau(admin_client):
    today = dt.date.today()
    login_record(user_type="client", user_id=1001, day=today)
    page = admin_client.get("/admin/loginlog/loginmonth/activity/?user_type=client&user_id=1001")
    assert page.status_code == 200
    assert today.isoformat() in page.content.decode()
    assert "Daily active users" in page.content.decode()
    bad = admin_client.get("/admin/loginlog/loginmonth/activity/?user_type=client&user_id=-3")
    assert "user_id must be an integer" in bad.content.decode()


def test_dead_letters_show_escaped_truncated_payloads_filterable_by_reason_and_date(admin_client, settings):
    from stats.models import DeadLetter

    settings.CPS_STATS = {**settings.CPS_STATS, "MAX_EVENT_BYTES": 2 * 1024 * 1024}
    create_tree()
    now = dt.datetime.now(tz=dt.UTC)
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
    letter = DeadLetter.objects.get(reason="not_utf8")
    detail = admin_client.get(f"/admin/stats/deadletter/{letter.pk}/change/").content.decode()
    assert "AAAA" in detail and len(detail) < 200_000
