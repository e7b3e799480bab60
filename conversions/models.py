"""Orders, their events, the commission ledger and the monthly statements.

Money is integers in minor units everywhere: ``amount`` fields in the order's own currency (ISO 4217
exponent), ``*_reporting`` fields and every ledger amount in the reporting currency
(``conversion_setting("REPORTING_CURRENCY")``). The only decimal is an exchange rate, and the only rounding is
half up to the reporting currency's minor unit, once per event.

Append-only: an order, its events and its ledger entries are written once and never edited or deleted; a
refund appends events and entries. Each row carries the Kafka event that produced it (``event_id``,
``source_event_id``, unique), so a batch read again after a crash adds nothing.
"""

from django.core.validators import MaxValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from partners.models import Partner

EVENT_ID_LENGTH = 128


class ExchangeRate(models.Model):
    """Units of the reporting currency per unit of ``currency``, from business day ``valid_from`` on."""

    currency = models.CharField(verbose_name=_("currency"), max_length=3)
    valid_from = models.DateField(verbose_name=_("valid from"))
    rate = models.DecimalField(verbose_name=_("rate"), max_digits=24, decimal_places=12)
    imported_at = models.DateTimeField(verbose_name=_("imported at"), auto_now_add=True)

    class Meta:
        verbose_name = _("exchange rate")
        verbose_name_plural = _("exchange rates")
        ordering = ["currency", "-valid_from"]
        constraints = [models.UniqueConstraint(fields=["currency", "valid_from"], name="rate_once_a_day")]

    def __str__(self) -> str:
        return f"{self.currency} {self.valid_from}: {self.rate}"


class Order(models.Model):
    """A sale, as its ``paid`` event made it: attribution, chain, rates and amounts fixed at that moment."""

    class Attribution(models.TextChoices):
        EXPLICIT = "explicit", _("explicit partner")
        VIEW = "view", _("last partner page view")
        NONE = "none", _("no partner")

    order_id = models.CharField(verbose_name=_("order id"), max_length=EVENT_ID_LENGTH, unique=True)
    # The buyer: used to attribute and to count distinct buyers; never leaves the product.
    openid = models.CharField(verbose_name=_("buyer"), max_length=EVENT_ID_LENGTH)
    partner = models.ForeignKey(
        Partner,
        verbose_name=_("partner"),
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="orders",
    )
    # The partner ids from the root down to ``partner`` when the order was attributed (``Partner.path``
    # then): subtree figures follow the tree of that moment, so a partner moved later does not move old orders.
    # No index of its own: ``order_subtree_days`` starts with it, and each index costs every order's insert.
    path = models.CharField(verbose_name=_("path"), max_length=255, blank=True, default="")
    attribution = models.CharField(verbose_name=_("attribution"), max_length=16, choices=Attribution.choices)
    view_event_id = models.CharField(
        verbose_name=_("attributing page view"), max_length=EVENT_ID_LENGTH, blank=True, default=""
    )
    view_ts = models.DateTimeField(verbose_name=_("page view time"), null=True, blank=True)
    view_url = models.CharField(verbose_name=_("page view URL"), max_length=2048, blank=True, default="")
    # The attributed partner's rate and the split over [partner, parent, grandparent], in basis points.
    commission_bp = models.PositiveIntegerField(
        verbose_name=_("commission rate (bp)"), default=0, validators=[MaxValueValidator(10_000)]
    )
    chain = models.JSONField(verbose_name=_("commission chain"), default=list)
    currency = models.CharField(verbose_name=_("currency"), max_length=3)
    amount = models.BigIntegerField(verbose_name=_("amount paid"))
    rate = models.DecimalField(verbose_name=_("exchange rate"), max_digits=24, decimal_places=12)
    rate_valid_from = models.DateField(verbose_name=_("rate valid from"))
    amount_reporting = models.BigIntegerField(verbose_name=_("amount paid, reporting currency"))
    paid_event_id = models.CharField(verbose_name=_("paid event"), max_length=EVENT_ID_LENGTH, unique=True)
    paid_at = models.DateTimeField(verbose_name=_("paid at"))
    paid_date = models.DateField(verbose_name=_("paid on"), db_index=True)  # business day
    recorded_at = models.DateTimeField(verbose_name=_("recorded at"), auto_now_add=True)

    class Meta:
        verbose_name = _("order")
        verbose_name_plural = _("orders")
        ordering = ["-paid_at"]
        indexes = [
            models.Index(fields=["partner", "paid_date"]),
            # A subtree's orders of a range (its path prefix, then the days) read from the index alone: the
            # per-day sums, the distinct buyers, the count and the orders list's page of ids (newest first).
            models.Index(
                fields=["path", "paid_date", "paid_at", "partner", "amount_reporting", "openid"],
                name="order_subtree_days",
            ),
        ]

    def __str__(self) -> str:
        return self.order_id


