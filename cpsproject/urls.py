from django.contrib import admin
from django.urls import include, path

from stats.metrics_view import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    # Django's set_language view: the language switch in the admin header posts to it.
    path("i18n/", include("django.conf.urls.i18n")),
    path("api/v1/", include("cpsproject.api_urls")),
    # Prometheus scrapes: staff session or Authorization: Bearer $CPS_METRICS_TOKEN (stats/metrics_view.py).
    path("metrics", metrics_view, name="metrics"),
]
# A path nothing answers: under /api/ in the API's one error shape (cpsproject.api_urls), elsewhere Django's page.
handler404 = "cpsproject.api_urls.not_found"
