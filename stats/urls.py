from django.urls import path

from stats.read import api

urlpatterns = [
    path("partners/<str:code>/stats/", api.partner_stats, name="partner-stats"),
    path("partners/<str:code>/buckets/", api.partner_buckets, name="partner-buckets"),
    path("rankings/partners/", api.partner_rankings, name="partner-rankings"),
    path("series/", api.series, name="series"),
]
