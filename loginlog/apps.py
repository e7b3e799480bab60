from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class LoginlogConfig(AppConfig):
    name = "loginlog"
    verbose_name = _("User logins")

    def ready(self) -> None:
        from loginlog.bitmaps import queue_logins
        from loginlog.events import parse_login
        from loginlog.layout import upgrade_login_layout
        from stats.plugins import register_counter, register_event_type, register_layout_upgrade

        register_event_type("login", parse_login)
        register_counter("logins", event_type="login", queue=queue_logins)
        register_layout_upgrade("logins", upgrade_login_layout)
