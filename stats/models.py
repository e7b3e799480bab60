from django.db import models

from partners.models import Partner


class RawEvent(models.Model):
    """The SQL backend of the raw-event archive (``MONGO_URL`` unset). One row per distinct ``event_id``.

    ``partner_l1..l3`` hold the partner's chain of codes at ingest time, root first, so the exact recount of a
    subtree is one ``GROUP BY partner_lN`` without walking the tree.
    """

    event_id = models.CharField(max_length=128, primary_key=True)
    type = models.CharField(max_length=16)
    ts = models.DateTimeField()
    day = models.DateField(db_index=True)
    partner = models.CharField(max_length=64, blank=True, default="")
    partner_l1 = models.CharField(max_length=64, blank=True, default="")
    partner_l2 = models.CharField(max_length=64, blank=True, default="")
    partner_l3 = models.CharField(max_length=64, blank=True, default="")
    openid = models.CharField(max_length=128, blank=True, default="")
    is_bot = models.BooleanField(default=False)
    # The message value exactly as received: valid UTF-8 JSON text, stored without re-serialising it.
    payload = models.TextField()

    class Meta:
        indexes = [models.Index(fields=["day", "type"])]

    def __str__(self) -> str:
        return f"{self.type} {self.event_id}"


class DeadLetter(models.Model):
    """An event the consumer could not count, kept with its raw bytes and where it came from."""

    class Reason(models.TextChoices):
        EMPTY = "empty", "no value (a tombstone) or an empty one"
        TOO_LARGE = "too_large", "payload over the size limit"
        NOT_UTF8 = "not_utf8", "not UTF-8"
        NOT_JSON = "not_json", "not JSON"
        NOT_OBJECT = "not_object", "JSON but not an object"
        MISSING_FIELD = "missing_field", "a required field is missing"
        UNKNOWN_TYPE = "unknown_type", "unknown event type"
        BAD_FIELD = "bad_field", "a field has a bad value"
        BAD_TS = "bad_ts", "unreadable timestamp"
        TS_IN_FUTURE = "ts_in_future", "timestamp too far in the future"
        TS_TOO_OLD = "ts_too_old", "timestamp older than the maximum lateness"
        UNKNOWN_PARTNER = "unknown_partner", "unknown partner code"
        INACTIVE_PARTNER = "inactive_partner", "inactive partner"
        # Valid by the contract, yet a storage layer refused this event on its own (the error says why).
        UNSTORABLE = "unstorable", "a storage layer refused the event"
        # The parser itself failed: a bug in the product, kept with its error rather than stopping the consumer.
        PARSE_ERROR = "parse_error", "the parser failed"

    source = models.CharField(max_length=255, help_text="Kafka topic, or file:PATH for a replay")
    partition = models.IntegerField()
    offset = models.BigIntegerField()
    reason = models.CharField(max_length=32, choices=Reason.choices, db_index=True)
    detail = models.CharField(max_length=500, blank=True, default="")
    raw = models.BinaryField()
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
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

    partner = models.ForeignKey(Partner, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    start = models.DateTimeField()
    generation = models.CharField(max_length=32)
    pv = models.BigIntegerField(default=0)
    pv_self = models.BigIntegerField(default=0)
    bot_pv = models.BigIntegerField(default=0)
    flushed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["partner", "start", "generation"], name="bucketstat_unique"),
        ]
        indexes = [models.Index(fields=["start"])]

    def __str__(self) -> str:
        return f"{self.partner_id or 'site'} {self.start:%Y-%m-%d %H:%M} pv={self.pv}"


class DailyStat(models.Model):
    """One partner-day (NULL partner: traffic with no partner). What the API and admin show.

    Flush recomputes PV from bucket rows and UV from the stored HyperLogLogs merged with Redis; once
    ``reconciled_at`` is set the numbers are the exact recount and flush no longer changes them.
    """

    partner = models.ForeignKey(
        Partner, null=True, blank=True, on_delete=models.CASCADE, related_name="daily_stats"
    )
    date = models.DateField()
    pv = models.BigIntegerField(default=0)
    pv_self = models.BigIntegerField(default=0)
    uv = models.BigIntegerField(default=0)
    uv_self = models.BigIntegerField(default=0)
    bot_pv = models.BigIntegerField(default=0)
    # The realtime numbers as last flushed, kept apart so that drift stays visible after reconciliation.
    realtime_pv = models.BigIntegerField(default=0)
    realtime_pv_self = models.BigIntegerField(default=0)
    realtime_uv = models.BigIntegerField(default=0)
    realtime_uv_self = models.BigIntegerField(default=0)
    hll = models.BinaryField(null=True, blank=True, help_text="Redis HyperLogLog of the subtree's openids")
    hll_self = models.BinaryField(
        null=True, blank=True, help_text="Redis HyperLogLog of the partner's own openids"
    )
    reconciled_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["partner", "date"], name="dailystat_unique")]
        indexes = [models.Index(fields=["date"])]
        ordering = ["-date", "partner__code"]

    def __str__(self) -> str:
        return f"{self.partner_id or 'site'} {self.date} pv={self.pv} uv={self.uv}"


class ReconcileDrift(models.Model):
    """Realtime versus exact numbers of one partner-day, recorded by every reconcile run."""

    partner = models.ForeignKey(Partner, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    date = models.DateField()
    realtime_pv = models.BigIntegerField()
    exact_pv = models.BigIntegerField()
    realtime_uv = models.BigIntegerField()
    exact_uv = models.BigIntegerField()
    reconciled_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["partner", "date"], name="drift_unique")]
        ordering = ["-date"]

    def __str__(self) -> str:
        return f"drift {self.partner_id or 'site'} {self.date}: pv {self.pv_drift:+d}, uv {self.uv_drift:+d}"

    @property
    def pv_drift(self) -> int:
        return self.exact_pv - self.realtime_pv

    @property
    def uv_drift(self) -> int:
        return self.exact_uv - self.realtime_uv
