"""The Chinese catalogue ships complete, compiled, and in use: staff read Chinese by default."""

import re
from pathlib import Path

import polib
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django_redis import get_redis_connection
from rest_framework.test import APIClient

from cpsproject.common import redis_keys
from cpsproject.common.params import ERROR_SCHEMA
from partners.models import Partner
from partners.services import portal_token_issue
from tests.admin.conftest import CLOCK
from tests.factories import create_staff, create_tree

CATALOGUE = Path(settings.BASE_DIR) / "locale" / "zh_Hans" / "LC_MESSAGES"


def test_every_entry_of_the_catalogue_is_translated_and_none_is_fuzzy():
    po = polib.pofile(str(CATALOGUE / "django.po"))
    live = [entry for entry in po if not entry.obsolete]
    assert len(live) > 100
    assert [e.msgid for e in live if not e.translated()] == []
    assert [e.msgid for e in live if "fuzzy" in e.flags] == []


def test_the_compiled_catalogue_matches_the_po_file():
    po = polib.pofile(str(CATALOGUE / "django.po"))
    mo = polib.mofile(str(CATALOGUE / "django.mo"))
    translated = {(e.msgid, e.msgstr or e.msgstr_plural.get(0, "")) for e in po if e.translated()}
    compiled = {(e.msgid, e.msgstr or e.msgstr_plural.get(0, "")) for e in mo if e.msgid}
    assert translated == compiled, "run: python manage.py compilemessages -l zh_Hans"


@pytest.mark.django_db
@pytest.mark.time_machine(CLOCK, tick=False)
def test_the_admin_speaks_chinese_by_default_and_english_on_request(client, settings):
    settings.LANGUAGE_CODE = "zh-hans"  # the product's default (the suite runs in English)
    get_user_model().objects.create_superuser("boss", "boss@example.com", "pw")
    client.login(username="boss", password="pw")
    chinese = client.get("/admin/").content.decode()
    assert "统计看板" in chinese and "今日 PV" in chinese and "导流商排行" in chinese
    daily = client.get("/admin/stats/dailystat/").content.decode()
    assert "下载 CSV" in daily and "日期范围" in daily
    client.post("/i18n/setlang/", {"language": "en", "next": "/admin/"})
    english = client.get("/admin/").content.decode()
    assert "Statistics dashboard" in english and "PV today" in english


# --- One language per message -----------------------------------------------------------------------------
#
# A Chinese message may keep, as they are, the product's terms and what a client types: parameter names and
# values, media types, codes. Anything else in Latin letters is English left inside Chinese.

