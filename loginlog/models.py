from django.db import models


class LoginMonth(models.Model):
    """One user's logins in one month, synced weekly from the Redis month bitmap.

    ``days`` has bit ``d - 1`` set when the user logged in on day ``d`` of the month.
    """

    user_type = models.CharField(max_length=32)
    user_id = models.PositiveBigIntegerField()
    month = models.DateField(help_text="first day of the month")
    days = models.PositiveIntegerField(default=0)
    synced_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user_type", "user_id", "month"], name="loginmonth_unique"),
        ]
        indexes = [models.Index(fields=["month", "user_type"])]
        ordering = ["-month", "user_type", "user_id"]

    def __str__(self) -> str:
        return f"{self.user_type} {self.user_id} {self.month:%Y-%m}: {self.day_numbers()}"

    def day_numbers(self) -> list[int]:
        return [d for d in range(1, 32) if self.days >> (d - 1) & 1]
