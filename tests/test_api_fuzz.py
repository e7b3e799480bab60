"""Every API parameter is total: any string, any date, any number gets a 2xx or a 4xx naming the parameter.

Property-based (hypothesis): each endpoint's query parameters, its path parameters and the fields of its JSON
body are driven with arbitrary values (any bytes a client can put in a URL, dates and datetimes anywhere in
the calendar with any offset, integers and floats of any size, and hand-picked edges). Bounded by default;
``HYPOTHESIS_PROFILE=long`` runs many more examples (profiles in ``tests/conftest.py``).
"""

import datetime as dt
import json
import string
from urllib.parse import quote_from_bytes

import pytest
from django.contrib.auth.models import Permission
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from partners.services import portal_token_issue
from tests.factories import create_staff, create_tree

pytestmark = pytest.mark.django_db

API = "/api/v1/"

# Query parameters of every endpoint, with a client that may call it.
QUERY_PARAMS = {
    "partners/": ["parent", "level", "page"],
    "partners/A1/": [],
    "partners/A1/stats/": ["start", "end"],
    "partners/A1/buckets/": ["date"],
    "rankings/partners/": ["window", "limit", "scope"],
    "series/": ["precision", "partner", "start", "end"],
    "logins/client/1001/": ["start", "end", "month"],
    "logins/active/": ["user_type", "start", "end", "month", "page"],
    "logins/counts/": ["user_type", "date"],
}
PORTAL_ENDPOINTS = [url for url in QUERY_PARAMS if not url.startswith("logins/")]
# A 400 may name a required parameter the request left out.
REQUIRED = {"logins/counts/": {"user_type"}}

# Hypothesis drives many examples through one database transaction; the fixtures are not per example.
PROPERTY = settings(
    deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)

EDGES = [
    "0001-01-01",
    "9999-12-31",
    "9999-12",
    "0001-01",
    "0000-00-00",
    "2026-02-29",
    "2024-02-29",
    "2000-01-01",
    "2100-12-31",
    "2101-01-01",
    "1999-12-31",
    "0001-01-01T00:00:00",
    "9999-12-31T23:59:59-23:59",
    "0001-01-01T00:00:00+23:59",
    "2026-11-21T08:00+08:00",
    "²",
    "١٢",
    "²⁰²⁶-¹¹-²¹",
    "1e400",
    "-0",
    "last",
    "NaN",
    "9" * 5000,
    "A1",
    "NOPE",
    "client",
    "1h",
    "self",
    "60",
    "86400",
    "\x00",
    " 1",
]
dates = st.dates().map(dt.date.isoformat)
months = st.dates().map(lambda d: d.isoformat()[:7])
offsets = st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1).map(
    lambda m: dt.timezone(dt.timedelta(minutes=m))
)
datetimes = st.datetimes(timezones=st.none() | offsets).map(dt.datetime.isoformat)
numbers = (
    st.integers().map(str)
    | st.integers(min_value=-(10**60), max_value=10**60).map(str)
    | st.floats().map(repr)
)
texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=100)
value = (
    st.sampled_from(EDGES)
    | dates
    | months
    | datetimes
    | numbers
    | texts
    | st.text(string.digits + "-:T+.", max_size=30)
).map(lambda text: text.encode()) | st.binary(max_size=100)


def query(params: dict[str, bytes]) -> str:
    """Percent-encode raw bytes, as any HTTP client may send them (invalid UTF-8 included)."""
    return "&".join(f"{name}={quote_from_bytes(raw, safe='')}" for name, raw in params.items())


def assert_total(response, url: str, sent: list[str]) -> None:
    """A 2xx, or a 400/404 whose body names a parameter that was sent (or a required one left out)."""
    assert response.status_code < 500, response.content[:300]
    if response.status_code == 200:
        return
    assert response.status_code in (400, 404), (response.status_code, response.content[:300])
    body = response.json()
    known = QUERY_PARAMS[url]
    assert set(body) <= set(known) | {"detail"}, body
    text = json.dumps(body)
    named = {name for name in known if name in text}
    assert named & set(sent) or set(body) & REQUIRED.get(url, set()), (sent, body)


