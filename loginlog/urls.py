from django.urls import path

from loginlog import api

urlpatterns = [
    path("logins/", api.record_login, name="logins-record"),
    path("logins/active/", api.active, name="logins-active"),
    path("logins/counts/", api.counts, name="logins-counts"),
    path("logins/<str:user_type>/<str:user_id>/", api.user_logins, name="logins-user"),
]
