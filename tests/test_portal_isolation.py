"""A partner portal's token reads nothing outside its partner's subtree, on every endpoint and in every format.

The tree: TOP1 ─ MINE ─ MINEKID, TOP1 ─ SIBLING, and RIVAL alone. The portal of MINE sees MINE (2 own PV)
and MINEKID (3 PV): every number it may read is 0, 1, 2, 3 or 5. SIBLING (11 PV) and RIVAL (13 PV) have
traffic too, so their numbers (11, 13, TOP1's 16, the site's 29) and their codes would show in any answer
that leaked them. Staff, asking the same, do see them: the data the portal must not read is there.
"""

import csv
import io
import json

import pytest
from rest_framework.test import APIClient

from cpsproject.common.timeutil import local_day
from loginlog.services import login_record
from partners.services import portal_token_issue
from tests.factories import at, create_partner, feed, pv_event, staff_client

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine("2026-11-21T12:40:00+08:00", tick=False)]

DAY = "2026-11-21"
OTHERS = ["TOP1", "SIBLING", "RIVAL"]
ALLOWED_NUMBERS = {0, 1, 2, 3, 5}
FORBIDDEN_NUMBERS = {11, 13, 16, 29}

# (url, status): every GET a portal might try on its own subtree, and what it gets.
OWN = [
    ("partners/", 200),
    ("partners/?parent=MINE", 200),
    ("partners/?level=3", 200),
    ("partners/MINE/", 200),
    ("partners/MINEKID/", 200),
    (f"partners/MINE/stats/?start={DAY}&end={DAY}", 200),
    (f"partners/MINEKID/stats/?start={DAY}&end={DAY}", 200),
    ("partners/MINE/stats/", 200),
    (f"partners/MINE/buckets/?date={DAY}", 200),
    (f"partners/MINEKID/buckets/?date={DAY}", 200),
    ("rankings/partners/?window=1h", 200),
    ("rankings/partners/?window=24h&scope=self", 200),
    ("rankings/partners/?window=7d&limit=1000", 200),
    (f"series/?partner=MINE&precision=60&start={DAY}&end={DAY}", 200),
    (f"series/?partner=MINEKID&precision=3600&start={DAY}&end={DAY}", 200),
    ("series/?partner=MINE&precision=86400", 200),
    # Asking about partners above or beside the subtree must not even confirm they exist.
    ("partners/?parent=TOP1", 200),
    ("series/?precision=60", 400),  # the site-wide series is staff only
    # The login endpoints are staff only.
    ("logins/client/1001/", 403),
    (f"logins/active/?start={DAY}&end={DAY}", 403),
    ("logins/counts/?user_type=client", 403),
]
CSV_CAPABLE = ("partners/MINE/stats", "partners/MINEKID/stats", "partners/MINE/buckets", "rankings", "series")
OUTSIDE = [
    (url.replace("{code}", code), 404)
    for code in OTHERS
    for url in [
        "partners/{code}/",
        f"partners/{{code}}/stats/?start={DAY}&end={DAY}",
        f"partners/{{code}}/buckets/?date={DAY}",
        "series/?partner={code}&precision=60",
    ]
]
URLS = (
    OWN
    + [
        (f"{url}{'&' if '?' in url else '?'}format=csv", status)
        for url, status in OWN
        if url.startswith(CSV_CAPABLE)
    ]
    + [("logins/active/?format=csv", 403)]
    + OUTSIDE
    + [(f"{url}&format=csv", status) for url, status in OUTSIDE if "/stats/" in url or "/buckets/" in url]
)


def numbers_in(content_type: str, text: str) -> set[int]:
    """Every integer a client reads in the body: JSON values, or CSV cells."""
    if content_type.startswith("text/csv"):
        cells = [cell for row in csv.reader(io.StringIO(text)) for cell in row]
        return {int(cell) for cell in cells if cell.isdigit()}
    found: set[int] = set()

    def walk(value) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, int):
            found.add(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(json.loads(text))
    return found


def body_text(response) -> str:
    if response.streaming:
        return b"".join(response.streaming_content).decode("utf-8-sig")
    return response.content.decode()


@pytest.fixture
def world() -> None:
    top = create_partner("TOP1")
    mine = create_partner("MINE", parent=top)
    create_partner("MINEKID", parent=mine)
    create_partner("SIBLING", parent=top)
    create_partner("RIVAL")
    half_past = at(f"{DAY} 12:30")
    traffic = {"MINE": 2, "MINEKID": 3, "SIBLING": 11, "RIVAL": 13}
    feed(
        [pv_event(half_past, code, f"{code}-u{n}") for code, pv in traffic.items() for n in range(pv)],
        now=half_past,
    )
    login_record(user_type="client", user_id=1001, day=local_day(half_past))


def portal(code: str) -> APIClient:
    from partners.models import Partner

    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION="Token " + portal_token_issue(partner=Partner.objects.get(code=code))
    )
    return client


