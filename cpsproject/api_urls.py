"""Every /api/v1/ route, in one place so the contract is readable at a glance."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from partners.api import PartnerViewSet

router = SimpleRouter(trailing_slash=True)
router.register("partners", PartnerViewSet, basename="partner")

urlpatterns = [
    path("", include(router.urls)),
    path("", include("stats.urls")),
    path("", include("loginlog.urls")),
]
