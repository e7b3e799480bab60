from django.urls import path

from quality import api

urlpatterns = [
    path("partners/<str:code>/quality/", api.partner_quality, name="partner-quality"),
    path("quality/findings/", api.findings, name="quality-findings"),
]
