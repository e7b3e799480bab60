from django.urls import path

from stats import api

urlpatterns = [
    path("partners/<str:code>/stats/", api.partner_stats, name="partner-stats"),
    path("partners/<str:code>/buckets/", api.partner_buckets, name="partner-buckets"),
]
