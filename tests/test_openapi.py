"""The API's OpenAPI 3 schema and its docs pages, as a partner-portal developer finds them."""

import re

import pytest
import yaml
from django.contrib.staticfiles import finders
from django.urls import URLPattern, URLResolver
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

from cpsproject import api_urls

pytestmark = pytest.mark.django_db

API = "/api/v1/"
DOCS_ROUTES = {"schema/", "docs/"}


def route_paths(patterns, prefix: str = "") -> set[str]:
    """Every route under ``patterns`` as an OpenAPI path: ``partners/<str:code>/`` → ``partners/{code}/``."""
    found = set()
    for pattern in patterns:
        text = str(pattern.pattern).lstrip("^").rstrip("$")
        text = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", text)  # router regexes
        text = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", text)  # path converters
        if isinstance(pattern, URLResolver):
            found |= route_paths(pattern.url_patterns, prefix + text)
        elif isinstance(pattern, URLPattern):
            found.add(prefix + text)
    return found


@pytest.fixture
def schema() -> dict:
    response = APIClient().get(API + "schema/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"  # JSON by default, like the rest of the API
    return response.json()


def test_the_schema_is_valid_openapi_3_and_lists_every_route_of_the_api(schema):
    validate_schema(schema)  # drf-spectacular's check against the OpenAPI 3 JSON schema; raises if invalid
    assert schema["openapi"].startswith("3.")
    routes = {API + path for path in route_paths(api_urls.urlpatterns) if path not in DOCS_ROUTES}
    assert (
        len(routes) == 15
    )  # with the conversions (partner days, orders, statements) and quality (days, findings)
    assert set(schema["paths"]) == routes
    assert set(schema["paths"]["/api/v1/partners/"]) == {"get", "post"}
    assert set(schema["paths"]["/api/v1/logins/"]) == {"post"}


def test_the_schema_served_as_yaml_is_the_same(schema):
    response = APIClient().get(API + "schema/?format=yaml")
    assert response.status_code == 200
    assert yaml.safe_load(response.content) == schema


def test_every_operation_documents_its_parameters_and_responses(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            assert operation.get("summary"), where
            for parameter in operation.get("parameters", []):
                assert parameter.get("description"), (where, parameter["name"])
            assert any(code.startswith("2") for code in operation["responses"]), where
            assert {"401", "403", "429"} <= set(operation["responses"]), where


@pytest.mark.parametrize(
    ("path", "media_types"),
    [
        ("/api/v1/partners/{code}/stats/", {"application/json", "text/csv"}),
        ("/api/v1/partners/{code}/buckets/", {"application/json", "text/csv"}),
        ("/api/v1/rankings/partners/", {"application/json", "text/csv"}),
        ("/api/v1/series/", {"application/json", "text/csv"}),
        ("/api/v1/logins/active/", {"application/json", "text/csv"}),
        ("/api/v1/logins/counts/", {"application/json"}),
        ("/api/v1/partners/{code}/conversions/", {"application/json", "text/csv"}),
        ("/api/v1/orders/", {"application/json", "text/csv"}),
        ("/api/v1/partners/{code}/statements/", {"application/json", "text/csv"}),
    ],
)
def test_the_schema_shows_which_endpoints_answer_csv_and_that_errors_are_json(schema, path, media_types):
    operation = schema["paths"][path]["get"]
    assert set(operation["responses"]["200"]["content"]) == media_types
    assert set(operation["responses"]["400"]["content"]) == {"application/json"}
    names = {p["name"] for p in operation.get("parameters", [])}
    assert ("format" in names) == ("text/csv" in media_types)


def test_the_series_parameters_are_documented_with_their_choices(schema):
    parameters = {p["name"]: p for p in schema["paths"]["/api/v1/series/"]["get"]["parameters"]}
    assert set(parameters) == {"precision", "partner", "start", "end", "format"}
    assert sorted(parameters["precision"]["schema"]["enum"]) == [1, 5, 60, 300, 3600, 18000, 86400]
    assert parameters["format"]["schema"]["enum"] == ["csv", "json"]
    assert "whole business day" in schema["paths"]["/api/v1/series/"]["get"]["description"]


def test_the_docs_page_loads_its_scripts_from_local_static_files_only():
    response = APIClient().get(API + "docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert not re.search(r"""(?:src|href)=["']?(?:https?:)?//""", html), html
    assert not re.search(r"https?://(?!127\.0\.0\.1|localhost|testserver)", html), html
    assets = re.findall(r"""(?:src|href)=["']([^"']+\.(?:js|css|png))""", html)
    assert assets and all(url.startswith("/static/drf_spectacular_sidecar/") for url in assets), assets
    # ... and the files are there to serve (collectstatic copies them; runserver serves them from the app).
    assert all(finders.find(url.removeprefix("/static/")) for url in assets), assets
    assert "/api/v1/schema/" in html


def test_query_parameters_are_documented_from_their_serializers_with_types_and_bounds(schema):
    def parameters(path: str) -> dict:
        return {p["name"]: p["schema"] for p in schema["paths"][API + path]["get"]["parameters"]}

    rankings = parameters("rankings/partners/")
    assert (rankings["limit"]["type"], rankings["limit"]["minimum"], rankings["limit"]["maximum"]) == (
        "integer",
        1,
        1000,
    )
    assert rankings["window"]["enum"] == ["1h", "24h", "7d"] and rankings["window"]["default"] == "24h"
    assert rankings["scope"]["enum"] == ["tree", "self"]
    stats = parameters("partners/{code}/stats/")
    assert stats["start"] == stats["end"] == {"type": "string", "format": "date"}
    assert parameters("partners/{code}/buckets/")["date"] == {"type": "string", "format": "date"}
    series = parameters("series/")
    assert series["precision"]["type"] == "integer" and series["precision"]["default"] == 60
    assert series["partner"]["maxLength"] == series["start"]["maxLength"] == 64
    active = parameters("logins/active/")
    assert (active["page"]["type"], active["page"]["minimum"]) == ("integer", 1)
    assert active["user_type"]["enum"] == ["client", "office"]
    assert active["month"]["pattern"] == "^[0-9]{4}-[0-9]{2}$"
    counts = schema["paths"][API + "logins/counts/"]["get"]["parameters"]
    assert {p["name"]: p.get("required", False) for p in counts} == {"user_type": True, "date": False}
    assert parameters("partners/")["level"] == {"enum": [1, 2, 3], "type": "integer"}


def test_a_parameter_out_of_its_documented_bounds_is_a_400_naming_it():
    from tests.factories import staff_client

    client = staff_client()
    refused = client.get(API + "rankings/partners/?limit=1001&window=24h")
    assert refused.status_code == 400
    assert refused.json() == {
        "error": "invalid",
        "detail": "limit must be between 1 and 1000.",
        "limit": ["limit must be between 1 and 1000."],
    }
    # Every bad parameter at once, each under its name.
    both = client.get(API + "logins/active/?page=0&user_type=robot").json()
    assert both["page"] == ["page must be between 1 and 1000000000."]
    assert both["user_type"] == ["user_type must be one of client, office, not 'robot'."]
    missing = client.get(API + "logins/counts/").json()
    assert missing["user_type"] == ["user_type is required (one of the configured user types)."]