@pytest.fixture
def unthrottled(settings):
    """Hundreds of requests from one user in a minute are the point here, not abuse."""
    rates = {**settings.REST_FRAMEWORK.get("DEFAULT_THROTTLE_RATES", {}), "user": None, "auth_failure": None}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}


@pytest.fixture
def clients(unthrottled) -> dict[str, APIClient]:
    tree = create_tree()
    staff = create_staff()
    staff.user_permissions.add(*Permission.objects.filter(codename__in=["add_partner", "add_loginmonth"]))
    made = {}
    for name, key in (
        ("staff", Token.objects.create(user=staff).key),
        ("portal", portal_token_issue(partner=tree["A1"])),
    ):
        made[name] = APIClient()
        made[name].credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return made


def params_of(url: str):
    names = QUERY_PARAMS[url]
    return st.fixed_dictionaries({}, optional=dict.fromkeys(names, value)) if names else st.just({})


@pytest.mark.parametrize("url", list(QUERY_PARAMS))
def test_any_query_parameter_gets_a_2xx_or_a_4xx_naming_it(clients, url):
    @PROPERTY
    @given(params=params_of(url))
    def check(params):
        response = clients["staff"].get(f"{API}{url}?{query(params)}")
        assert_total(response, url, list(params))

    check()


@pytest.mark.parametrize("url", PORTAL_ENDPOINTS)
def test_a_portal_token_on_its_own_partner_gets_the_same(clients, url):
    @PROPERTY
    @given(params=params_of(url))
    def check(params):
        if url == "series/":
            params.setdefault("partner", b"A1")  # a portal token must name one of its partners
        response = clients["portal"].get(f"{API}{url}?{query(params)}")
        assert_total(response, url, list(params))

    check()


path_segment = st.sampled_from(EDGES).map(lambda text: text.encode()) | st.binary(min_size=1, max_size=80)


@PROPERTY
@given(code=path_segment, tail=st.sampled_from(["", "stats/", "buckets/"]))
def test_any_partner_code_in_the_path_gets_200_or_404(clients, code, tail):
    for client in clients.values():
        response = client.get(f"{API}partners/{quote_from_bytes(code, safe='')}/{tail}")
        assert response.status_code in (200, 404), (code, response.status_code, response.content[:300])


@PROPERTY
@given(user_type=path_segment, user_id=path_segment)
def test_any_user_in_the_path_gets_a_2xx_or_a_4xx_naming_it(clients, user_type, user_id):
    url = f"{API}logins/{quote_from_bytes(user_type, safe='')}/{quote_from_bytes(user_id, safe='')}/"
    response = clients["staff"].get(url)
    assert response.status_code < 500, response.content[:300]
    if response.status_code == 400:
        assert set(response.json()) <= {"user_type", "user_id"}
    else:
        # 404 only when a segment holds a "/" (it is no longer this route), or the user is real.
        assert response.status_code == 200 or b"/" in user_type + user_id, response.content[:300]


def post_json(client: APIClient, url: str, body: dict):
    """POST ``body`` as ASCII JSON, so that lone surrogates travel as ``\\ud800`` escapes as a client may send them."""
    return client.post(url, json.dumps(body), content_type="application/json")


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec=None), max_size=60)
    | st.sampled_from(EDGES)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@PROPERTY
@given(body=st.fixed_dictionaries({}, optional=dict.fromkeys(["user_type", "user_id", "date"], json_values)))
def test_any_login_body_gets_201_or_a_400_naming_a_field(clients, body):
    response = post_json(clients["staff"], f"{API}logins/", body)
    assert response.status_code in (201, 400), response.content[:300]
    if response.status_code == 400:
        assert set(response.json()) <= {"user_type", "user_id", "date"}


@PROPERTY
@given(body=st.fixed_dictionaries({}, optional=dict.fromkeys(["code", "name", "parent"], json_values)))
def test_any_partner_body_gets_201_or_a_400_naming_a_field(clients, body):
    response = post_json(clients["staff"], f"{API}partners/", body)
    assert response.status_code in (201, 400), response.content[:300]
    if response.status_code == 400:
        assert set(response.json()) <= {"code", "name", "parent", "non_field_errors"}
    # The portal token is refused before its body is read, whatever the body.
    assert post_json(clients["portal"], f"{API}partners/", body).status_code == 403
