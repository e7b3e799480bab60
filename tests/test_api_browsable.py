"""Every API endpoint opens in a browser: DRF's browsable API (``Accept: text/html`` or ``?format=api``).

Staff signed in to the admin and partner portals both get an HTML page holding the same numbers as the JSON,
or the right 4xx as a page; nothing is a 500, and a portal's page names no partner outside its subtree.
The tree: TOP ─ MINE ─ KID, and RIVAL alone. At 12:30 MINE has 2 PV (users m0 m1), KID 3 (k0 k1 k2), RIVAL 7.
"""

import html
import re

import pytest
from rest_framework.test import APIClient

from loginlog.services import login_record
from partners.models import Partner
from partners.services import portal_token_issue
from tests.admin.test_catalogue import CJK, english_words_in_chinese
from tests.factories import at, create_partner, feed, pv_event, staff_client

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine("2026-11-21T12:40:00+08:00", tick=False)]

DAY = "2026-11-21"

# (url, what the page must show) for every GET endpoint, as staff and as the portal of MINE. The numbers are
# written from the traffic above: MINE's subtree is 5 PV from 5 users, 2 of them its own.
PAGES = [
    ("partners/MINE/", ['"code": "MINE"', '"level": 2']),
    (
        f"partners/MINE/stats/?start={DAY}&end={DAY}",
        ['"total_pv": 5', '"pv": 5', '"uv": 5', '"pv_self": 2', '"uv_self": 2', '"reconciled": false'],
    ),
    (f"partners/KID/stats/?start={DAY}&end={DAY}", ['"partner": "KID"', '"total_pv": 3']),
    (f"partners/MINE/buckets/?date={DAY}", ['"start": "2026-11-21T12:30:00+08:00",\n        "pv": 5']),
    (
        f"series/?partner=MINE&precision=60&start={DAY}T12:29&end={DAY}T12:31",
        ['"ts": "2026-11-21T12:30:00+08:00",\n        "count": 5'],
    ),
]
STAFF_PAGES = [
    ("partners/", ['"count": 4', '"code": "RIVAL"']),
    ("rankings/partners/?window=1h", ['"rank": 1,\n        "partner": "RIVAL",\n        "pv": 7']),
    ("logins/client/1001/?month=2026-11", ['"logged_in": true', '"2026-11-21"']),
    ("logins/active/?user_type=client&start=2026-11-01&end=2026-11-30", ['"count": 2']),
    (f"logins/counts/?user_type=client&date={DAY}", ['"dau": 2', '"mau": 2']),
]
PORTAL_PAGES = [
    ("partners/", ['"count": 2', '"code": "KID"']),
    ("rankings/partners/?window=1h", ['"rank": 1,\n        "partner": "MINE",\n        "pv": 5']),
]
# (url, status): what each client is refused, as a page too.
STAFF_REFUSED = [("partners/NOPE/stats/", 404), ("series/?precision=7", 400), ("logins/", 405)]
PORTAL_REFUSED = [
    ("partners/RIVAL/stats/", 404),
    ("series/?precision=60", 400),
    ("logins/counts/?user_type=client", 403),
]


@pytest.fixture
def world(settings) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {
            **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"],
            "user": None,
            "portal": None,
        },
    }
    top = create_partner("TOP")
    mine = create_partner("MINE", parent=top)
    create_partner("KID", parent=mine)
    create_partner("RIVAL")
    half_past = at(f"{DAY} 12:30")
    users = {"MINE": ["m0", "m1"], "KID": ["k0", "k1", "k2"], "RIVAL": [f"r{n}" for n in range(7)]}
    feed([pv_event(half_past, code, user) for code, ids in users.items() for user in ids], now=half_past)
    for user_id in (1001, 1002):
        login_record(user_type="client", user_id=user_id, day=half_past.date())


def portal() -> APIClient:
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION="Token " + portal_token_issue(partner=Partner.objects.get(code="MINE"))
    )
    return client


def pages(client: APIClient, url: str):
    """The page of ``url`` asked for both ways a browser or a person does: the Accept header and ?format=api."""
    yield "Accept: text/html", client.get(f"/api/v1/{url}", HTTP_ACCEPT="text/html")
    yield "format=api", client.get(f"/api/v1/{url}{'&' if '?' in url else '?'}format=api")


