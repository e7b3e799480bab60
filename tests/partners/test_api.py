import base64

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from rest_framework.test import APIClient

from partners.models import Partner
from tests.factories import create_staff, create_tree

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client():
    create_staff()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Basic " + base64.b64encode(b"staff:pw").decode())
    return client


def portal_client(code: str, capsys) -> APIClient:
    call_command("portal_token", code)
    token = capsys.readouterr().out.split()[-1]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def test_staff_lists_every_partner_in_a_page_envelope(staff_client):
    create_tree()
    body = staff_client.get("/api/v1/partners/").json()
    assert body["count"] == 5
    assert {
        "code": "A1",
        "name": "Partner A1",
        "parent": "A",
        "level": 2,
        "is_active": True,
        "commission_bp": None,
    } in body["results"]
    assert set(body) == {"count", "next", "previous", "results"}


def test_list_filters_by_parent_and_level(staff_client):
    create_tree()
    assert [p["code"] for p in staff_client.get("/api/v1/partners/?parent=A").json()["results"]] == [
        "A1",
        "A2",
    ]
    assert [p["code"] for p in staff_client.get("/api/v1/partners/?level=3").json()["results"]] == ["A1a"]
    response = staff_client.get("/api/v1/partners/?level=7")
    assert response.status_code == 400 and "level" in response.json()


def test_anonymous_is_refused():
    # 401 with the challenge that says how to authenticate (the README's error shape; test_api_hostile).
    response = APIClient().get("/api/v1/partners/")
    assert (response.status_code, response.json()["error"]) == (401, "not_authenticated")
    assert response["WWW-Authenticate"] == "Token"


def test_staff_creates_partner_and_gets_400_for_a_fourth_level(staff_client):
    create_tree()
    User.objects.get(username="staff").user_permissions.add(Permission.objects.get(codename="add_partner"))
    created = staff_client.post(
        "/api/v1/partners/", {"code": "A2x", "name": "New", "parent": "A2"}, format="json"
    )
    assert created.status_code == 201 and created.json()["level"] == 3
    too_deep = staff_client.post(
        "/api/v1/partners/", {"code": "Z", "name": "Z", "parent": "A1a"}, format="json"
    )
    assert too_deep.status_code == 400 and "parent" in too_deep.json()
    duplicate = staff_client.post("/api/v1/partners/", {"code": "A", "name": "again"}, format="json")
    assert duplicate.status_code == 400 and "code" in duplicate.json()


def test_portal_token_sees_only_its_subtree(capsys):
    create_tree()
    client = portal_client("A1", capsys)
    listed = client.get("/api/v1/partners/").json()
    assert sorted(p["code"] for p in listed["results"]) == ["A1", "A1a"]
    assert client.get("/api/v1/partners/A1a/").status_code == 200
    assert client.get("/api/v1/partners/A/").status_code == 404
    assert client.get("/api/v1/partners/B/").status_code == 404
    assert client.post("/api/v1/partners/", {"code": "N", "name": "N"}, format="json").status_code == 403


def test_portal_token_command_reuses_the_token(capsys):
    create_tree()
    call_command("portal_token", "B")
    first = capsys.readouterr().out.split()[-1]
    call_command("portal_token", "B")
    assert capsys.readouterr().out.split()[-1] == first
    assert Partner.objects.get(code="B").portal_accounts.count() == 1
