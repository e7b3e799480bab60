"""The raw-event archive: one interface (``Archive``), two backends, as Django's session backends share one base.

``MongoArchive`` (production, ``MONGO_URL`` set) and ``SqlArchive`` (the ``RawEvent`` table, ``MONGO_URL`` unset).
Both store each ``event_id`` once (a repeat is not an error) and answer the exact per-day counts that
``reconcile`` writes. ``mongomock://`` runs the MongoDB backend in-process (tests).
"""

import datetime as dt
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache

from django.conf import settings
from django.db import connection

from cpsproject.common.timeutil import UTC, BatchClock, local_day
from stats.conf import stats_setting
from stats.keys import NO_PARTNER
from stats.models import RawEvent
from stats.pipeline.events import PageView
from stats.pipeline.registry import Event

logger = logging.getLogger(__name__)


@dataclass
class DayCounts:
    """Exact counts of one day. Keys are partner codes, ``NO_PARTNER`` for traffic with no partner."""

    pv_self: dict[str, int] = field(default_factory=dict)
    uv_self: dict[str, int] = field(default_factory=dict)
    bot_pv: dict[str, int] = field(default_factory=dict)
    pv_tree: dict[str, int] = field(default_factory=dict)
    uv_tree: dict[str, int] = field(default_factory=dict)

    def codes(self) -> set[str]:
        return set(self.pv_self) | set(self.bot_pv) | set(self.pv_tree)


def _document(event: Event) -> dict:
    lineage = getattr(event, "lineage", None)
    return {
        "_id": event.event_id,
        "type": event.type,
        "ts": event.ts,
        "day": local_day(event.ts).isoformat(),
        "partner": lineage.code if lineage else NO_PARTNER,
        "path": list(lineage.codes) if lineage else [],
        "openid": getattr(event, "openid", ""),
        "is_bot": getattr(event, "is_bot", False),
        "payload": event.payload,  # the JSON text as received: its keys may be anything ("$", ".", NUL)
    }


class Archive(ABC):
    """Where raw events are kept for the exact recount."""

    name: str

    @abstractmethod
    def store(self, events: Iterable[Event]) -> None:
        """Store ``events``; an ``event_id`` already stored is skipped, not an error (replays are normal)."""

    @abstractmethod
    def discard(self, event_ids: Sequence[str]) -> None:
        """Remove the events ``event_ids`` (stored by a batch that then refused them)."""

    @abstractmethod
    def count_day(self, day: dt.date) -> DayCounts:
        """Return the exact PV and UV of business day ``day``, per partner and per subtree, bots apart."""

    @abstractmethod
    def purge_before(self, day: dt.date, *, chunk: int = 5000) -> int:
        """Delete the events of the business days before ``day``; return how many went."""


