from django.db import models
from django.utils.formats import date_format
from django.utils.translation import gettext_lazy as _

# The configured user types as staff read them; a type added in the settings shows as it is spelled.
USER_TYPE_LABELS = {"client": _("client"), "office": _("office")}


def user_type_label(user_type: str) -> str:
    return str(USER_TYPE_LABELS.get(user_type, user_type))


class LoginMonth(models.Model):
    """One user's logins in one month, synced weekly from the Redis month bitmap.

    ``days`` has bit ``d - 1`` set when the user logged in on day ``d`` of the month.
    """

    user_type = models.CharField(verbose_name=_("user type"), max_length=32)
    user_id = models.PositiveBigIntegerField(verbose_name=_("user id"))
    month = models.DateField(verbose_name=_("month"), help_text=_("first day of the month"))
    days = models.PositiveIntegerField(verbose_name=_("days logged in"), default=0)
    synced_at = models.DateTimeField(verbose_name=_("synced at"), auto_now=True)

    class Meta:
        verbose_name = _("login month")
        verbose_name_plural = _("login months")
        constraints = [
            models.UniqueConstraint(fields=["user_type", "user_id", "month"], name="loginmonth_unique"),
        ]
        indexes = [models.Index(fields=["month", "user_type"])]
        ordering = ["-month", "user_type", "user_id"]

    def __str__(self) -> str:
        return _("%(user_type)s %(user_id)s, %(month)s") % {
            "user_type": user_type_label(self.user_type),
            "user_id": self.user_id,
            "month": date_format(self.month, "YEAR_MONTH_FORMAT"),
        }

    def day_numbers(self) -> list[int]:
        return [d for d in range(1, 32) if self.days >> (d - 1) & 1]
