"""Traffic quality per partner and business day, the networks staff list, and the findings staff review."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from partners.models import Partner

# Upper bounds (seconds, exclusive) of the click-to-order histogram: under 10 s, 1 min, 10 min, 1 h, 1 day, longer.
ORDER_SECONDS_BINS = (10, 60, 600, 3600, 86400)


class QualityDay(models.Model):
    """One partner-day of signals over the partner's own page views, automated ones included.

    The flush writes what the consumer counted (absolute values); ``reconcile`` overwrites it with the exact
    recount from the archive and sets ``reconciled_at``, after which the flush leaves the row alone.
    """

    partner = models.ForeignKey(
        Partner, verbose_name=_("partner"), on_delete=models.CASCADE, related_name="quality_days"
    )
    date = models.DateField(verbose_name=_("date"))
    pv = models.BigIntegerField(verbose_name=_("views"), default=0)
    automated_pv = models.BigIntegerField(verbose_name=_("automated views"), default=0)
    repeat_pv = models.BigIntegerField(verbose_name=_("repeat views"), default=0)
    # Views that carried a valid client address: the denominator of the concentration share.
    addressed_pv = models.BigIntegerField(verbose_name=_("views with an address"), default=0)
    distinct_ips = models.BigIntegerField(verbose_name=_("distinct addresses"), default=0)
    distinct_networks = models.BigIntegerField(verbose_name=_("distinct networks"), default=0)
    # The busiest addresses, busiest first: [[address, views], ...] (staff only).
    top_addresses = models.JSONField(verbose_name=_("busiest addresses"), default=list)
    top_addresses_pv = models.BigIntegerField(verbose_name=_("views of the busiest addresses"), default=0)
    listed_pv = models.BigIntegerField(verbose_name=_("views from listed networks"), default=0)
    # Views per quarter hour of the business day (96 counts): what spikes and drops are measured on.
    quarters = models.JSONField(verbose_name=_("views per quarter hour"), default=list)
    # The partner's own orders paid that day (as attributed), those attributed by a view, how long after the
    # view they were paid (ORDER_SECONDS_BINS), and the median of that time.
    orders = models.BigIntegerField(verbose_name=_("orders"), default=0)
    orders_by_view = models.BigIntegerField(verbose_name=_("orders attributed by a view"), default=0)
    order_seconds = models.JSONField(verbose_name=_("time from view to order"), default=list)
    median_seconds_to_order = models.FloatField(
        verbose_name=_("median seconds from view to order"), null=True, blank=True
    )
    reconciled_at = models.DateTimeField(verbose_name=_("reconciled at"), null=True, blank=True)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("traffic quality day")
        verbose_name_plural = _("traffic quality days")
        constraints = [models.UniqueConstraint(fields=["partner", "date"], name="quality_day_unique")]
        indexes = [models.Index(fields=["date"])]

    def __str__(self) -> str:
        return f"{self.partner_id} {self.date}"


class ListedNetwork(models.Model):
    """An address range staff listed (data centres, proxies), imported as a whole by ``import_networks``."""

    cidr = models.CharField(verbose_name=_("network"), max_length=64)
    label = models.CharField(verbose_name=_("label"), max_length=100, blank=True)
    imported_at = models.DateTimeField(verbose_name=_("imported at"), auto_now_add=True)

    class Meta:
        verbose_name = _("listed network")
        verbose_name_plural = _("listed networks")

    def __str__(self) -> str:
        return f"{self.cidr} {self.label}"


class Finding(models.Model):
    """A partner-day that broke a rule: the measured value, the threshold, and what staff decided."""

    class Rule(models.TextChoices):
        AUTOMATED = "automated", _("automated share")
        REPEATS = "repeats", _("repeat views")
        CONCENTRATION = "concentration", _("address concentration")
        LISTED_NETWORKS = "listed_networks", _("listed networks")
        FAST_ORDERS = "fast_orders", _("fast orders")
        CONVERSION_OUTLIER = "conversion_outlier", _("conversion outlier")

    class Status(models.TextChoices):
        OPEN = "open", _("open")
        CLEARED = "cleared", _("cleared")
        CONFIRMED = "confirmed", _("confirmed")

    partner = models.ForeignKey(
        Partner, verbose_name=_("partner"), on_delete=models.CASCADE, related_name="quality_findings"
    )
    date = models.DateField(verbose_name=_("date"))
    rule = models.CharField(verbose_name=_("rule"), max_length=32, choices=Rule.choices)
    value = models.FloatField(verbose_name=_("measured value"))
    threshold = models.FloatField(verbose_name=_("threshold"))
    status = models.CharField(
        verbose_name=_("status"), max_length=16, choices=Status.choices, default=Status.OPEN
    )
    reason = models.TextField(verbose_name=_("reason"), blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("resolved by"),
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    resolved_at = models.DateTimeField(verbose_name=_("resolved at"), null=True, blank=True)
    found_at = models.DateTimeField(verbose_name=_("found at"), auto_now_add=True)

    class Meta:
        verbose_name = _("traffic to review")
        verbose_name_plural = _("traffic to review")
        constraints = [models.UniqueConstraint(fields=["partner", "date", "rule"], name="finding_unique")]
        indexes = [models.Index(fields=["status", "date"]), models.Index(fields=["date"])]

    def __str__(self) -> str:
        # The admin's heading and breadcrumb of a finding: the partner's code and the rule's name, not ids.
        return f"{self.partner.code} {self.date} {self.get_rule_display()}"