def shown_text(response) -> str:
    """The page's text as a reader sees it: the JSON block unescaped, its links' tags dropped, no script (the
    page's CSRF token sits in one, and a random token may spell a partner's code)."""
    page = re.sub(r"<script\b.*?</script>", "", response.content.decode(), flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def check_pages(client: APIClient, expected: list, refused: list, hidden: list[str]) -> list:
    wrong = []
    for url, shows in expected:
        for way, response in pages(client, url):
            text = shown_text(response)
            missing = [s for s in shows if s not in text]
            if response.status_code != 200 or not response["Content-Type"].startswith("text/html") or missing:
                wrong.append((url, way, response.status_code, response["Content-Type"], missing))
            wrong += [(url, way, "names", code) for code in hidden if code in text]
    for url, status in refused:
        for way, response in pages(client, url):
            text = shown_text(response)
            if response.status_code != status or '"error":' not in text or '"detail":' not in text:
                wrong.append((url, way, response.status_code, text[-300:]))
            # The page repeats the URL asked for; beyond it, a refusal tells nothing about other partners.
            wrong += [(url, way, "names", code) for code in hidden if code in text.replace(url, "")]
    return wrong


def test_staff_open_every_endpoint_in_the_browsable_api(world):
    assert check_pages(staff_client(), PAGES + STAFF_PAGES, STAFF_REFUSED, hidden=[]) == []


def test_a_portal_opens_its_endpoints_in_the_browsable_api_and_sees_nothing_outside(world):
    assert check_pages(portal(), PAGES + PORTAL_PAGES, PORTAL_REFUSED, hidden=["TOP", "RIVAL"]) == []


def test_the_json_of_the_stats_endpoint_is_still_the_compact_pre_rendered_one(world):
    body = staff_client().get(f"/api/v1/partners/MINE/stats/?start={DAY}&end={DAY}")
    assert body["Content-Type"] == "application/json"
    assert body.content == (
        b'{"partner":"MINE","days":[{"date":"2026-11-21","pv":5,"uv":5,"pv_self":2,"uv_self":2,'
        b'"reconciled":false}],"total_pv":5}'
    )
    indented = staff_client("other").get(
        f"/api/v1/partners/MINE/stats/?start={DAY}&end={DAY}", HTTP_ACCEPT="application/json; indent=2"
    )
    assert indented.status_code == 200 and indented.json()["total_pv"] == 5
    assert b'\n  "days": [' in indented.content


# --- Refused formats name only what works -----------------------------------------------------------------

FORMAT_URLS = [
    f"partners/MINE/stats/?start={DAY}&end={DAY}",
    f"partners/MINE/buckets/?date={DAY}",
    "partners/",
    "partners/MINE/",
    "rankings/partners/?window=1h",
    "series/?partner=MINE&precision=60",
    "logins/client/1001/?month=2026-11",
    "logins/active/?user_type=client",
    "logins/counts/?user_type=client",
    "schema/",
]


def with_param(url: str, name: str, value: str) -> str:
    return f"/api/v1/{url}{'&' if '?' in url else '?'}{name}={value}"


@pytest.mark.parametrize("url", FORMAT_URLS)
def test_a_refused_format_lists_the_formats_that_answer_and_each_of_them_does(world, url):
    client = staff_client()
    refused = client.get(with_param(url, "format", "xml"))
    assert refused.status_code == 400 and refused["Content-Type"] == "application/json"
    body = refused.json()
    assert body["error"] == "invalid" and list(body) == ["error", "detail", "format"]
    listed = re.fullmatch(r"format must be one of (.+), not 'xml'\.", body["format"][0]).group(1).split(", ")
    assert "json" in listed and "api" in listed and len(set(listed)) == len(listed)
    answers = {name: client.get(with_param(url, "format", name)) for name in listed}
    assert {name: r.status_code for name, r in answers.items()} == dict.fromkeys(listed, 200)
    assert answers["api"]["Content-Type"].startswith("text/html")


@pytest.mark.parametrize("url", FORMAT_URLS)
def test_an_accept_header_nothing_satisfies_is_a_406_listing_the_media_types_that_do(world, url):
    client = staff_client()
    refused = client.get(f"/api/v1/{url}", HTTP_ACCEPT="application/xml")
    assert refused.status_code == 406 and refused["Content-Type"] == "application/json"
    body = refused.json()
    assert body["error"] == "not_acceptable" and list(body) == ["error", "detail"]
    prefix = "The Accept header asks for none of the media types this endpoint answers: "
    assert body["detail"].startswith(prefix) and body["detail"].endswith(".")
    listed = body["detail"].removeprefix(prefix).removesuffix(".").split(", ")
    assert "application/json" in listed and "text/html" in listed
    statuses = {media: client.get(f"/api/v1/{url}", HTTP_ACCEPT=media).status_code for media in listed}
    assert statuses == dict.fromkeys(listed, 200)


def test_the_docs_page_refuses_a_format_in_the_one_error_shape(world):
    refused = APIClient().get("/api/v1/docs/?format=api")
    assert refused.status_code == 400 and refused["Content-Type"] == "application/json"
    assert refused.json()["format"] == ["format must be one of html, not 'api'."]


def test_format_wins_over_the_accept_header(world):
    client = staff_client()
    url = f"/api/v1/partners/MINE/stats/?start={DAY}&end={DAY}"
    csv_page = client.get(f"{url}&format=csv", HTTP_ACCEPT="text/html")
    assert csv_page.status_code == 200 and csv_page["Content-Type"] == "text/csv; charset=utf-8"
    assert b"".join(csv_page.streaming_content).endswith(b"\r\nMINE,2026-11-21,5,5,2,2,false\r\n")
    as_json = client.get(f"{url}&format=json", HTTP_ACCEPT="text/html")
    assert as_json["Content-Type"] == "application/json" and as_json.json()["total_pv"] == 5


# --- The page around the numbers, in the reader's language --------------------------------------------------

TITLES = {
    "partners/": "Partner list",
    "partners/MINE/": "Partner",
    "partners/MINE/stats/": "Daily PV and UV of a partner",
    "partners/MINE/buckets/": "5-minute PV of a partner",
    "rankings/partners/": "Partner ranking",
    "series/": "PV series",
    "logins/": "Record a login",
    "logins/client/1001/": "A user's login days",
    "logins/active/": "Active users",
    "logins/counts/?user_type=client": "DAU, WAU and MAU",
    "schema/": "API schema",
}


def title_and_line(response) -> tuple[str, str]:
    """The page's heading and the line under it (DRF's template: ``<h1>``, then a ``pull-left`` block)."""
    found = re.search(r'<h1>(.*?)</h1>.*?<div class="pull-left">(.*?)</div>', response.content.decode(), re.S)
    title, line = found.groups()
    return html.unescape(title).strip(), html.unescape(re.sub(r"<[^>]+>", "", line)).strip()


@pytest.mark.parametrize(("url", "title"), list(TITLES.items()))
def test_every_page_has_a_title_and_a_line_in_the_readers_language(world, url, title):
    client = staff_client()
    english = client.get(f"/api/v1/{url}", HTTP_ACCEPT="text/html", HTTP_ACCEPT_LANGUAGE="en")
    chinese = client.get(f"/api/v1/{url}", HTTP_ACCEPT="text/html", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert english.status_code == chinese.status_code and english.status_code in (200, 405)
    en_title, en_line = title_and_line(english)
    zh_title, zh_line = title_and_line(chinese)
    assert en_title == title and en_line.endswith(".") and not CJK.search(en_title + en_line)
    assert f"<title>{html.escape(title)} – CPS partner statistics API</title>" in english.content.decode()
    assert CJK.search(zh_title) and CJK.search(zh_line), (zh_title, zh_line)
    assert english_words_in_chinese(zh_title + zh_line) == [], (zh_title, zh_line)
    assert "CPS 导流商统计 API" in chinese.content.decode()


# --- The conversions endpoints (staff need the conversions view permissions, beside the viewers group) -----

CONVERSION_TITLES = {
    f"partners/MINE/conversions/?start={DAY}&end={DAY}": "Conversions of a partner",
    f"orders/?start={DAY}&end={DAY}": "Orders",
    "partners/MINE/statements/": "Statements of a partner",
}


def conversions_staff() -> APIClient:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    client = staff_client("finance")
    get_user_model().objects.get(username="finance").user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="conversions",
            codename__in=["view_order", "view_ledgerentry", "view_statement"],
        )
    )
    return client


