"""The API under hostile input and hostile callers: calendar edges, Unicode digits, deep JSON, probing portal
tokens, staff without model permissions, password guessing, and pages over many active users."""

import base64
import datetime as dt
import importlib
import itertools
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import MD5PasswordHasher
from django.contrib.auth.models import Permission
from django.utils import timezone
from django_redis import get_redis_connection
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from cpsproject.common import redis_keys
from cpsproject.common.timeutil import local_day
from loginlog.bitmaps import queue_login
from loginlog.services import sync_logins
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


# --- Calendar edges ----------------------------------------------------------------------------------------

EDGES = [
    ("partners/A1/buckets/?date=9999-12-31", "date"),
    ("partners/A1/buckets/?date=0001-01-01", "date"),
    ("partners/A1/stats/?start=9999-12-31&end=9999-12-31", "start"),
    ("partners/A1/stats/?start=2026-11-01&end=9999-12-31", "end"),
    ("partners/A1/stats/?start=0001-01-01&end=0001-01-02", "start"),
    ("series/?partner=A1&start=0001-01-01T00:00:00", "start"),
    ("series/?partner=A1&end=9999-12-31T23:59:59-23:59", "end"),
    ("series/?partner=A1&start=9999-12-31T23:59:59&end=2026-11-21T00:00", "start"),
]
STAFF_ONLY_EDGES = [
    ("logins/client/1001/?month=9999-12", "month"),
    ("logins/client/1001/?month=0001-01", "month"),
    ("logins/client/1001/?start=9999-12-31&end=9999-12-31", "start"),
    ("logins/counts/?user_type=client&date=0001-01-01", "date"),
    ("logins/counts/?user_type=client&date=9999-12-31", "date"),
    ("logins/active/?start=0001-01-01&end=0001-01-01", "start"),
    ("logins/active/?month=9999-12", "month"),
]


@pytest.mark.parametrize(("url", "param"), EDGES + STAFF_ONLY_EDGES)
def test_dates_at_the_calendars_edges_are_a_400_naming_the_parameter(staff, url, param):
    response = staff.get(API + url)
    assert response.status_code == 400
    assert param in response.json()


@pytest.mark.parametrize(("url", "param"), EDGES)
def test_a_portal_token_on_its_own_partner_gets_the_same_400(portal, url, param):
    response = portal.get(API + url)
    assert response.status_code == 400
    assert param in response.json()


def test_a_page_number_that_is_no_page_is_named(staff):
    junk = staff.get(API + "partners/?page=x")
    assert (junk.status_code, sorted(junk.json())) == (400, ["detail", "error", "page"])
    assert junk.json()["error"] == "invalid"
    past = staff.get(API + "partners/?page=2")
    assert (past.status_code, sorted(past.json())) == (404, ["detail", "error", "page"])
    assert past.json()["error"] == "not_found"
    assert staff.get(API + "partners/?page=last").json()["count"] == 5


def test_the_window_of_accepted_dates_is_inclusive(staff):
    last = staff.get(API + "partners/A1/buckets/?date=2100-12-31")
    assert last.status_code == 200
    assert (len(last.json()), last.json()[0]["start"]) == (288, "2100-12-31T00:00:00+08:00")
    first = staff.get(API + "partners/A1/stats/?start=2000-01-01&end=2000-01-02").json()
    assert [d["date"] for d in first["days"]] == ["2000-01-01", "2000-01-02"]
    assert staff.get(API + "logins/client/1/?month=2100-12").json() == {"logged_in": False, "days": []}
    assert staff.get(API + "partners/A1/buckets/?date=2101-01-01").status_code == 400


# --- Unicode digits and other impossible user ids ---------------------------------------------------------


@pytest.mark.parametrize("user_id", ["%C2%B2", "%D9%A1", "1" * 40, "-1", "1.5", "%00"])
def test_a_user_id_that_is_not_ascii_digits_is_a_400_naming_user_id(staff, user_id):
    response = staff.get(f"{API}logins/client/{user_id}/")
    assert response.status_code == 400
    assert "user_id" in response.json()


