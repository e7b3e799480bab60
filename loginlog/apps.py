from django.apps import AppConfig


class LoginlogConfig(AppConfig):
    name = "loginlog"
    verbose_name = "User logins"
