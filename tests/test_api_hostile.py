"""The API under hostile input and hostile callers: calendar edges, Unicode digits, deep JSON, probing portal
tokens, staff without model permissions, password guessing, and pages over many active users."""

import base64

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from partners.models import Partner
from partners.services import portal_token_issue
from tests.factories import create_staff, create_tree

pytestmark = pytest.mark.django_db

API = "/api/v1/"


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def grant(user, *codenames: str):
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return get_user_model().objects.get(pk=user.pk)  # a fresh object: permissions are cached per instance


@pytest.fixture
def tree():
    return create_tree()


@pytest.fixture
def staff(tree) -> APIClient:
    return token_client(create_staff())


@pytest.fixture
def portal(tree) -> APIClient:
    """The portal of A1, whose subtree is A1 and A1a."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {portal_token_issue(partner=tree['A1'])}")
    return client


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


# --- The existence oracle and model permissions -----------------------------------------------------------

PROBES = [
    {"code": "B", "name": "exists outside the subtree"},
    {"code": "A1", "name": "exists inside the subtree"},
    {"code": "NEW", "name": "missing parent", "parent": "NOPE"},
    {"code": "NEW", "name": "parent outside the subtree", "parent": "A2"},
    {"code": "NEW", "name": "a valid partner under its own", "parent": "A1"},
    {"code": "bad code!", "name": ""},
]


def test_a_portal_token_learns_nothing_from_creating_partners(portal):
    answers = {
        (r.status_code, r.content) for r in (portal.post(API + "partners/", p, format="json") for p in PROBES)
    }
    assert len(answers) == 1
    status, body = answers.pop()
    assert status == 403 and b"exist" not in body
    assert not Partner.objects.filter(code="NEW").exists()


def test_staff_without_add_partner_cannot_create_partners(tree):
    staff = create_staff()
    refused = token_client(staff).post(API + "partners/", {"code": "N1", "name": "N"}, format="json")
    assert refused.status_code == 403
    assert "partners.add_partner" in refused.json()["detail"]
    # Refused before validation: a duplicate code gets the same 403, not "already exists".
    duplicate = token_client(staff).post(API + "partners/", {"code": "A", "name": "N"}, format="json")
    assert (duplicate.status_code, duplicate.json()) == (403, refused.json())
    created = token_client(grant(staff, "add_partner")).post(
        API + "partners/", {"code": "N1", "name": "N", "parent": "A2"}, format="json"
    )
    assert created.status_code == 201 and created.json()["level"] == 3
    assert Partner.objects.filter(code="N1").count() == 1


def test_a_superuser_creates_partners_without_explicit_permissions(tree):
    boss = get_user_model().objects.create_superuser("boss", "boss@example.com", "pw")
    created = token_client(boss).post(API + "partners/", {"code": "N2", "name": "N"}, format="json")
    assert created.status_code == 201


def test_recording_a_login_needs_the_add_loginmonth_permission(tree):
    staff = create_staff()
    body = {"user_type": "client", "user_id": 7, "date": "2026-11-21"}
    assert token_client(staff).post(API + "logins/", body, format="json").status_code == 403
    assert (
        token_client(grant(staff, "add_loginmonth")).post(API + "logins/", body, format="json").status_code
        == 201
    )
