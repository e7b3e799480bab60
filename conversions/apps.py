from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ConversionsConfig(AppConfig):
    name = "conversions"
    verbose_name = _("Conversions")
    default_auto_field = "django.db.models.BigAutoField"