class OrderEvent(models.Model):
    """Every counted event of an order: its payment, each refund, a cancellation."""

    class Status(models.TextChoices):
        PAID = "paid", _("paid")
        REFUNDED = "refunded", _("refunded")
        CANCELLED = "cancelled", _("cancelled")

    # The statuses that take money back: what a refund total, a day's refunds and the recount add up.
    REVERSALS = (Status.REFUNDED, Status.CANCELLED)

    event_id = models.CharField(verbose_name=_("event id"), max_length=EVENT_ID_LENGTH, unique=True)
    order = models.ForeignKey(Order, verbose_name=_("order"), on_delete=models.PROTECT, related_name="events")
    status = models.CharField(verbose_name=_("status"), max_length=16, choices=Status.choices)
    ts = models.DateTimeField(verbose_name=_("time"))
    date = models.DateField(verbose_name=_("business day"), db_index=True)
    # Paid: what was paid; refunded: the part refunded now; cancelled: what was left to refund.
    amount = models.BigIntegerField(verbose_name=_("amount"))
    amount_reporting = models.BigIntegerField(verbose_name=_("amount, reporting currency"))
    recorded_at = models.DateTimeField(verbose_name=_("recorded at"), auto_now_add=True)

    class Meta:
        verbose_name = _("order event")
        verbose_name_plural = _("order events")
        ordering = ["ts", "id"]
        # The refunds and cancellations of a range by day, with their amount, without reading the rows.
        indexes = [
            models.Index(
                fields=["status", "date", "order", "amount_reporting"], name="orderevent_reversal_days"
            )
        ]

    def __str__(self) -> str:
        return f"{self.order_id} {self.status} {self.event_id}"


class HeldRefund(models.Model):
    """A refund or cancellation counted before its order's ``paid`` event: applied when the order arrives."""

    event_id = models.CharField(verbose_name=_("event id"), max_length=EVENT_ID_LENGTH, unique=True)
    order_id = models.CharField(verbose_name=_("order id"), max_length=EVENT_ID_LENGTH, db_index=True)
    status = models.CharField(verbose_name=_("status"), max_length=16, choices=OrderEvent.Status.choices)
    ts = models.DateTimeField(verbose_name=_("time"))
    amount = models.BigIntegerField(verbose_name=_("amount"))
    currency = models.CharField(verbose_name=_("currency"), max_length=3)
    payload = models.TextField(verbose_name=_("event"))
    received_at = models.DateTimeField(verbose_name=_("received at"), auto_now_add=True)
    # Set once, never cleared: applied to its order, or given up on after HELD_REFUND_DAYS (a dead letter).
    applied_at = models.DateTimeField(verbose_name=_("applied at"), null=True, blank=True)
    expired_at = models.DateTimeField(verbose_name=_("expired at"), null=True, blank=True)

    class Meta:
        verbose_name = _("held refund")
        verbose_name_plural = _("held refunds")
        ordering = ["received_at"]

    def __str__(self) -> str:
        return f"{self.order_id} {self.status} {self.event_id}"