@pytest.fixture
def sale(world) -> None:
    """One order of KID (MINE's subtree) paid at 12:35 for 99.00; no commission yet."""
    from tests.conversions.builders import make_order

    make_order(
        "SO-B1",
        partner=Partner.objects.get(code="KID"),
        openid="o-secret-buyer",
        paid_at=at(f"{DAY} 12:35"),
        amount=9_900,
    )


CONVERSION_PAGES = [
    (
        f"partners/MINE/conversions/?start={DAY}&end={DAY}",
        ['"orders": 1', '"orders_self": 0', '"gross": 9900', '"conversion_rate": "0.2000"'],  # 1 buyer / 5 UV
    ),
    (f"orders/?start={DAY}&end={DAY}", ['"count": 1', '"order_id": "SO-B1"', '"partner": "KID"']),
    ("partners/MINE/statements/", ["[]"]),
]


def test_staff_and_a_portal_open_the_conversions_endpoints_and_no_openid_shows(sale):
    assert check_pages(conversions_staff(), CONVERSION_PAGES, [("partners/NOPE/conversions/", 404)], []) == []
    refused = [
        ("partners/RIVAL/conversions/", 404),
        ("partners/KID/statements/", 404),
        ("orders/?partner=RIVAL", 404),
    ]
    assert check_pages(portal(), CONVERSION_PAGES, refused, hidden=["TOP", "RIVAL", "o-secret-buyer"]) == []


@pytest.mark.parametrize(("url", "title"), list(CONVERSION_TITLES.items()))
def test_the_conversions_pages_have_a_title_and_a_line_in_the_readers_language(sale, url, title):
    client = conversions_staff()
    english = client.get(f"/api/v1/{url}", HTTP_ACCEPT="text/html", HTTP_ACCEPT_LANGUAGE="en")
    chinese = client.get(f"/api/v1/{url}", HTTP_ACCEPT="text/html", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert english.status_code == chinese.status_code == 200
    en_title, en_line = title_and_line(english)
    zh_title, zh_line = title_and_line(chinese)
    assert en_title == title and en_line.endswith(".") and not CJK.search(en_title + en_line)
    assert CJK.search(zh_title) and CJK.search(zh_line), (zh_title, zh_line)
    assert english_words_in_chinese(zh_title + zh_line) == [], (zh_title, zh_line)
