from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models

MAX_LEVEL = 3
CODE_VALIDATOR = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z",  # \Z, not $: $ also matches before a trailing newline
    "A code is letters, digits, '.', '_' or '-', starting with a letter or digit.",
)


class Partner(models.Model):
    """A traffic partner; partners form a tree of at most ``MAX_LEVEL`` levels.

    ``path`` holds the ids from the root down to this partner (``/3/17/42/``) so that a subtree is one
    indexed ``LIKE '/3/17/%'`` query. ``level`` and ``path`` are maintained by ``partners.services``.
    """

    code = models.CharField(max_length=64, unique=True, validators=[CODE_VALIDATOR])
    name = models.CharField(max_length=200)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    level = models.PositiveSmallIntegerField(default=1, editable=False)
    path = models.CharField(max_length=255, db_index=True, editable=False, default="")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["path"]

    def __str__(self) -> str:
        return f"{self.code} ({self.name})"

    def clean(self) -> None:
        if self.parent_id is None:
            return
        parent = self.parent
        if self.pk and (parent.pk == self.pk or parent.path.startswith(self.path)):
            raise ValidationError({"parent": "A partner cannot be its own ancestor (that would be a cycle)."})
        if parent.level >= MAX_LEVEL:
            raise ValidationError(
                {
                    "parent": f"Partners are at most {MAX_LEVEL} levels deep; {parent.code} is level {parent.level}."
                }
            )

    @property
    def ancestor_ids(self) -> list[int]:
        """Return the ids from the root down to the parent."""
        return [int(part) for part in self.path.strip("/").split("/")[:-1] if part]


class PortalAccount(models.Model):
    """Ties a portal user (API token holder) to the partner whose subtree it may see."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="portal_account"
    )
    partner = models.ForeignKey(Partner, on_delete=models.CASCADE, related_name="portal_accounts")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"portal of {self.partner.code}"