class LedgerEntry(models.Model):
    """One partner's part of an order's commission, or a change to it: append-only.

    For every order, each partner's entries add up to its share of the commission of the order's current net.
    """

    class Reason(models.TextChoices):
        COMMISSION = "commission", _("commission on a sale")
        REFUND = "refund", _("refund")
        CANCELLATION = "cancellation", _("cancellation")
        # Cancels one held or unpaid entry of a partner-day whose traffic review was confirmed (``CommissionHold``).
        QUALITY_REVERSAL = "quality_reversal", _("reversed after a traffic review")

    order = models.ForeignKey(Order, verbose_name=_("order"), on_delete=models.PROTECT, related_name="ledger")
    partner = models.ForeignKey(
        Partner, verbose_name=_("partner"), on_delete=models.PROTECT, related_name="ledger_entries"
    )
    amount = models.BigIntegerField(verbose_name=_("amount"))  # reporting currency, signed
    reason = models.CharField(verbose_name=_("reason"), max_length=16, choices=Reason.choices)
    share_bp = models.PositiveIntegerField(verbose_name=_("share (bp)"))
    source_event_id = models.CharField(verbose_name=_("source event"), max_length=EVENT_ID_LENGTH)
    event_ts = models.DateTimeField(verbose_name=_("event time"))
    event_date = models.DateField(verbose_name=_("event day"))
    # The event's business day, or the first open day when the event's month was already closed.
    booked_date = models.DateField(verbose_name=_("booked on"), db_index=True)
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("ledger entry")
        verbose_name_plural = _("ledger entries")
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["source_event_id", "partner"], name="ledger_once_per_event")
        ]
        indexes = [
            models.Index(fields=["partner", "booked_date"]),
            # A partner's commission per event day over a range, summed from the index alone.
            models.Index(fields=["partner", "event_date", "amount"], name="ledger_partner_event_days"),
        ]

    def __str__(self) -> str:
        return f"{self.order_id} {self.partner_id} {self.amount}"


class MonthClose(models.Model):
    """A month whose statements are written: no entry is booked into it again."""

    month = models.DateField(verbose_name=_("month"), unique=True)  # its first day
    closed_at = models.DateTimeField(verbose_name=_("closed at"), auto_now_add=True)

    class Meta:
        verbose_name = _("closed month")
        verbose_name_plural = _("closed months")
        ordering = ["-month"]

    def __str__(self) -> str:
        return self.month.strftime("%Y-%m")


class Statement(models.Model):
    """What a partner is owed for a closed month: the sum of its ledger entries booked in it, less those a traffic
    review held or reversed, plus those held from an earlier statement and released since (``CommissionHold``).

    For every statement: the entries booked in its month add up to ``amount - released_amount + held_amount +
    reversed_amount`` (and the same for the row counts).
    """

    partner = models.ForeignKey(
        Partner, verbose_name=_("partner"), on_delete=models.PROTECT, related_name="statements"
    )
    month = models.DateField(verbose_name=_("month"))  # its first day
    amount = models.BigIntegerField(verbose_name=_("amount"))
    rows = models.PositiveIntegerField(verbose_name=_("ledger entries"))
    # Entries booked in the month that an open traffic review kept out of ``amount`` at the close.
    held_amount = models.BigIntegerField(verbose_name=_("held amount"), default=0)
    held_rows = models.PositiveIntegerField(verbose_name=_("held entries"), default=0)
    # Entries held from an earlier statement whose review was cleared since: part of ``amount`` and ``rows``.
    released_amount = models.BigIntegerField(verbose_name=_("released amount"), default=0)
    released_rows = models.PositiveIntegerField(verbose_name=_("released entries"), default=0)
    # Entries booked in the month that a confirmed review cancelled, and the reversals booked in it: never paid.
    reversed_amount = models.BigIntegerField(verbose_name=_("reversed amount"), default=0)
    reversed_rows = models.PositiveIntegerField(verbose_name=_("reversed entries"), default=0)
    closed_at = models.DateTimeField(verbose_name=_("closed at"), auto_now_add=True)

    class Meta:
        verbose_name = _("statement")
        verbose_name_plural = _("statements")
        ordering = ["-month", "partner__code"]
        constraints = [models.UniqueConstraint(fields=["partner", "month"], name="statement_once_a_month")]

    def __str__(self) -> str:
        return f"{self.partner_id} {self.month:%Y-%m}"