class SqlArchive(Archive):
    """Raw events in the Django database (``RawEvent``)."""

    name = "sql"

    COLUMNS = (
        "event_id",
        "type",
        "ts",
        "day",
        "partner",
        "partner_l1",
        "partner_l2",
        "partner_l3",
        "openid",
        "is_bot",
        "payload",
    )
    CHUNK = 1000

    def store(self, events: Iterable[Event]) -> None:
        events = list(events)
        if not events:
            return
        if connection.vendor == "mysql":
            self._store_mysql(events)
            return
        # SQLite's executemany binds plain tuples in C: nothing to gain by building the SQL.
        clock = BatchClock()
        rows = [self._row(event, clock) for event in events]
        with connection.cursor() as cursor:
            for start in range(0, len(rows), self.CHUNK):
                cursor.executemany(self._insert_ignoring_repeats(), rows[start : start + self.CHUNK])

    @staticmethod
    def _row(event: Event, clock: BatchClock) -> tuple:
        lineage = getattr(event, "lineage", None)
        path = (*lineage.codes, "", "", "") if lineage else ("", "", "")
        return (
            event.event_id,
            event.type,
            # Naive UTC, as Django stores a DateTimeField with USE_TZ on MySQL and SQLite (events hold UTC).
            event.ts.replace(tzinfo=None),
            clock.day(event.seconds),
            lineage.code if lineage else NO_PARTNER,
            path[0],
            path[1],
            path[2],
            getattr(event, "openid", ""),
            getattr(event, "is_bot", False),
            event.payload,
        )

    # mysqlclient's own executemany splits statements at about 1 MB too; events are at most MAX_EVENT_BYTES.
    MAX_STATEMENT_BYTES = 1_000_000

    def _store_mysql(self, events: list[Event]) -> None:
        """Multi-row INSERTs built here: mysqlclient's executemany escapes every value through Python calls,
        which cost more than MariaDB spends on the insert. Partner codes and types repeat, so each distinct
        string is escaped once per batch; a batch spans a few seconds, so each second's date and time text is
        made once."""
        clock = BatchClock()
        with connection.cursor() as cursor:
            db = connection.connection  # the MySQLdb connection, open now
            literal = db.string_literal
            head, tail = self._insert_ignoring_repeats().encode().split(b"VALUES", 1)
            tail = tail.split(b")", 1)[1]  # what follows "(%s, …)": the ON DUPLICATE KEY clause
            texts: dict[str, bytes] = {}
            paths: dict[object, bytes] = {}  # lineage -> its escaped partner, l1, l2, l3 columns
            seconds_text: dict[int, tuple[bytes, bytes]] = {}  # epoch second -> (UTC time, business day)

            def text(value: str) -> bytes:
                try:
                    return texts[value]
                except KeyError:
                    quoted = texts[value] = literal(value.encode())
                    return quoted

            def path(lineage) -> bytes:
                try:
                    return paths[lineage]
                except KeyError:
                    codes = (*lineage.codes, "", "", "")[:3] if lineage else ("", "", "")
                    own = lineage.code if lineage else NO_PARTNER
                    columns = paths[lineage] = b",".join(text(code) for code in (own, *codes))
                    return columns

            values: list[bytes] = []
            size = 0
            for event in events:
                ts, seconds = event.ts, event.seconds
                try:
                    moment, day = seconds_text[seconds]
                except KeyError:
                    moment = dt.datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S").encode()
                    day = clock.day(seconds).isoformat().encode()
                    seconds_text[seconds] = moment, day
                if ts.microsecond:
                    moment = b"%s.%06d" % (moment, ts.microsecond)
                row = b"(%s,%s,'%s','%s',%s,%s,%d,%s)" % (
                    literal(event.event_id.encode()),
                    text(event.type),
                    moment,
                    day,
                    path(getattr(event, "lineage", None)),
                    text(getattr(event, "openid", "")),
                    getattr(event, "is_bot", False),
                    literal(event.payload.encode()),
                )
                values.append(row)
                size += len(row)
                if size > self.MAX_STATEMENT_BYTES:
                    cursor.execute(head + b"VALUES " + b",".join(values) + tail)
                    values, size = [], 0
            if values:
                cursor.execute(head + b"VALUES " + b",".join(values) + tail)

    def _insert_ignoring_repeats(self) -> str:
        quote = connection.ops.quote_name
        columns = ", ".join(quote(c) for c in self.COLUMNS)
        values = ", ".join(["%s"] * len(self.COLUMNS))
        table = quote(RawEvent._meta.db_table)
        if connection.vendor == "mysql":
            # Not INSERT IGNORE: that would also turn a refused value into a silent truncation.
            return f"INSERT INTO {table} ({columns}) VALUES ({values}) ON DUPLICATE KEY UPDATE {quote('event_id')} = {quote('event_id')}"
        return f"INSERT INTO {table} ({columns}) VALUES ({values}) ON CONFLICT DO NOTHING"

    def discard(self, event_ids: Sequence[str]) -> None:
        RawEvent.objects.filter(event_id__in=list(event_ids)).delete()

    def purge_before(self, day: dt.date, *, chunk: int = 5000) -> int:
        # In chunks of primary keys: one huge DELETE would hold its locks and grow the undo log for minutes.
        purged = 0
        old = RawEvent.objects.filter(day__lt=day)
        while ids := list(old.values_list("id", flat=True)[:chunk]):
            purged += RawEvent.objects.filter(id__in=ids).delete()[0]
            logger.info("archive purge: %d raw events before %s deleted so far", purged, day)
        return purged

    def count_day(self, day: dt.date) -> DayCounts:
        """Count the day in one scan sorted by openid; distinct users are counted as each openid's rows pass.

        Five ``COUNT(DISTINCT openid)`` groupings each built a temporary table that spilled to disk on a busy
        day (minutes for a million events); one sorted pass costs a few seconds and holds one user in memory.
        """
        counts = DayCounts()
        table, quote = RawEvent._meta.db_table, connection.ops.quote_name
        # Users are told apart byte for byte, as Redis and MongoDB do: MySQL's default collation would merge
        # "o-AB" and "o-ab" (and could interleave their rows in the sort).
        user = "BINARY openid" if connection.vendor == "mysql" else "openid"
        columns = ", ".join(
            [user, *(quote(c) for c in ("partner", "partner_l1", "partner_l2", "partner_l3", "is_bot"))]
        )
        sql = (
            f"SELECT {columns}, COUNT(*) FROM {quote(table)} WHERE {quote('day')} = %s AND {quote('type')} = %s "
            f"GROUP BY {columns} ORDER BY 1"
        )
        params = [connection.ops.adapt_datefield_value(day), PageView.type]
        current, own, tree = None, set(), set()

        def close_user() -> None:
            if current:  # an empty openid is no user: its page views count, it adds no UV
                for code in own:
                    counts.uv_self[code] = counts.uv_self.get(code, 0) + 1
                for code in tree:
                    counts.uv_tree[code] = counts.uv_tree.get(code, 0) + 1

        for openid, partner, l1, l2, l3, is_bot, n in _stream(sql, params):
            if is_bot:
                counts.bot_pv[partner] = counts.bot_pv.get(partner, 0) + n
                continue
            if openid != current:
                close_user()
                current, own, tree = openid, set(), set()
            counts.pv_self[partner] = counts.pv_self.get(partner, 0) + n
            counts.uv_self.setdefault(partner, 0)
            own.add(partner)
            for code in (l1, l2, l3):
                if code:
                    counts.pv_tree[code] = counts.pv_tree.get(code, 0) + n
                    counts.uv_tree.setdefault(code, 0)
                    tree.add(code)
        close_user()
        return counts


