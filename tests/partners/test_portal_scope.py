"""A portal token's scope follows the database at once: nothing about it is remembered between requests.

The API looks the portal's partner up in one query per request (``partners.permissions.portal_partner``); a
revoked token, a portal account pointed elsewhere, a moved or renamed partner take effect on the next request.
"""

import pytest
from rest_framework.authtoken.models import Token

from partners.models import Partner, PortalAccount
from partners.services import partner_move
from tests.factories import create_tree, portal_client

pytestmark = pytest.mark.django_db

DAY = "2026-11-21"


def status(client, code: str) -> int:
    return client.get(f"/api/v1/partners/{code}/stats/?start={DAY}&end={DAY}").status_code


def test_a_revoked_token_stops_working_at_once():
    create_tree()
    client = portal_client("A1")
    assert status(client, "A1") == 200
    Token.objects.filter(user__username="portal-A1").delete()
    refused = client.get(f"/api/v1/partners/A1/stats/?start={DAY}&end={DAY}")
    assert refused.status_code == 401 and refused.json()["error"] == "authentication_failed"


def test_a_portal_account_pointed_at_another_partner_sees_that_subtree_at_once():
    tree = create_tree()
    client = portal_client("A1")
    assert [status(client, code) for code in ("A1", "A1a", "B")] == [200, 200, 404]
    PortalAccount.objects.filter(user__username="portal-A1").update(partner=tree["B"])
    assert [status(client, code) for code in ("A1", "A1a", "B")] == [404, 404, 200]
    PortalAccount.objects.filter(user__username="portal-A1").delete()
    assert status(client, "B") == 403  # a user without a portal account is no portal


def test_a_moved_or_renamed_partner_is_seen_where_it_now_is():
    tree = create_tree()
    top_a, top_b = portal_client("A"), portal_client("B")
    assert [status(top_a, "A1a"), status(top_b, "A1a")] == [200, 404]
    partner_move(partner=tree["A1"], new_parent=tree["B"])
    assert [status(top_a, "A1a"), status(top_b, "A1a")] == [404, 200]
    own = portal_client("A1")
    Partner.objects.filter(code="A1").update(code="A1-renamed")
    assert [status(own, "A1"), status(own, "A1-renamed")] == [404, 200]
