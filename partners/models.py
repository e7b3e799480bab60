from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

MAX_LEVEL = 3
CODE_VALIDATOR = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z",  # \Z, not $: $ also matches before a trailing newline
    _("A code is letters, digits, '.', '_' or '-', starting with a letter or digit."),
)


class Partner(models.Model):
    """A traffic partner; partners form a tree of at most ``MAX_LEVEL`` levels.

    ``path`` holds the ids from the root down to this partner (``/3/17/42/``) so that a subtree is one
    indexed ``LIKE '/3/17/%'`` query. ``level`` and ``path`` are maintained by ``partners.services``.
    """

    code = models.CharField(verbose_name=_("code"), max_length=64, unique=True, validators=[CODE_VALIDATOR])
    name = models.CharField(verbose_name=_("name"), max_length=200)
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        verbose_name=_("parent partner"),
        on_delete=models.PROTECT,
        related_name="children",
    )
    level = models.PositiveSmallIntegerField(verbose_name=_("level"), default=1, editable=False)
    path = models.CharField(verbose_name=_("path"), max_length=255, db_index=True, editable=False, default="")
    # Its own commission rate in basis points; empty: its level's default (CPS_COMMISSION_BP).
    commission_bp = models.PositiveIntegerField(
        verbose_name=_("commission rate (bp)"), null=True, blank=True, validators=[MaxValueValidator(10_000)]
    )
    is_active = models.BooleanField(verbose_name=_("active"), default=True)
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("partner")
        verbose_name_plural = _("partners")
        ordering = ["path"]

    def __str__(self) -> str:
        return f"{self.code} ({self.name})"

    def clean(self) -> None:
        parent = self.parent
        if parent is None:
            return
        if self.pk and (parent.pk == self.pk or parent.path.startswith(self.path)):
            raise ValidationError(
                {"parent": _("A partner cannot be its own ancestor (that would be a cycle).")}
            )
        if parent.level >= MAX_LEVEL:
            raise ValidationError(
                {
                    "parent": _("Partners are at most %(max)d levels deep; %(code)s is level %(level)d.")
                    % {"max": MAX_LEVEL, "code": parent.code, "level": parent.level}
                }
            )

    @property
    def ancestor_ids(self) -> list[int]:
        """Return the ids from the root down to the parent."""
        return [int(part) for part in self.path.strip("/").split("/")[:-1] if part]


class PortalAccount(models.Model):
    """Ties a portal user (API token holder) to the partner whose subtree it may see."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="portal_account",
    )
    partner = models.ForeignKey(
        Partner, verbose_name=_("partner"), on_delete=models.CASCADE, related_name="portal_accounts"
    )
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("portal account")
        verbose_name_plural = _("portal accounts")

    def __str__(self) -> str:
        return f"portal of {self.partner.code}"