def _stream(sql: str, params: list, *, size: int = 10_000) -> Iterable[tuple]:
    """Yield the rows of ``sql`` without holding them all: MySQLdb's default cursor buffers the whole result."""
    connection.ensure_connection()
    if connection.vendor == "mysql":
        from MySQLdb.cursors import SSCursor

        cursor = connection.connection.cursor(SSCursor)
    else:
        cursor = connection.connection.cursor()
    try:
        cursor.execute(sql.replace("%s", "?") if connection.vendor == "sqlite" else sql, params)
        while rows := cursor.fetchmany(size):
            yield from rows
    finally:
        cursor.close()


class MongoArchive(Archive):
    """Raw events in MongoDB, ``_id = event_id``."""

    name = "mongo"

    def __init__(self, url: str, database: str):
        if url.startswith("mongomock://"):
            import mongomock

            client = mongomock.MongoClient()
        else:
            from pymongo import MongoClient

            client = MongoClient(url, tz_aware=True)
        self.collection = client[database]["raw_events"]
        self.collection.create_index([("day", 1), ("type", 1)])
        # MongoDB itself drops events past the retention (its TTL monitor runs every minute); purge_before is
        # for a retention shortened since the index was made.
        retention = dt.timedelta(days=stats_setting("ARCHIVE_RETENTION_DAYS"))
        self.collection.create_index("ts", expireAfterSeconds=int(retention.total_seconds()))

    def store(self, events: Iterable[Event]) -> None:
        from pymongo.errors import BulkWriteError

        documents = [_document(e) for e in events]
        if not documents:
            return
        try:
            self.collection.insert_many(documents, ordered=False)
        except BulkWriteError as exc:
            # 11000 is a duplicate _id: the event is archived already (a replay), which is fine.
            others = [e for e in exc.details.get("writeErrors", []) if e.get("code") != 11000]
            if others:
                raise

    def _grouped(self, match: dict, group_by: str, unwind: str | None = None) -> list[dict]:
        """Two-stage $group: first (partner, openid) pairs, then partners, so memory stays bounded."""
        stages: list[dict] = [{"$match": match}]
        if unwind:
            stages.append({"$unwind": unwind})
        stages += [
            {"$group": {"_id": {"p": group_by, "o": "$openid"}, "pv": {"$sum": 1}}},
            {
                "$group": {
                    "_id": "$_id.p",
                    "pv": {"$sum": "$pv"},
                    "uv": {"$sum": {"$cond": [{"$eq": ["$_id.o", ""]}, 0, 1]}},
                }
            },
        ]
        return list(self.collection.aggregate(stages, allowDiskUse=True))

    def discard(self, event_ids: Sequence[str]) -> None:
        self.collection.delete_many({"_id": {"$in": list(event_ids)}})

    def purge_before(self, day: dt.date, *, chunk: int = 5000) -> int:
        return self.collection.delete_many({"day": {"$lt": day.isoformat()}}).deleted_count

    def count_day(self, day: dt.date) -> DayCounts:
        counts = DayCounts()
        base = {"day": day.isoformat(), "type": PageView.type}
        for row in self._grouped({**base, "is_bot": False}, "$partner"):
            counts.pv_self[row["_id"]] = row["pv"]
            counts.uv_self[row["_id"]] = row["uv"]
        for row in self._grouped({**base, "is_bot": True}, "$partner"):
            counts.bot_pv[row["_id"]] = row["pv"]
        for row in self._grouped({**base, "is_bot": False}, "$path", unwind="$path"):
            counts.pv_tree[row["_id"]] = row["pv"]
            counts.uv_tree[row["_id"]] = row["uv"]
        return counts


@cache
def _mongo_archive(url: str, database: str) -> MongoArchive:
    return MongoArchive(url, database)


def get_archive() -> Archive:
    """Return the archive the settings select: MongoDB when ``MONGO_URL`` is set, else the SQL table."""
    if settings.MONGO_URL:
        return _mongo_archive(settings.MONGO_URL, settings.MONGO_DB)
    return SqlArchive()