@pytest.mark.parametrize("user_id", ["²", "١", "9" * 5000, 2**70, -1, [1], {"$gt": 0}, True])
def test_recording_an_impossible_user_id_is_a_400_naming_user_id(tree, user_id):
    client = token_client(grant(create_staff(), "add_loginmonth"))
    response = client.post(API + "logins/", {"user_type": "client", "user_id": user_id}, format="json")
    assert response.status_code == 400
    assert "user_id" in response.json()


@pytest.mark.parametrize("date", ["9999-12-31", "²⁰²⁶-01-01", 20261121, ["2026-11-21"], "2026-11-21\x00"])
def test_recording_a_login_on_an_impossible_date_is_a_400_naming_date(tree, date):
    client = token_client(grant(create_staff(), "add_loginmonth"))
    body = {"user_type": "client", "user_id": 5, "date": date}
    response = client.post(API + "logins/", body, format="json")
    assert response.status_code == 400
    assert "date" in response.json()


@pytest.mark.parametrize("user_id", ["²", "9" * 5000, "-3"])
def test_the_login_activity_page_shows_bad_user_ids_as_its_error_message(client, user_id):
    get_user_model().objects.create_superuser("boss", "boss@example.com", "pw")
    client.login(username="boss", password="pw")
    page = client.get("/admin/loginlog/loginmonth/activity/", {"user_type": "client", "user_id": user_id})
    assert page.status_code == 200
    assert "user_id must be an integer" in page.content.decode()


# --- Bodies ------------------------------------------------------------------------------------------------

DEEP = b"[" * 50_000 + b"]" * 50_000
DEEP_OBJECT = b'{"user_type":' * 50_000 + b"1" + b"}" * 50_000


@pytest.mark.parametrize("body", [DEEP, DEEP_OBJECT], ids=["array", "object"])
@pytest.mark.parametrize("url", ["logins/", "partners/"])
def test_json_nested_50000_deep_is_a_400_parse_error(tree, url, body):
    client = token_client(grant(create_staff(), "add_loginmonth", "add_partner"))
    response = client.post(API + url, body, content_type="application/json")
    assert response.status_code == 400
    body = response.json()
    assert (
        body["error"] == "parse_error"
        and body["detail"] == "The body is not valid JSON: it is nested too deeply."
    )


@pytest.mark.parametrize("body", [b"[1, 2]", b'"client"', b"null", b"12"])
def test_a_login_body_that_is_not_an_object_is_a_400(tree, body):
    client = token_client(grant(create_staff(), "add_loginmonth"))
    response = client.post(API + "logins/", body, content_type="application/json")
    assert response.status_code == 400
    assert "detail" in response.json()


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


# --- Throttling --------------------------------------------------------------------------------------------


class CountingHasher(MD5PasswordHasher):
    """Counts password checks, to show a throttled client costs none (and MD5 keeps the test fast)."""

    algorithm = "counting_md5"
    verified = 0

    def verify(self, password: str, encoded: str) -> bool:
        type(self).verified += 1
        return super().verify(password, encoded)


@pytest.fixture
def rates(settings):
    """Set throttle rates for one test (the classes read them per request)."""
    # DRF copies the rates into its throttle classes when the module is first imported: do that before the
    # override, as in a server that has run a while, so the tests show the override is read per request.
    importlib.import_module("rest_framework.throttling")

    def set_rates(**rates: str | None) -> None:
        current = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
        settings.REST_FRAMEWORK = {
            **settings.REST_FRAMEWORK,
            "DEFAULT_THROTTLE_RATES": {**current, **rates},
        }

    return set_rates


@pytest.fixture
def counting_hasher(settings):
    settings.PASSWORD_HASHERS = ["tests.test_api_hostile.CountingHasher"]
    CountingHasher.verified = 0
    return CountingHasher