PRODUCT_TERMS = {
    "PV", "UV", "CPS", "API", "CSV", "JSON", "UTF", "ISO", "YYYY", "MM", "DD", "ID", "HTTP", "URL", "SQL",
    "Redis", "Kafka", "MySQL", "MariaDB", "MongoDB", "HyperLogLog", "openid",
    "Token", "Basic", "Bearer", "Authorization", "Accept", "null", "GET", "POST", "OpenAPI", "DAU", "WAU", "MAU",
}  # fmt: skip
API_WORDS = {
    "start", "end", "date", "month", "partner", "parent", "level", "window", "scope", "precision", "limit",
    "page", "format", "user_type", "user_id", "code", "name", "status",
    "json", "api", "csv", "yaml", "html", "tree", "self", "client", "office",
}  # fmt: skip
_PLACEHOLDER = re.compile(r"%\([a-z_]+\)[-#0 +]*\d*(?:\.\d+)?[sdfr]|\{[a-z_]+\}")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|“[^”]*”|‘[^’]*’|`[^`]*`")
_MARKUP = re.compile(r"<[^>]+>|&[a-z]+;")
# Codes, permissions, media types, dates, addresses (anything holding a digit, or one of _ . : / @ between two
# characters), and a prefix such as file: before what follows it.
_IDENTIFIER = re.compile(r"[A-Za-z0-9]*(?:[_.:/@][A-Za-z0-9]|\d)[A-Za-z0-9_.:/@+-]*|[A-Za-z]+:(?=\S)")
CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


def english_words_in_chinese(text: str) -> list[str]:
    """The Latin words of ``text`` that are neither a product term nor something a client types."""
    for pattern in (_PLACEHOLDER, _QUOTED, _MARKUP, _IDENTIFIER):
        text = pattern.sub(" ", text)
    return [w for w in re.findall(r"[A-Za-z]+", text) if w not in PRODUCT_TERMS | API_WORDS]


def test_no_chinese_entry_of_the_catalogue_keeps_english_words():
    po = polib.pofile(str(CATALOGUE / "django.po"))
    mixed = {}
    for entry in po:
        text = entry.msgstr or entry.msgstr_plural.get(0, "")
        if not entry.obsolete and english_words_in_chinese(text):
            mixed[entry.msgid] = (text, english_words_in_chinese(text))
    assert mixed == {}


def test_the_mixed_language_check_sees_english_left_in_chinese():
    assert english_words_in_chinese("start 必须是 YYYY-MM-DD 格式的日期，不能是 'yesterday'。") == []
    assert english_words_in_chinese("需要权限 stats.view_dailystat（“统计查看者”组）。") == []
    assert english_words_in_chinese("Too many failed authentications. 预计 30 秒后可用。") == [
        "Too", "many", "failed", "authentications",
    ]  # fmt: skip
    assert english_words_in_chinese("消费延迟未知：Kafka at 127.0.0.1:9092 did not answer") == [
        "at", "did", "not", "answer",
    ]  # fmt: skip


# Requests an API client gets wrong, one per kind of refusal: (client, method, url, extra, status).
BAD_REQUESTS = [
    ("staff", "get", "partners/A/stats/?start=yesterday", {}, 400),
    ("staff", "get", "partners/A/stats/?start=2026-11-21&end=2026-11-20", {}, 400),
    ("staff", "get", "partners/A/stats/?start=2026-11-01&end=2027-12-01", {}, 400),
    ("staff", "get", "partners/A/stats/?start=1999-12-31", {}, 400),
    ("staff", "get", "partners/NOPE/stats/", {}, 404),
    ("anonymous", "get", "partners/A/statistics/", {}, 404),
    ("staff", "get", "partners/A/stats/?format=xml", {}, 400),
    ("staff", "get", "partners/A/stats/", {"HTTP_ACCEPT": "application/xml"}, 406),
    ("staff", "get", "partners/?level=9", {}, 400),
    ("staff", "get", "partners/?parent=%2F%2F", {}, 400),
    ("staff", "get", "partners/?page=99", {}, 404),
    ("staff", "get", "partners/?page=x", {}, 400),
    ("staff", "get", "logins/", {}, 405),
    ("staff", "post", "partners/", {"data": {"code": "A", "name": "again"}, "format": "json"}, 400),
    (
        "staff",
        "post",
        "partners/",
        {"data": {"code": "Z", "name": "deep", "parent": "A1a"}, "format": "json"},
        400,
    ),
    (
        "staff",
        "post",
        "partners/",
        {"data": {"code": "Z", "name": "x", "parent": "NOPE"}, "format": "json"},
        400,
    ),
    ("staff", "post", "logins/", {"data": "{not json", "content_type": "application/json"}, 400),
    ("staff", "post", "logins/", {"data": "[1]", "content_type": "application/json"}, 400),
    ("staff", "post", "logins/", {"data": "<x/>", "content_type": "application/xml"}, 415),
    ("staff", "post", "logins/", {"data": {"user_type": "robot", "user_id": 1}, "format": "json"}, 400),
    ("staff", "post", "logins/", {"data": {"user_type": "client", "user_id": -1}, "format": "json"}, 400),
    ("staff", "post", "logins/", {"data": {"user_type": "client"}, "format": "json"}, 400),
    ("staff", "get", "logins/client/abc/", {}, 400),
    ("staff", "get", "logins/client/1/?month=2026-13", {}, 400),
    ("staff", "get", "logins/active/?page=5", {}, 404),
    ("staff", "get", "logins/counts/", {}, 400),
    ("staff", "get", "rankings/partners/?window=2d", {}, 400),
    ("staff", "get", "rankings/partners/?limit=0", {}, 400),
    ("staff", "get", "rankings/partners/?limit=x1", {}, 400),
    ("staff", "get", "series/?precision=7", {}, 400),
    ("staff", "get", "series/?start=noon", {}, 400),
    ("staff", "get", "series/?precision=1&start=2026-11-21&end=2026-11-21", {}, 400),
    ("staff", "get", "series/?partner=" + "x" * 70, {}, 400),
    ("viewer without permissions", "get", "partners/A/stats/", {}, 403),
    ("portal", "get", "logins/counts/?user_type=client", {}, 403),
    ("portal", "post", "partners/", {"data": {"code": "Z", "name": "x"}, "format": "json"}, 403),
    ("portal", "get", "series/", {}, 400),
    ("portal", "get", "partners/B/", {}, 404),
    ("anonymous", "get", "partners/", {}, 401),
    ("wrong token", "get", "partners/", {}, 401),
    ("throttled portal", "get", "partners/", {}, 429),
    ("locked-out address", "get", "partners/", {}, 429),
]
ERROR_CODES = set(ERROR_SCHEMA["properties"]["error"]["description"].split(", "))


def api_client(kind: str, world: dict) -> APIClient:
    client = APIClient()
    if kind in ("staff", "viewer without permissions"):
        client.force_authenticate(world[kind])
        return client
    if kind in ("portal", "throttled portal"):
        client.credentials(HTTP_AUTHORIZATION="Token " + world["portal"])
    if kind == "wrong token":
        client.credentials(HTTP_AUTHORIZATION="Token 0123456789abcdef")
    if kind == "throttled portal":
        assert client.get("/api/v1/partners/").status_code == 200  # the one request a minute allowed
    if kind == "locked-out address":
        client.credentials(HTTP_AUTHORIZATION="Token wrong")
        assert client.get("/api/v1/partners/").status_code == 401  # the one failure a minute allowed
    return client


def refusal_messages(world: dict, language: str, *, header: bool = True) -> list[tuple[str, int, str, list]]:
    """Send every bad request in ``language`` (by Accept-Language; the default with ``header=False``)."""
    answers = []
    for kind, method, url, extra, status in BAD_REQUESTS:
        client = api_client(kind, world)
        language_header = {"HTTP_ACCEPT_LANGUAGE": language} if header else {}
        response = getattr(client, method)(f"/api/v1/{url}", **extra, **language_header)
        assert response.status_code == status, (kind, url, response.status_code, response.content[:300])
        assert response["Content-Type"] == "application/json", (url, response["Content-Type"])
        body = response.json()
        assert body["error"] in ERROR_CODES, (url, body)
        messages = [body["detail"]] + [
            m for name, ms in body.items() if name not in ("error", "detail") for m in ms
        ]
        answers.append((kind, status, url, messages))
        cache_clear_throttles()
    return answers


@pytest.fixture
def api_world(settings):
    settings.LANGUAGE_CODE = "zh-hans"  # the product's default (the suite runs in English)
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {
            **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"],
            "portal": "1/min",
            "auth_failure": "1/min",
        },
    }
    create_tree()
    staff = create_staff("api-staff")
    staff.user_permissions.add(*Permission.objects.filter(codename__in=["add_partner", "add_loginmonth"]))
    return {
        "staff": staff,
        "viewer without permissions": create_staff("no-perms", viewer=False),
        "portal": portal_token_issue(partner=Partner.objects.get(code="A1")),
    }


def cache_clear_throttles() -> None:
    """Each bad request from a clean slate: the one-a-minute limits above are for the throttled clients only."""
    client = get_redis_connection("default")
    for key in client.scan_iter(match=redis_keys.throttle("*", "*")):
        client.delete(key)


@pytest.mark.django_db
@pytest.mark.time_machine(CLOCK, tick=False)
def test_api_errors_are_wholly_english_under_accept_language_en(api_world):
    answers = refusal_messages(api_world, "en")
    assert len(answers) == len(BAD_REQUESTS)
    assert [(kind, url, m) for kind, _, url, ms in answers for m in ms if CJK.search(m)] == []


@pytest.mark.django_db
@pytest.mark.time_machine(CLOCK, tick=False)
@pytest.mark.parametrize("language", ["zh-hans", "zh-CN"])
def test_api_errors_are_wholly_chinese_under_accept_language_zh(api_world, language):
    answers = refusal_messages(api_world, language)
    not_chinese = [(url, m) for _, _, url, ms in answers for m in ms if not CJK.search(m)]
    english_left = [(url, m) for _, _, url, ms in answers for m in ms if english_words_in_chinese(m)]
    assert (not_chinese, english_left) == ([], [])


@pytest.mark.django_db
@pytest.mark.time_machine(CLOCK, tick=False)
def test_without_accept_language_the_api_speaks_the_products_language(api_world):
    answers = refusal_messages(api_world, "", header=False)
    not_chinese = [(url, m) for _, _, url, ms in answers for m in ms if not CJK.search(m)]
    english_left = [(url, m) for _, _, url, ms in answers for m in ms if english_words_in_chinese(m)]
    assert (not_chinese, english_left) == ([], [])
    throttled = next(ms[0] for kind, _, _, ms in answers if kind == "throttled portal")
    assert re.fullmatch(r"请求已被限流。 ?预计 \d+ 秒后可用。", throttled), throttled
