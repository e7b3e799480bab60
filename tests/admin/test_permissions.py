"""Least privilege: statistics are for staff in the "statistics viewers" group (or with its view permissions);
dead letters and partner editing need their own model permissions."""

import importlib

import pytest
from django.apps import apps
from django.contrib.auth.models import Group, Permission
from django.test import Client

from cpsproject.common.viewers import PERMISSIONS
from tests.admin.conftest import CLOCK
from tests.factories import create_staff, create_tree

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine(CLOCK, tick=False)]

STATISTICS = [
    "/admin/stats/dailystat/",
    "/admin/stats/dailystat/export.csv",
    "/admin/stats/bucketstat/",
    "/admin/stats/reconciledrift/",
    "/admin/loginlog/loginmonth/",
    "/admin/loginlog/loginmonth/activity/",
    "/admin/network/A/",
    "/metrics",
]
API = [
    "/api/v1/partners/",
    "/api/v1/partners/A/",
    "/api/v1/partners/A/stats/?start=2026-11-21&end=2026-11-22",
    "/api/v1/partners/A/buckets/?date=2026-11-22",
    "/api/v1/rankings/partners/",
    "/api/v1/series/?partner=A&precision=300&start=2026-11-22T00:00:00%2B08:00&end=2026-11-22T01:00:00%2B08:00",
    "/api/v1/logins/client/7/",
    "/api/v1/logins/active/?user_type=client&start=2026-11-21&end=2026-11-22",
    "/api/v1/logins/counts/?user_type=client",
]
GUARDED = [
    "/admin/stats/deadletter/",
    "/admin/stats/deadletter/export.csv",
    "/admin/partners/partner/add/",
]


def staff_client(*, viewer: bool) -> Client:
    create_tree()
    create_staff(viewer=viewer)
    client = Client()
    client.login(username="staff", password="pw")
    return client


def test_staff_without_the_group_are_refused_every_statistics_page_and_api_read():
    staff = staff_client(viewer=False)
    for url in STATISTICS + API + GUARDED:
        assert staff.get(url).status_code == 403, url
    # The admin's index stays theirs, without a figure and without the statistics models.
    index = staff.get("/admin/")
    assert index.status_code == 200
    assert 'id="today-pv"' not in index.content.decode()
    assert "/admin/stats/dailystat/" not in index.content.decode()
    refused = staff.get("/api/v1/partners/A/stats/?start=2026-11-21&end=2026-11-22").json()
    assert refused["detail"] == (
        "Staff need the permissions stats.view_dailystat (the “statistics viewers” group holds them)."
    )


def test_staff_in_the_group_see_every_statistics_page_and_api_read_but_not_dead_letters():
    staff = staff_client(viewer=True)
    for url in STATISTICS + API:
        assert staff.get(url).status_code == 200, url
    index = staff.get("/admin/").content.decode()
    assert 'id="today-pv"' in index and "/admin/stats/dailystat/" in index
    for url in GUARDED:
        assert staff.get(url).status_code == 403, url
    assert "/admin/stats/deadletter/" not in index and "/admin/partners/partner/add/" not in index


def test_the_group_holds_view_permissions_only():
    staff = staff_client(viewer=True)
    assert staff.get("/admin/partners/partner/").status_code == 200  # read-only: the partner directory
    assert staff.get("/admin/partners/partner/add/").status_code == 403
    assert staff.post("/api/v1/partners/", {"code": "N1", "name": "n"}).status_code == 403
    assert staff.post("/api/v1/logins/", {"user_type": "client", "user_id": 7}).status_code == 403


@pytest.mark.parametrize(("language", "name"), [("zh-hans", "统计查看者"), ("en", "statistics viewers")])
def test_the_migration_ships_the_group_named_in_the_installations_language(settings, language, name):
    settings.LANGUAGE_CODE = language
    Group.objects.all().delete()
    migration = importlib.import_module("stats.migrations.0008_statistics_viewers_group")
    migration.create_group(apps, None)
    migration.create_group(apps, None)  # run twice (a re-applied migration): still one group
    (group,) = Group.objects.all()
    assert group.name == name
    held = {(p.content_type.app_label, p.codename) for p in group.permissions.all()}
    assert held == set(PERMISSIONS)
    assert all(codename.startswith("view_") for _app, codename in held)


def test_statistics_are_read_only_even_for_superusers(admin_client):
    create_tree()
    assert admin_client.get("/admin/stats/dailystat/add/").status_code == 403
    assert admin_client.get("/admin/stats/bucketstat/add/").status_code == 403


def test_model_permissions_open_dead_letters_and_partner_editing(django_user_model):
    staff = staff_client(viewer=False)
    user = django_user_model.objects.get(username="staff")
    user.user_permissions.add(Permission.objects.get(codename="view_deadletter"))
    assert staff.get("/admin/stats/deadletter/").status_code == 200
    assert staff.get("/admin/partners/partner/").status_code == 403
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_partner", "change_partner"]))
    assert staff.get("/admin/partners/partner/").status_code == 200
    assert "/admin/stats/deadletter/" in staff.get("/admin/").content.decode()


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


@pytest.mark.parametrize(("language", "name"), [("zh-hans", "转化查看者"), ("en", "conversions viewers")])
def test_the_conversions_viewers_group_opens_the_money_pages_and_only_them(settings, language, name):
    settings.LANGUAGE_CODE = language
    Group.objects.all().delete()
    migration = importlib.import_module("conversions.migrations.0002_conversions_viewers_group")
    migration.create_group(apps, None)
    migration.create_group(apps, None)
    (group,) = Group.objects.all()
    assert group.name == name
    staff = staff_client(viewer=False)
    user = staff.session.get("_auth_user_id")
    group.user_set.add(user)
    for url in (
        "/admin/conversions/order/",
        "/admin/conversions/ledgerentry/",
        "/admin/conversions/statement/",
        "/admin/conversions/exchangerate/",
        "/api/v1/orders/",
        "/api/v1/partners/A/conversions/",
        "/api/v1/partners/A/statements/",
    ):
        assert staff.get(url).status_code == 200, url
    # Traffic stays the statistics viewers'; held refunds keep the buyer's raw event, like dead letters.
    for url in ("/admin/stats/dailystat/", "/api/v1/partners/A/stats/", "/admin/conversions/heldrefund/"):
        assert staff.get(url).status_code == 403, url


def test_a_refused_money_read_names_the_group_that_holds_its_permissions():
    staff = staff_client(viewer=True)
    refused = staff.get("/api/v1/orders/")
    assert refused.status_code == 403
    assert refused.json()["detail"] == (
        "Staff need the permissions conversions.view_order, conversions.view_ledgerentry "
        "(the “conversions viewers” group holds them)."
    )
