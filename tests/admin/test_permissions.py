"""Statistics are for every staff user; dead letters and partner editing need their model permissions."""

import pytest
from django.contrib.auth.models import Permission

from tests.admin.conftest import CLOCK
from tests.factories import create_staff, create_tree

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine(CLOCK, tick=False)]

STATISTICS = [
    "/admin/",
    "/admin/stats/dailystat/",
    "/admin/stats/dailystat/export.csv",
    "/admin/stats/bucketstat/",
    "/admin/stats/reconciledrift/",
    "/admin/loginlog/loginmonth/",
    "/admin/network/A/",
]
GUARDED = [
    "/admin/stats/deadletter/",
    "/admin/stats/deadletter/export.csv",
    "/admin/partners/partner/",
    "/admin/partners/partner/add/",
]


@pytest.fixture
def plain_staff(client):
    create_tree()
    create_staff()
    client.login(username="staff", password="pw")
    return client


def test_staff_without_permissions_read_statistics_but_not_dead_letters_or_partners(plain_staff):
    for url in STATISTICS:
        assert plain_staff.get(url).status_code == 200, url
    for url in GUARDED:
        assert plain_staff.get(url).status_code == 403, url
    index = plain_staff.get("/admin/").content.decode()
    assert "/admin/stats/dailystat/" in index
    assert "/admin/stats/deadletter/" not in index and "/admin/partners/partner/" not in index


def test_statistics_are_read_only_even_for_superusers(admin_client):
    create_tree()
    assert admin_client.get("/admin/stats/dailystat/add/").status_code == 403
    assert admin_client.get("/admin/stats/bucketstat/add/").status_code == 403


def test_model_permissions_open_dead_letters_and_partner_editing(plain_staff, django_user_model):
    user = django_user_model.objects.get(username="staff")
    user.user_permissions.add(Permission.objects.get(codename="view_deadletter"))
    assert plain_staff.get("/admin/stats/deadletter/").status_code == 200
    assert plain_staff.get("/admin/partners/partner/").status_code == 403
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_partner", "change_partner"]))
    assert plain_staff.get("/admin/partners/partner/").status_code == 200
    assert "/admin/stats/deadletter/" in plain_staff.get("/admin/").content.decode()


def test_people_who_are_not_staff_are_sent_to_the_login_page(client, django_user_model):
    create_tree()
    django_user_model.objects.create_user("visitor", password="pw")
    client.login(username="visitor", password="pw")
    for url in ["/admin/", "/admin/network/A/", "/admin/stats/dailystat/export.csv"]:
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], url


def test_the_header_links_to_the_dashboard_and_not_to_a_missing_site(admin_client):
    html = admin_client.get("/admin/stats/dailystat/").content.decode()
    assert '<a href="/admin/">Dashboard</a>' in html
    assert "View site" not in html
    assert admin_client.get("/").status_code == 404  # the page "View site" used to lead to