def test_wrong_passwords_are_throttled_before_any_password_is_checked(tree, rates, counting_hasher):
    rates(auth_failure="3/min")
    create_staff(password="right")
    client = APIClient(REMOTE_ADDR="203.0.113.9")
    wrong = [client.get(API + "partners/", HTTP_AUTHORIZATION=basic("staff", f"guess{n}")) for n in range(3)]
    assert [r.status_code for r in wrong] == [401, 401, 401]
    assert counting_hasher.verified == 3
    throttled = client.get(API + "partners/", HTTP_AUTHORIZATION=basic("staff", "guess3"))
    assert throttled.status_code == 429
    assert 0 < int(throttled["Retry-After"]) <= 60
    # Even the right password waits, and costs no hash: the address is refused before authentication.
    assert client.get(API + "partners/", HTTP_AUTHORIZATION=basic("staff", "right")).status_code == 429
    assert counting_hasher.verified == 3
    # Another address is not affected; a forged X-Forwarded-For does not make one (no proxy is configured).
    forged = client.get(
        API + "partners/", HTTP_AUTHORIZATION=basic("staff", "right"), HTTP_X_FORWARDED_FOR="1.2.3.4"
    )
    assert forged.status_code == 429
    other = APIClient(REMOTE_ADDR="198.51.100.7")
    assert other.get(API + "partners/", HTTP_AUTHORIZATION=basic("staff", "right")).status_code == 200


def test_bad_tokens_and_anonymous_requests_count_as_failed_authentications(tree, rates):
    rates(auth_failure="2/min")
    client = APIClient(REMOTE_ADDR="203.0.113.10")
    assert client.get(API + "partners/", HTTP_AUTHORIZATION="Token not-a-token").status_code == 401
    anonymous = client.get(API + "partners/")  # no credentials at all
    assert (anonymous.status_code, anonymous["WWW-Authenticate"]) == (401, "Token")
    assert anonymous.json() == {
        "error": "not_authenticated",
        "detail": "Authentication credentials were not provided.",
    }
    assert client.get(API + "partners/").status_code == 429


def test_an_authenticated_user_is_throttled_at_the_user_rate(staff, rates):
    rates(user="3/min")
    assert [staff.get(API + "partners/").status_code for _ in range(4)] == [200, 200, 200, 429]


def test_each_portal_token_is_throttled_at_the_portal_rate_and_staff_at_theirs(tree, staff, rates):
    rates(portal="2/min", user="100/min")
    a1 = APIClient()
    a1.credentials(HTTP_AUTHORIZATION=f"Token {portal_token_issue(partner=tree['A1'])}")
    b = APIClient()
    b.credentials(HTTP_AUTHORIZATION=f"Token {portal_token_issue(partner=tree['B'])}")
    assert [a1.get(API + "partners/").status_code for _ in range(3)] == [200, 200, 429]
    refused = a1.get(API + "partners/A1/stats/")
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 60
    assert refused.json()["error"] == "throttled"
    # Another portal's token has its own allowance, and staff are held to the user rate only.
    assert [b.get(API + "partners/").status_code for _ in range(2)] == [200, 200]
    assert {staff.get(API + "partners/").status_code for _ in range(5)} == {200}


@pytest.mark.time_machine("2026-11-21T12:00:00+08:00", tick=False)
def test_a_throttle_window_slides_with_the_clock_and_retry_after_says_when(staff, rates, time_machine):
    rates(user="2/min")
    assert [staff.get(API + "partners/").status_code for _ in range(2)] == [200, 200]
    time_machine.shift(20)
    refused = staff.get(API + "partners/")
    assert refused.status_code == 429 and int(refused["Retry-After"]) == 40  # the oldest leaves at 60 s
    time_machine.shift(39)
    assert staff.get(API + "partners/").status_code == 429
    time_machine.shift(2)  # 61 s: both earlier requests have left the window
    assert [staff.get(API + "partners/").status_code for _ in range(3)] == [200, 200, 429]


def test_throttle_history_lives_under_the_tests_own_key_prefix(staff, redis_prefix, redis_client):
    staff.get(API + "partners/")
    staff.get(API + "partners/")
    pk = get_user_model().objects.get(username="staff").pk
    key = redis_keys.throttle("user", str(pk))
    assert key == f"{{{redis_prefix}:throttle:user:{pk}}}"
    assert redis_client.llen(key) == 2
    assert 0 < redis_client.ttl(key) <= 60


def test_default_rates_leave_room_for_normal_use(staff):
    assert {staff.get(API + "partners/").status_code for _ in range(50)} == {200}


# --- Pages of active users ---------------------------------------------------------------------------------


