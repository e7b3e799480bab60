from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # Django's set_language view: the language switch in the admin header posts to it.
    path("i18n/", include("django.conf.urls.i18n")),
    path("api/v1/", include("cpsproject.api_urls")),
]