class CommissionHold(models.Model):
    """A ledger entry not paid in its month's statement because its order's partner-day was under review.

    Written by ``close_month`` for an entry whose review is open at the close (``held_from``: that month), or by
    a confirmed review before the entry was paid (``held_from`` empty). Then set once, never cleared: the month
    whose statement paid it after the review was cleared (``released_in``), or the ``reversal`` entry that
    cancels it. The entry itself is never changed.
    """

    entry = models.OneToOneField(
        LedgerEntry, verbose_name=_("ledger entry"), on_delete=models.PROTECT, related_name="hold"
    )
    held_from = models.DateField(verbose_name=_("held from the statement of"), null=True, blank=True)
    released_in = models.DateField(verbose_name=_("paid in the statement of"), null=True, blank=True)
    reversal = models.OneToOneField(
        LedgerEntry,
        verbose_name=_("reversal"),
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="reverses",
    )
    # What the review said, as the reviewing app names it (e.g. "quality finding 12 (automated)").
    review = models.CharField(verbose_name=_("review"), max_length=200, blank=True)
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("held commission")
        verbose_name_plural = _("held commissions")
        ordering = ["-id"]
        indexes = [models.Index(fields=["held_from"]), models.Index(fields=["released_in"])]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(released_in__isnull=True) | models.Q(reversal__isnull=True),
                name="hold_released_or_reversed",
            )
        ]

    def __str__(self) -> str:
        return f"{self.entry_id} held from {self.held_from}"


class OrderDrift(models.Model):
    """One partner's orders and money of a business day as recorded, beside the archive's recount of them.

    Written by ``reconcile`` (``conversions.reconcile``): ``recorded_*`` is what the tables held before the
    recount, ``exact_*`` what the raw archive holds once the events the tables lacked are recorded. A row with
    no partner counts the orders attributed to none; that row is written for every recounted day, so a day
    with a row is a day whose orders were recounted (the API's ``reconciled``).
    """

    partner = models.ForeignKey(
        Partner,
        verbose_name=_("partner"),
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="order_drift",
    )
    date = models.DateField(verbose_name=_("business day"), db_index=True)
    recorded_orders = models.PositiveIntegerField(verbose_name=_("orders recorded"))
    exact_orders = models.PositiveIntegerField(verbose_name=_("orders in the archive"))
    # Reporting currency, minor units: paid that day, and refunded that day (whenever the order was paid).
    recorded_gross = models.BigIntegerField(verbose_name=_("gross recorded"))
    exact_gross = models.BigIntegerField(verbose_name=_("gross in the archive"))
    recorded_refunded = models.BigIntegerField(verbose_name=_("refunded recorded"))
    exact_refunded = models.BigIntegerField(verbose_name=_("refunded in the archive"))
    reconciled_at = models.DateTimeField(verbose_name=_("reconciled at"))

    class Meta:
        verbose_name = _("order drift")
        verbose_name_plural = _("order drift")
        ordering = ["-date", "partner__code"]
        constraints = [models.UniqueConstraint(fields=["partner", "date"], name="order_drift_once_a_day")]

    def __str__(self) -> str:
        return f"{self.partner_id} {self.date}"

    @property
    def drifted(self) -> bool:
        return (self.recorded_orders, self.recorded_gross, self.recorded_refunded) != (
            self.exact_orders,
            self.exact_gross,
            self.exact_refunded,
        )


class LedgerGate(models.Model):
    """One row that keeps a month's statements and its ledger in step (``conversions.ledger.books_open``).

    Every transaction that books ledger entries first holds this row in share mode; ``close_month`` holds it
    exclusively while it sums a month and closes it. So an entry is either committed before the sum is read
    (and in the statement), or booked after the month is closed (into the first open month): never neither.
    """

    id = models.PositiveSmallIntegerField(primary_key=True)

    class Meta:
        verbose_name = _("ledger gate")
        verbose_name_plural = _("ledger gate")

    def __str__(self) -> str:
        return f"ledger gate {self.id}"