def page_of(link: str | None) -> str | None:
    """The ``page`` a next/previous link points to ("1" when it has none)."""
    return None if link is None else parse_qs(urlsplit(link).query).get("page", ["1"])[0]


def login_many(user_type: str, ids, day: dt.date) -> None:
    pipe = get_redis_connection("default").pipeline(transaction=False)
    for user_id in ids:
        queue_login(pipe, user_type=user_type, user_id=user_id, day=day)
    pipe.execute()


def test_active_pages_walk_the_ids_in_order_with_an_exact_count(staff):
    today = local_day(timezone.now())
    login_many("client", range(0, 5000, 2), today)  # 2,500 clients: 0, 2, …, 4998
    login_many("office", [3, 1_000_000], today)
    url = f"{API}logins/active/?user_type=client&start={today}&end={today}"
    first = staff.get(url).json()
    assert first["count"] == 2500
    assert first["results"] == list(range(0, 2000, 2))
    assert (page_of(first["previous"]), page_of(first["next"])) == (None, "2")
    third = staff.get(url + "&page=3").json()
    assert third["results"] == list(range(4000, 5000, 2))
    assert (page_of(third["previous"]), page_of(third["next"])) == ("2", None)
    assert page_of(staff.get(url + "&page=2").json()["previous"]) == "1"
    past = staff.get(url + "&page=4")
    assert past.status_code == 404 and "page" in past.json()
    for page in ("0", "-1", "x", "2.5", "9" * 30):
        assert "page" in staff.get(f"{url}&page={page}").json()


def test_active_pages_seek_far_into_a_large_sparse_bitmap(staff):
    today = local_day(timezone.now())
    squares = [n * n for n in range(1, 1000)]  # gaps growing to 2,000 ids: BITPOS jumps, reads grow
    block = list(range(500_000, 504_000))  # 4,000 ids in 500 bytes
    ids = sorted(set(squares) | set(block))
    login_many("client", ids, today)
    url = f"{API}logins/active/?user_type=client&start={today}&end={today}"
    pages = {n: staff.get(f"{url}&page={n}").json() for n in range(1, 7)}
    assert pages[1]["count"] == len(ids) == 999 + 4000 - 2  # 708² and 709² fall in the block
    for n in range(1, 6):
        assert pages[n]["results"] == ids[(n - 1) * 1000 : n * 1000]
    assert "page" in pages[6]


def test_active_pages_without_user_type_run_over_the_types_in_order(staff):
    today = local_day(timezone.now())
    login_many("client", range(1500), today)
    login_many("office", [3, 1_000_000], today)
    url = f"{API}logins/active/?start={today}&end={today}&page=2"
    body = staff.get(url).json()
    assert body["count"] == 1502
    assert body["results"][:2] == [
        {"user_type": "client", "user_id": 1000},
        {"user_type": "client", "user_id": 1001},
    ]
    assert body["results"][-3:] == [
        {"user_type": "client", "user_id": 1499},
        {"user_type": "office", "user_id": 3},
        {"user_type": "office", "user_id": 1_000_000},
    ]
    assert len(body["results"]) == 502 and body["next"] is None


def test_active_pages_merge_days_that_expired_to_mysql_with_days_in_redis(staff):
    today = local_day(timezone.now())
    old, recent = today - dt.timedelta(days=120), today - dt.timedelta(days=1)
    login_many("client", range(0, 3000, 2), old)  # even ids only on a day the sync expires
    login_many("client", range(1, 3000, 2), recent)  # odd ids in Redis
    login_many("client", [4, 10], recent)  # also in Redis: counted once
    assert sync_logins(now=timezone.now()).deleted_keys > 0
    url = f"{API}logins/active/?user_type=client&start={old}&end={today}"
    pages = [staff.get(f"{url}&page={n}").json() for n in (1, 2, 3)]
    assert [p["count"] for p in pages] == [3000] * 3
    assert list(itertools.chain.from_iterable(p["results"] for p in pages)) == list(range(3000))
    only_old = staff.get(f"{API}logins/active/?user_type=client&start={old}&end={old}").json()
    assert only_old["count"] == 1500 and only_old["results"][:3] == [0, 2, 4]
