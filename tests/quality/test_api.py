"""The quality endpoints as portals and staff read them: shapes, who sees addresses, the findings list."""

import pytest
from django.contrib.auth.models import Permission

from quality.flush import flush_quality
from quality.models import Finding
from tests.factories import at, create_staff, create_tree, feed, portal_client, pv_event, staff_client

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine("2026-11-21T12:40:00+08:00", tick=False)]

DAY = "2026-11-21"
NOON = at("2026-11-21 12:00")


@pytest.fixture
def traffic(settings) -> None:
    settings.CPS_QUALITY = {**settings.CPS_QUALITY, "MIN_VIEWS": 4}
    create_tree()
    # A1: four views from one address, three of them reloads within 30 s; A2 one view
    feed(
        [pv_event(at(f"2026-11-21 10:00:{s:02d}"), "A1", "o-1", ip="203.0.113.7") for s in (0, 10, 20, 30)]
        + [pv_event(at("2026-11-21 10:00:00"), "A2", "o-2", ip="198.51.100.1")],
        now=NOON,
    )
    flush_quality(now=NOON)


def day_of(answer: dict, date: str) -> dict:
    return next(day for day in answer["days"] if day["date"] == date)


def test_staff_read_a_partners_days_with_its_busiest_addresses_and_findings(traffic):
    answer = staff_client().get(f"/api/v1/partners/A1/quality/?start=2026-11-20&end={DAY}").json()
    assert answer["partner"] == "A1"
    assert [d["date"] for d in answer["days"]] == ["2026-11-20", DAY]
    assert day_of(answer, "2026-11-20") == {
        "date": "2026-11-20",
        "pv": 0,
        "automated_pv": 0,
        "repeat_pv": 0,
        "distinct_ips": 0,
        "distinct_networks": 0,
        "top_addresses_share": None,
        "listed_pv": 0,
        "orders_by_view": 0,
        "median_seconds_to_order": None,
        "reconciled": False,
        "subtree": {"pv": 0, "automated_pv": 0, "repeat_pv": 0, "listed_pv": 0, "orders_by_view": 0},
        "findings": [],
        "top_addresses": [],
    }
    assert day_of(answer, DAY) == {
        "date": DAY,
        "pv": 4,
        "automated_pv": 0,
        "repeat_pv": 3,
        "distinct_ips": 1,
        "distinct_networks": 1,
        "top_addresses_share": 1.0,
        "listed_pv": 0,
        "orders_by_view": 0,
        "median_seconds_to_order": None,
        "reconciled": False,
        # A1's subtree is A1 and A1a, which had no views: its own figures.
        "subtree": {"pv": 4, "automated_pv": 0, "repeat_pv": 3, "listed_pv": 0, "orders_by_view": 0},
        # 3 repeats of 4 views = 0.75 > 0.3; one address for every view = 1.0 > 0.5
        "findings": [
            {"rule": "concentration", "value": 1.0, "threshold": 0.5, "status": "open"},
            {"rule": "repeats", "value": 0.75, "threshold": 0.3, "status": "open"},
        ],
        "top_addresses": [{"address": "203.0.113.7", "views": 4}],
    }


def test_a_portal_reads_its_own_signals_but_never_an_address_nor_another_partner(traffic):
    client = portal_client("A1")
    answer = client.get(f"/api/v1/partners/A1/quality/?start={DAY}&end={DAY}")
    assert answer.status_code == 200
    assert "203.0.113" not in answer.content.decode()
    day = answer.json()["days"][0]
    assert "top_addresses" not in day
    assert (day["pv"], day["repeat_pv"], day["top_addresses_share"]) == (4, 3, 1.0)
    # A2 is beside A1, not under it: the same 404 as a code that does not exist.
    outside = client.get(f"/api/v1/partners/A2/quality/?start={DAY}&end={DAY}")
    assert outside.status_code == 404
    assert outside.content == client.get(f"/api/v1/partners/NOPE/quality/?start={DAY}&end={DAY}").content
    assert client.get("/api/v1/quality/findings/").status_code == 403


def test_the_findings_list_is_a_page_filtered_by_partner_and_status(traffic):
    staff = staff_client()
    page = staff.get(f"/api/v1/quality/findings/?start={DAY}&end={DAY}").json()
    assert page["count"] == 2
    assert page["results"][0] == {
        "partner": "A1",
        "date": DAY,
        "rule": "concentration",
        "value": 1.0,
        "threshold": 0.5,
        "status": "open",
        "resolved_by": None,
        "reason": "",
    }
    finding = Finding.objects.get(rule="repeats")
    finding.status, finding.reason = Finding.Status.CLEARED, "a kiosk reloads it"
    finding.resolved_by = create_staff("reviewer", viewer=False)
    finding.save()
    cleared = staff.get(f"/api/v1/quality/findings/?start={DAY}&end={DAY}&status=cleared").json()
    assert [(r["rule"], r["resolved_by"], r["reason"]) for r in cleared["results"]] == [
        ("repeats", "reviewer", "a kiosk reloads it")
    ]
    assert staff.get(f"/api/v1/quality/findings/?start={DAY}&end={DAY}&partner=A2").json()["count"] == 0
    bad = staff.get("/api/v1/quality/findings/?status=maybe")
    assert bad.status_code == 400 and "status" in bad.json()


def test_staff_without_the_quality_permissions_are_told_which(traffic):
    user = create_staff("nobody", viewer=False)
    user.user_permissions.add(Permission.objects.get(codename="view_finding"))
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user)
    refused = client.get(f"/api/v1/partners/A1/quality/?start={DAY}&end={DAY}")
    assert refused.status_code == 403
    assert "quality.view_qualityday" in refused.json()["detail"]
    assert client.get("/api/v1/quality/findings/").status_code == 200


def test_a_range_too_long_is_a_400_naming_it(traffic):
    answer = staff_client().get("/api/v1/partners/A1/quality/?start=2020-01-01&end=2026-11-21")
    assert answer.status_code == 400
    assert set(answer.json()) & {"start", "end"}
