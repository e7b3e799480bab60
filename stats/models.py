from django.db import models
from django.utils.formats import date_format
from django.utils.translation import gettext_lazy as _

from cpsproject.common.timeutil import to_local
from partners.models import Partner


class RawEventChunk(models.Model):
    """The SQL backend of the raw-event archive (``MONGO_URL`` unset): the events of a batch, a chunk per row.

    A row per event cost InnoDB 17-22 µs of CPU for each event (the row, its unique event id, its day index),
    more than the consumer spends on the event; a chunk of thousands costs it about what copying the bytes
    does. ``body`` is the chunk's columns as one JSON document (``stats.pipeline.archive`` reads and writes it).
    Rows are never updated: an event stored twice (a batch read again after a crash) is in two chunks, and
    every reader counts an event id once. ``first_day``..``last_day`` are the business days its events fall
    on, so a day's chunks are found by the index and a chunk is purged once its last day is.
    """

    id = models.BigAutoField(primary_key=True)
    first_day = models.DateField(verbose_name=_("first day"))
    last_day = models.DateField(verbose_name=_("last day"))
    events = models.PositiveIntegerField(verbose_name=_("events"))
    body = models.BinaryField(verbose_name=_("body"))

    class Meta:
        verbose_name = _("raw event chunk")
        verbose_name_plural = _("raw event chunks")
        indexes = [models.Index(fields=["last_day", "first_day"])]

    def __str__(self) -> str:
        return f"{self.events} raw events, {self.first_day}..{self.last_day}"


class DiscardedEvent(models.Model):
    """An event stored in a chunk and then refused by the counters: readers of the chunks leave it out."""

    # Not unique: MySQL's collations would take "e-1" and "E-1" for one id. Readers load the few rows into a set.
    event_id = models.CharField(verbose_name=_("event id"), max_length=128)
    discarded_at = models.DateTimeField(verbose_name=_("discarded at"), auto_now_add=True)

    class Meta:
        verbose_name = _("discarded event")
        verbose_name_plural = _("discarded events")

    def __str__(self) -> str:
        return self.event_id


class DeadLetter(models.Model):
    """An event the consumer could not count, kept with its raw bytes and where it came from."""

    class Reason(models.TextChoices):
        EMPTY = "empty", _("no value (a tombstone) or an empty one")
        TOO_LARGE = "too_large", _("payload over the size limit")
        NOT_UTF8 = "not_utf8", _("not UTF-8")
        NOT_JSON = "not_json", _("not JSON")
        NOT_OBJECT = "not_object", _("JSON but not an object")
        MISSING_FIELD = "missing_field", _("a required field is missing")
        UNKNOWN_TYPE = "unknown_type", _("unknown event type")
        BAD_FIELD = "bad_field", _("a field has a bad value")
        BAD_TS = "bad_ts", _("unreadable timestamp")
        TS_IN_FUTURE = "ts_in_future", _("timestamp too far in the future")
        TS_TOO_OLD = "ts_too_old", _("timestamp older than the maximum lateness")
        UNKNOWN_PARTNER = "unknown_partner", _("unknown partner code")
        INACTIVE_PARTNER = "inactive_partner", _("inactive partner")
        # Valid by the contract, yet a storage layer refused this event on its own (the error says why).
        UNSTORABLE = "unstorable", _("a storage layer refused the event")
        # The parser itself failed: a bug in the product, kept with its error rather than stopping the consumer.
        PARSE_ERROR = "parse_error", _("the parser failed")
        # A whole record batch: unknown codec, corrupt bytes or a compression bomb. Stored at the batch's base
        # offset; the detail names its offsets and record count.
        UNDECODABLE = "undecodable", _("a record batch that cannot be decoded")

    source = models.CharField(
        verbose_name=_("source"), max_length=255, help_text=_("Kafka topic, or file:PATH for a replay")
    )
    partition = models.IntegerField(verbose_name=_("partition"))
    offset = models.BigIntegerField(verbose_name=_("offset"))
    reason = models.CharField(verbose_name=_("reason"), max_length=32, choices=Reason.choices, db_index=True)
    detail = models.CharField(verbose_name=_("error"), max_length=500, blank=True, default="")
    raw = models.BinaryField(verbose_name=_("raw bytes"))
    received_at = models.DateTimeField(verbose_name=_("received at"), auto_now_add=True)

    class Meta:
        verbose_name = _("dead letter")
        verbose_name_plural = _("dead letters")
        constraints = [
            # A replay after a crash re-reads the same message: store it once.
            models.UniqueConstraint(
                fields=["source", "partition", "offset"], name="deadletter_once_per_message"
            )
        ]
        ordering = ["-received_at"]

    def __str__(self) -> str:
        return f"{self.reason} at {self.source}[{self.partition}]@{self.offset}"

    @property
    def raw_preview(self) -> str:
        return bytes(self.raw[:300]).decode("utf-8", errors="replace")


