"""A partner's own commission rate (basis points): the partners CSV, ``POST partners/``, the admin form."""

import base64

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from partners.models import Partner
from tests.factories import create_staff, create_tree

pytestmark = pytest.mark.django_db


def write(tmp_path, text: str):
    path = tmp_path / "partners.csv"
    path.write_text(text)
    return path


@pytest.fixture
def staff_client():
    create_staff()
    User.objects.get(username="staff").user_permissions.add(Permission.objects.get(codename="add_partner"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Basic " + base64.b64encode(b"staff:pw").decode())
    return client


def rates() -> dict[str, int | None]:
    return dict(Partner.objects.values_list("code", "commission_bp"))


def test_csv_fourth_column_sets_the_rate_and_empty_keeps_the_default(tmp_path):
    text = "code,name,parent,commission_bp\nR,Root,,650\nR1,Child,R,\nR2,Child,R,0\nR3,Child,R,10000\n"
    call_command("import_partners", str(write(tmp_path, text)))
    assert rates() == {"R": 650, "R1": None, "R2": 0, "R3": 10000}


def test_csv_without_the_fourth_column_still_imports(tmp_path):
    call_command("import_partners", str(write(tmp_path, "code,name,parent\nR,Root,\n")))
    assert rates() == {"R": None}


def test_csv_bad_rates_are_refused_naming_their_lines(tmp_path, capsys):
    text = (
        "code,name,parent,commission_bp\n"
        "R,Root,,500\n"  # 2: fine
        "S,Too high,,10001\n"  # 3
        "T,Negative,,-1\n"  # 4
        "U,Decimal,,5.5\n"  # 5
        "V,Three columns,\n"  # 6
    )
    with pytest.raises(CommandError, match="nothing was imported"):
        call_command("import_partners", str(write(tmp_path, text)))
    err = sorted(capsys.readouterr().err.splitlines())
    assert err == [
        "line 3: commission_bp must be whole basis points from 0 to 10000 (or empty for the level's default), "
        "not '10001'",
        "line 4: commission_bp must be whole basis points from 0 to 10000 (or empty for the level's default), "
        "not '-1'",
        "line 5: commission_bp must be whole basis points from 0 to 10000 (or empty for the level's default), "
        "not '5.5'",
        "line 6: expected 4 columns (code,name,parent,commission_bp), found 3",
    ]
    assert rates() == {}


def test_post_sets_the_rate_and_lists_show_it(staff_client):
    create_tree()
    created = staff_client.post(
        "/api/v1/partners/", {"code": "N", "name": "New", "commission_bp": 725}, format="json"
    )
    assert created.status_code == 201 and created.json()["commission_bp"] == 725
    default = staff_client.post("/api/v1/partners/", {"code": "M", "name": "Default"}, format="json")
    assert default.status_code == 201 and default.json()["commission_bp"] is None
    assert rates()["N"] == 725 and rates()["M"] is None
    listed = {p["code"]: p["commission_bp"] for p in staff_client.get("/api/v1/partners/").json()["results"]}
    assert listed["N"] == 725 and listed["A"] is None


@pytest.mark.parametrize("value", [10001, -1, "abc", 2.5])
def test_post_refuses_a_rate_out_of_range_naming_it(staff_client, value):
    response = staff_client.post(
        "/api/v1/partners/", {"code": "N", "name": "New", "commission_bp": value}, format="json"
    )
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid" and set(body) == {"error", "detail", "commission_bp"}
    assert not Partner.objects.filter(code="N").exists()


def test_portal_sees_the_rates_of_its_subtree(capsys):
    tree = create_tree()
    Partner.objects.filter(pk=tree["A1a"].pk).update(commission_bp=900)
    call_command("portal_token", "A1")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {capsys.readouterr().out.split()[-1]}")
    listed = {p["code"]: p["commission_bp"] for p in client.get("/api/v1/partners/").json()["results"]}
    assert listed == {"A1": None, "A1a": 900}


def test_admin_form_creates_and_changes_the_rate(client):
    User.objects.create_superuser("admin", "admin@example.com", "pw")
    client.login(username="admin", password="pw")
    response = client.post(
        "/admin/partners/partner/add/",
        {"code": "N", "name": "New", "commission_bp": "450", "is_active": "on", **_no_children()},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    partner = Partner.objects.get(code="N")
    assert partner.commission_bp == 450 and partner.path == f"/{partner.pk}/"
    response = client.post(
        f"/admin/partners/partner/{partner.pk}/change/",
        {"code": "N", "name": "New", "commission_bp": "", "is_active": "on", **_no_children()},
    )
    assert response.status_code == 302
    assert Partner.objects.get(code="N").commission_bp is None
    refused = client.post(
        f"/admin/partners/partner/{partner.pk}/change/",
        {"code": "N", "name": "New", "commission_bp": "10001", "is_active": "on", **_no_children()},
    )
    assert refused.status_code == 200 and "commission_bp" in refused.context["adminform"].form.errors


def _no_children() -> dict[str, str]:
    """The management form of the (read-only) children inline."""
    return {
        "children-TOTAL_FORMS": "0",
        "children-INITIAL_FORMS": "0",
        "children-MIN_NUM_FORMS": "0",
        "children-MAX_NUM_FORMS": "1000",
    }
