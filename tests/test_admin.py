"""The admin pages staff use render, with data in them."""

import datetime as dt

import pytest
from django.contrib.auth import get_user_model

from loginlog.services import login_record
from stats.flush import flush
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