class BucketStat(models.Model):
    """PV of one partner (NULL: traffic with no partner) in one 5-minute bucket, as last flushed.

    ``generation`` is the id of the batch that created the Redis key; a key re-created by a late event after
    its bucket was flushed and deleted is a new generation, so every row holds an absolute value and a bucket's
    PV is the sum over its generations.
    """

    partner = models.ForeignKey(
        Partner, verbose_name=_("partner"), null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    start = models.DateTimeField(verbose_name=_("bucket start"))
    generation = models.CharField(verbose_name=_("generation"), max_length=32)
    pv = models.BigIntegerField(verbose_name=_("PV"), default=0)
    pv_self = models.BigIntegerField(verbose_name=_("own PV"), default=0)
    bot_pv = models.BigIntegerField(verbose_name=_("bot PV"), default=0)
    flushed_at = models.DateTimeField(verbose_name=_("flushed at"), auto_now=True)

    class Meta:
        verbose_name = _("5-minute statistic")
        verbose_name_plural = _("5-minute statistics")
        constraints = [
            models.UniqueConstraint(fields=["partner", "start", "generation"], name="bucketstat_unique"),
        ]
        indexes = [models.Index(fields=["start"])]

    def __str__(self) -> str:
        return _("%(partner)s, 5 minutes from %(start)s") % {
            "partner": _partner_title(self.partner),
            "start": date_format(to_local(self.start), "SHORT_DATETIME_FORMAT"),
        }


def _partner_title(partner: Partner | None) -> str:
    """How a title names a row's partner: its code and name, or the traffic with no partner."""
    if partner is None:
        return str(_("traffic without a partner"))
    return f"{partner.code} {partner.name}"


class DailyStat(models.Model):
    """One partner-day (NULL partner: traffic with no partner). What the API and admin show.

    Flush recomputes PV from bucket rows and UV from the stored HyperLogLogs merged with Redis; once
    ``reconciled_at`` is set the numbers are the exact recount and flush no longer changes them.
    """

    partner = models.ForeignKey(
        Partner,
        null=True,
        blank=True,
        verbose_name=_("partner"),
        on_delete=models.CASCADE,
        related_name="daily_stats",
    )
    date = models.DateField(verbose_name=_("date"))
    pv = models.BigIntegerField(verbose_name=_("PV"), default=0)
    pv_self = models.BigIntegerField(verbose_name=_("own PV"), default=0)
    uv = models.BigIntegerField(verbose_name=_("UV"), default=0)
    uv_self = models.BigIntegerField(verbose_name=_("own UV"), default=0)
    bot_pv = models.BigIntegerField(verbose_name=_("bot PV"), default=0)
    # The realtime numbers as last flushed, kept apart so that drift stays visible after reconciliation.
    realtime_pv = models.BigIntegerField(verbose_name=_("realtime PV"), default=0)
    realtime_pv_self = models.BigIntegerField(verbose_name=_("realtime own PV"), default=0)
    realtime_uv = models.BigIntegerField(verbose_name=_("realtime UV"), default=0)
    realtime_uv_self = models.BigIntegerField(verbose_name=_("realtime own UV"), default=0)
    hll = models.BinaryField(
        verbose_name=_("UV HyperLogLog"),
        null=True,
        blank=True,
        help_text=_("Redis HyperLogLog of the subtree's openids"),
    )
    hll_self = models.BinaryField(
        verbose_name=_("own UV HyperLogLog"),
        null=True,
        blank=True,
        help_text=_("Redis HyperLogLog of the partner's own openids"),
    )
    reconciled_at = models.DateTimeField(verbose_name=_("reconciled at"), null=True, blank=True)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("daily statistic")
        verbose_name_plural = _("daily statistics")
        constraints = [models.UniqueConstraint(fields=["partner", "date"], name="dailystat_unique")]
        indexes = [models.Index(fields=["date"])]
        ordering = ["-date", "partner__code"]

    def __str__(self) -> str:
        return _("%(partner)s on %(date)s") % {
            "partner": _partner_title(self.partner),
            "date": date_format(self.date, "SHORT_DATE_FORMAT"),
        }


class ReconcileDrift(models.Model):
    """Realtime versus exact numbers of one partner-day, recorded by every reconcile run."""

    partner = models.ForeignKey(
        Partner, verbose_name=_("partner"), null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    date = models.DateField(verbose_name=_("date"))
    realtime_pv = models.BigIntegerField(verbose_name=_("realtime PV"))
    exact_pv = models.BigIntegerField(verbose_name=_("exact PV"))
    realtime_uv = models.BigIntegerField(verbose_name=_("realtime UV"))
    exact_uv = models.BigIntegerField(verbose_name=_("exact UV"))
    reconciled_at = models.DateTimeField(verbose_name=_("reconciled at"))

    class Meta:
        verbose_name = _("reconcile drift")
        verbose_name_plural = _("reconcile drifts")
        constraints = [models.UniqueConstraint(fields=["partner", "date"], name="drift_unique")]
        ordering = ["-date"]

    def __str__(self) -> str:
        return _("Drift of %(partner)s on %(date)s") % {
            "partner": _partner_title(self.partner),
            "date": date_format(self.date, "SHORT_DATE_FORMAT"),
        }

    @property
    def pv_drift(self) -> int:
        return self.exact_pv - self.realtime_pv

    @property
    def uv_drift(self) -> int:
        return self.exact_uv - self.realtime_uv
