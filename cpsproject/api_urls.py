"""Every /api/v1/ route, in one place so the contract is readable at a glance."""

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import include, path
from django.utils.translation import gettext
from django.views import defaults
from drf_spectacular.renderers import (
    OpenApiJsonRenderer,
    OpenApiJsonRenderer2,
    OpenApiYamlRenderer,
    OpenApiYamlRenderer2,
)
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.routers import SimpleRouter

from partners.api import PartnerViewSet

# JSON first, like the rest of the API (drf-spectacular defaults to YAML): ?format=yaml for YAML; a browser
# gets the JSON on the browsable API's page, as from every other endpoint.
SCHEMA_RENDERERS = [
    OpenApiJsonRenderer2,
    OpenApiJsonRenderer,
    OpenApiYamlRenderer,
    OpenApiYamlRenderer2,
    BrowsableAPIRenderer,
]

router = SimpleRouter(trailing_slash=True)
router.register("partners", PartnerViewSet, basename="partner")

urlpatterns = [
    path("", include(router.urls)),
    path("", include("stats.urls")),
    path("", include("loginlog.urls")),
    path("", include("conversions.urls")),
    path("", include("quality.urls")),
    # The OpenAPI 3 schema of the routes above, and Swagger UI from local static files (drf-spectacular's
    # Redoc page is left out: its template loads fonts from Google).
    path("schema/", SpectacularAPIView.as_view(renderer_classes=SCHEMA_RENDERERS), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """The project's 404 for a path no route answers: JSON in the API's error shape under /api/, else Django's."""
    if request.path.startswith("/api/"):
        detail = gettext("No API endpoint has this address; the endpoints are listed at /api/v1/docs/.")
        return JsonResponse({"error": "not_found", "detail": detail}, status=404)
    return defaults.page_not_found(request, exception)