def test_a_portal_token_reads_nothing_outside_its_subtree_on_any_endpoint(world, settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "portal": None},
    }
    client = portal("MINE")
    # An outside partner is answered as one that does not exist, byte for byte.
    assert (
        client.get("/api/v1/partners/RIVAL/stats/").content
        == client.get("/api/v1/partners/NOPE/stats/").content
    )
    leaks = []
    for url, status in URLS:
        response = client.get(f"/api/v1/{url}")
        text = body_text(response)
        numbers = numbers_in(response["Content-Type"], text)
        named = [code for code in OTHERS if code in text]
        if response.status_code != status or named or not numbers <= ALLOWED_NUMBERS:
            leaks.append((url, response.status_code, named, sorted(numbers - ALLOWED_NUMBERS), text[:200]))
    assert leaks == []
    assert len(URLS) == 51

    # What it may read, it reads right (the checks above would pass on empty answers too).
    stats = client.get(f"/api/v1/partners/MINE/stats/?start={DAY}&end={DAY}").json()
    assert (stats["total_pv"], stats["days"][0]["pv_self"], stats["days"][0]["uv"]) == (5, 2, 5)
    assert client.get("/api/v1/partners/MINE/").json()["parent"] is None  # TOP1 is outside the subtree
    assert client.get("/api/v1/partners/MINEKID/").json()["parent"] == "MINE"
    assert client.get("/api/v1/partners/?parent=TOP1").json()["count"] == 0
    ranked = client.get("/api/v1/rankings/partners/?window=1h&format=csv")
    assert b"".join(ranked.streaming_content) == b"rank,partner,pv\r\n1,MINE,5\r\n2,MINEKID,3\r\n"
    series = client.get(f"/api/v1/series/?partner=MINE&precision=3600&start={DAY}&end={DAY}").json()
    assert [(p["ts"][11:13], p["count"]) for p in series if p["count"]] == [("12", 5)]


def test_staff_asking_the_same_see_the_other_partners(world):
    staff = staff_client()
    ranked = staff.get("/api/v1/rankings/partners/?window=1h").json()
    assert [(r["partner"], r["pv"]) for r in ranked] == [
        ("TOP1", 16),
        ("RIVAL", 13),
        ("SIBLING", 11),
        ("MINE", 5),
        ("MINEKID", 3),
    ]
    site = staff.get(f"/api/v1/series/?precision=86400&start={DAY}&end={DAY}").json()
    assert site == [{"ts": f"{DAY}T00:00:00+08:00", "count": 29}]
    assert staff.get("/api/v1/partners/MINE/").json()["parent"] == "TOP1"


# --- Conversions: orders of every partner, the portal reads its subtree's only ----------------------------

# Amounts whose sums show a leak: MINE 200 and MINEKID 300 (the portal's 500); SIBLING 1100, RIVAL 1300.
ORDER_AMOUNTS = {"MINE": 200, "MINEKID": 300, "SIBLING": 1_100, "RIVAL": 1_300, "TOP1": 1_700}
OWN_CONVERSIONS = [
    f"partners/MINE/conversions/?start={DAY}&end={DAY}",
    f"partners/MINEKID/conversions/?start={DAY}&end={DAY}",
    f"orders/?start={DAY}&end={DAY}",
    f"orders/?partner=MINEKID&start={DAY}&end={DAY}",
    "partners/MINE/statements/",
]
OUTSIDE_CONVERSIONS = [
    url.replace("{code}", code)
    for code in OTHERS
    for url in ["partners/{code}/conversions/", "orders/?partner={code}", "partners/{code}/statements/"]
] + ["partners/MINEKID/statements/"]  # statements: a portal reads its own partner's only


@pytest.fixture
def sales(world) -> None:
    from partners.models import Partner
    from tests.conversions.builders import make_order

    for code, amount in ORDER_AMOUNTS.items():
        make_order(
            f"SO-{code}",
            partner=Partner.objects.get(code=code),
            openid=f"buyer-of-{code}",
            paid_at=at(f"{DAY} 12:35"),
            amount=amount,
        )


def test_a_portal_reads_its_subtree_conversions_only_and_never_a_buyer(sales, settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "portal": None},
    }
    client = portal("MINE")
    allowed = ALLOWED_NUMBERS | {200, 300, 500}
    leaks = []
    for url in OWN_CONVERSIONS + [f"{u}{'&' if '?' in u else '?'}format=csv" for u in OWN_CONVERSIONS]:
        response = client.get(f"/api/v1/{url}")
        text = body_text(response)
        numbers = numbers_in(response["Content-Type"], text)
        named = [code for code in [*OTHERS, "buyer-of-"] if code in text]
        if response.status_code != 200 or named or not numbers <= allowed:
            leaks.append((url, response.status_code, named, sorted(numbers - allowed), text[:200]))
    for url in OUTSIDE_CONVERSIONS:
        response = client.get(f"/api/v1/{url}")
        nope = client.get(f"/api/v1/{url.replace('RIVAL', 'NOPE').replace('SIBLING', 'NOPE')}")
        if response.status_code != 404 or any(code in body_text(response) for code in OTHERS):
            leaks.append((url, response.status_code, body_text(response)[:200]))
        if "RIVAL" in url and response.content != nope.content:
            leaks.append((url, "differs from an unknown code"))
    assert leaks == []
    mine = client.get(f"/api/v1/partners/MINE/conversions/?start={DAY}&end={DAY}").json()["days"][0]
    assert (mine["orders"], mine["orders_self"], mine["gross"], mine["net_self"]) == (2, 1, 500, 200)
    assert client.get(f"/api/v1/orders/?start={DAY}&end={DAY}").json()["count"] == 2
