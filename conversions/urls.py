from django.urls import path

from conversions import api

urlpatterns = [
    path("partners/<str:code>/conversions/", api.partner_conversions, name="partner-conversions"),
    path("partners/<str:code>/statements/", api.partner_statements, name="partner-statements"),
    path("orders/", api.orders, name="orders"),
]
