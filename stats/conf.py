"""The options of ``stats`` with their defaults; ``settings.CPS_STATS`` overrides any of them."""

from cpsproject.common.conf import AppSettings, Check, positive_int

DEFAULTS = {
    "BUCKET_SECONDS": 300,
    # A bucket is settled (flushed without --include-open, then deletable) this long after it ends.
    "SETTLE_SECONDS": 300,
    "MAX_FUTURE_SECONDS": 600,
    "MAX_LATENESS_SECONDS": 7 * 86400,
    "MAX_EVENT_BYTES": 64 * 1024,
    # Case-insensitive substrings of the user agent that mark bot traffic.
    "BOT_UA_PATTERNS": [
        "bot",
        "spider",
        "crawler",
        "slurp",
        "curl/",
        "wget/",
        "python-requests",
        "headlesschrome",
        "facebookexternalhit",
        "bingpreview",
        "mediapartners-google",
    ],
    # window name -> (slot seconds, slots in the window)
    "RANKING_WINDOWS": {"1h": (300, 12), "24h": (3600, 24), "7d": (86400, 7)},
    # precision seconds -> samples kept
    "SERIES_RETENTION": {1: 3600, 5: 2880, 60: 1440, 300: 2016, 3600: 720, 18000: 876, 86400: 730},
    "KAFKA_SESSION_TIMEOUT_MS": 10_000,
    # Records per poll and per process_batch. Live traffic shares buckets, samples and slots within a batch, so
    # larger batches send fewer Redis operations per event: 10,000 took half the CPU per event of 2,000, and
    # 32,000 against 16,000 (three A/B rounds of bench/run.py) 17 % less of the consumer's CPU per event and
    # 22 % less of Redis', for more peak RSS: 262 MB against 235 over the bench's 1,010,000-event topic, 279-328
    # against 235-254 over librdkafka's compressed ones. Against the test broker a poll is one fetch of a
    # partition (~19,000 records): the gain was whole fetches, not polls of 16,000 and 3,000 (a cap just above a
    # fetch should do the same there; not measured). The consumer holds up to three batches (one counted, one
    # waiting its turn, the next being parsed): its peak RSS is a row of bench/README.md.
    "CONSUMER_BATCH_SIZE": 32_000,
    "PARTNER_CACHE_SECONDS": 30,
    # Raw events are kept this long: at least the maximum lateness plus a reconcile window.
    "ARCHIVE_RETENTION_DAYS": 35,
    "DEAD_LETTER_RETENTION_DAYS": 90,
    # manage.py health: each threshold a problem is reported beyond.
    # Messages of one Kafka partition not counted yet (a consumer counts tens of thousands a second).
    "HEALTH_MAX_LAG": 100_000,
    # Minutes since the last successful flush (scheduled every minute).
    "HEALTH_MAX_FLUSH_AGE_MINUTES": 10,
    # Business-time hour by which yesterday must be reconciled (scheduled at 00:30).
    "HEALTH_RECONCILE_DUE_HOUR": 2,
    # Dead letters received so far today (business day).
    "HEALTH_MAX_DEAD_LETTERS_TODAY": 1000,
    # Seconds a running consumer may hold no partition (joining takes seconds; a longer wait is a stuck join,
    # or more consumers than partitions).
    "HEALTH_MAX_UNASSIGNED_SECONDS": 300,
}

stats_setting = AppSettings(
    "CPS_STATS",
    DEFAULTS,
    checks={
        name: positive_int()
        for name in (
            "BUCKET_SECONDS",
            "MAX_LATENESS_SECONDS",
            "MAX_EVENT_BYTES",
            "KAFKA_SESSION_TIMEOUT_MS",
            "CONSUMER_BATCH_SIZE",
            "ARCHIVE_RETENTION_DAYS",
            "DEAD_LETTER_RETENTION_DAYS",
            "HEALTH_MAX_LAG",
            "HEALTH_MAX_FLUSH_AGE_MINUTES",
            "HEALTH_MAX_DEAD_LETTERS_TODAY",
            "HEALTH_MAX_UNASSIGNED_SECONDS",
        )
    }
    | {"HEALTH_RECONCILE_DUE_HOUR": Check(lambda v: v in range(24), "an hour of the day, 0 to 23")}
    | {
        "BOT_UA_PATTERNS": Check(
            lambda v: all(isinstance(p, str) and p for p in v), "a list of non-empty strings"
        )
    },
)
