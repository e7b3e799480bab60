"""The raw-event archive: one interface (``Archive``), two backends, as Django's session backends share one base.

``MongoArchive`` (production, ``MONGO_URL`` set) and ``SqlArchive`` (the ``RawEvent`` table, ``MONGO_URL`` unset).
Both show each ``event_id`` once (storing it again is not an error) and answer the exact per-day counts that
``reconcile`` writes. ``mongomock://`` runs the MongoDB backend in-process (tests).
"""

import datetime as dt
import logging
import zlib
from abc import ABC, abstractmethod
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, NamedTuple

import numpy
import orjson
import zstandard
from django.conf import settings
from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from cpsproject.common.timeutil import UTC, BatchClock, local_day
from stats.conf import stats_setting
from stats.keys import NO_PARTNER
from stats.models import DiscardedEvent, RawEventChunk
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


EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


class ArchivedEvent(NamedTuple):
    """One event as the archive holds it."""

    event_id: str
    type: str
    ts: dt.datetime  # UTC
    day: dt.date  # the business day of ``ts``
    partner: str  # the partner's code, ``NO_PARTNER`` for traffic with no partner
    path: tuple[str, ...]  # the partner's chain of codes at ingest time, root first; () with no partner
    openid: str
    is_bot: bool
    payload: str  # the message value as received


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
        """Store ``events``; storing an ``event_id`` again is not an error (replays are normal), and every
        reader still sees it once."""

    @abstractmethod
    def events(self, day: dt.date) -> Iterator[ArchivedEvent]:
        """Yield each event of business day ``day`` once."""

    @abstractmethod
    def count_events(self) -> int:
        """Return how many distinct events the archive holds."""

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
    """Raw events in the Django database, in chunks (``RawEventChunk``).

    A chunk's ``body`` is one JSON document of columns, the events in the order stored, compressed with zstd
    (chunks stored before 2026-11-27 are zlib streams, read as well)::

        {"event_id": [...], "type": [...], "ts": [epoch microseconds, ...], "partner": [own code, ...],
         "openid": [...], "payload": [the message value as received, ...],
         "bots": [index of each bot event], "paths": {partner code: [root, ..., code]}}

    Writing is a few statements per batch whatever its size; reading a day decodes the chunks that hold it and
    counts each event id once (``events``).
    """

    name = "sql"

    # Events per chunk, and the most a chunk's body may hold: a statement stays well under max_allowed_packet
    # (16 MB by default on MariaDB, 64 MB on MySQL) however large the events.
    CHUNK_EVENTS = 5000
    MAX_BODY_BYTES = 4_000_000

    def store(self, events: Iterable[Event]) -> None:
        events = list(events)
        clock = BatchClock()
        chunks = []
        for start in range(0, len(events), self.CHUNK_EVENTS):
            chunks += self._chunks(events[start : start + self.CHUNK_EVENTS], clock)
        if not chunks:
            return
        if connection.vendor != "mysql":
            RawEventChunk.objects.bulk_create(chunks)
            return
        # The body as a hex literal: mysqlclient's escaping of binary data is slower than compressing it, and a
        # hex literal needs none. One statement per chunk keeps each under max_allowed_packet.
        table = connection.ops.quote_name(RawEventChunk._meta.db_table)
        with connection.cursor() as cursor:
            for chunk in chunks:
                cursor.execute(
                    f"INSERT INTO {table} (first_day, last_day, events, body) VALUES "
                    f"('{chunk.first_day.isoformat()}', '{chunk.last_day.isoformat()}', {chunk.events}, "
                    f"X'{chunk.body.hex()}')"
                )

    def _chunks(self, events: list[Event], clock: BatchClock) -> list[RawEventChunk]:
        """``events`` as one chunk, or as several when their body would be too large for one statement."""
        lineages = [getattr(event, "lineage", None) for event in events]
        document = orjson.dumps(
            {
                "event_id": [event.event_id for event in events],
                "type": [event.type for event in events],
                "ts": [event.seconds * 1_000_000 + event.ts.microsecond for event in events],
                "partner": [lineage.code if lineage else NO_PARTNER for lineage in lineages],
                "openid": [getattr(event, "openid", "") for event in events],
                "payload": [event.payload for event in events],
                "bots": [n for n, event in enumerate(events) if getattr(event, "is_bot", False)],
                "paths": {lineage.code: lineage.codes for lineage in set(lineages) if lineage},
            }
        )
        if len(document) > self.MAX_BODY_BYTES and len(events) > 1:
            half = len(events) // 2
            return self._chunks(events[:half], clock) + self._chunks(events[half:], clock)
        days = sorted({clock.day(seconds) for seconds in {event.seconds for event in events}})
        # zstd at level 1 rather than zlib at 1 (bench/README.md, the archive stage): a third of the CPU and a
        # quarter smaller on the bench's events. It lets go of the GIL while it works, so the consumer parses
        # meanwhile. A compressor per chunk: one shared by the archive's threads would not be safe.
        body = zstandard.ZstdCompressor(level=1).compress(document)
        return [RawEventChunk(first_day=days[0], last_day=days[-1], events=len(events), body=body)]

    @staticmethod
    def _bodies(chunks: QuerySet[RawEventChunk]) -> Iterator[dict]:
        """The decoded body of each chunk of ``chunks`` (a queryset), oldest first, a few in memory at once."""
        decompressor = zstandard.ZstdDecompressor()
        for body in chunks.order_by("id").values_list("body", flat=True).iterator(chunk_size=20):
            body = bytes(body)
            # A zlib stream (chunks of versions before zstd) begins with 0x78, never with zstd's frame header.
            yield orjson.loads(
                decompressor.decompress(body)
                if body.startswith(zstandard.FRAME_HEADER)
                else zlib.decompress(body)
            )

    def _stored(
        self, chunks: QuerySet[RawEventChunk], *, day: dt.date | None = None
    ) -> Iterator[ArchivedEvent]:
        """Every event of ``chunks`` (of ``day`` only, if given) once, in the order stored.

        An event id seen twice is rare (a batch read again after a crash), but which ones are can only be known
        at the end. So a first pass keeps the 64-bit hash of every id (8 bytes an event, not a set of strings),
        and the second compares the ids themselves only for the hashes that came more than once. Both passes
        read the chunks that existed when the first began: one stored in between would hold ids never hashed.
        """
        last = chunks.order_by("-id").values_list("id", flat=True).first()
        chunks = chunks.filter(id__lte=last or 0)
        discarded = set(DiscardedEvent.objects.values_list("event_id", flat=True))
        clock = BatchClock()

        def read() -> Iterator[tuple[dict, frozenset[int], int, int, dt.date]]:
            for body in self._bodies(chunks):
                bots = frozenset(body["bots"])
                for n, micros in enumerate(body["ts"]):
                    event_day = clock.day(micros // 1_000_000)
                    if day is None or event_day == day:
                        yield body, bots, n, micros, event_day

        hashes = array("q", (hash(body["event_id"][n]) for body, _, n, _, _ in read()))
        ordered = numpy.sort(numpy.frombuffer(hashes, dtype=numpy.int64))
        repeated = set(ordered[1:][ordered[1:] == ordered[:-1]].tolist())
        del hashes, ordered
        seen: set[str] = set()
        for body, bots, n, micros, event_day in read():
            event_id = body["event_id"][n]
            if event_id in discarded:
                continue
            if hash(event_id) in repeated:
                if event_id in seen:
                    continue
                seen.add(event_id)
            partner = body["partner"][n]
            yield ArchivedEvent(
                event_id=event_id,
                type=body["type"][n],
                ts=_from_epoch_micros(micros),
                day=event_day,
                partner=partner,
                path=tuple(body["paths"].get(partner, ())),
                openid=body["openid"][n],
                is_bot=n in bots,
                payload=body["payload"][n],
            )

    def events(self, day: dt.date) -> Iterator[ArchivedEvent]:
        return self._stored(RawEventChunk.objects.filter(first_day__lte=day, last_day__gte=day), day=day)

    def count_events(self) -> int:
        return sum(1 for _ in self._stored(RawEventChunk.objects.all()))

    def discard(self, event_ids: Sequence[str]) -> None:
        DiscardedEvent.objects.bulk_create([DiscardedEvent(event_id=event_id) for event_id in event_ids])

    def purge_before(self, day: dt.date, *, chunk: int = 5000) -> int:
        """Delete the chunks whose every event is older than ``day``; a chunk that spans it waits a day more.

        In groups of ``chunk`` events' worth of chunks: one huge DELETE would hold its locks and grow the undo
        log for minutes.
        """
        purged = 0
        old = RawEventChunk.objects.filter(last_day__lt=day)
        while rows := list(old.values_list("id", "events")[: max(1, chunk // self.CHUNK_EVENTS)]):
            RawEventChunk.objects.filter(id__in=[pk for pk, _ in rows]).delete()
            purged += sum(n for _, n in rows)
            logger.info("archive purge: %d raw events before %s deleted so far", purged, day)
        cutoff = timezone.now() - dt.timedelta(days=stats_setting("ARCHIVE_RETENTION_DAYS"))
        DiscardedEvent.objects.filter(discarded_at__lt=cutoff).delete()
        return purged

    def count_day(self, day: dt.date) -> DayCounts:
        """Count the day from its distinct events; each user is counted once per partner and per subtree.

        Users are told apart byte for byte (as Redis and MongoDB do). Each distinct openid of the day gets a
        number, and each (partner, user) pair is kept as one 64-bit integer in an array, distinct ones found by
        sorting: memory grows with the day's events (8 bytes per pair), not with sets of strings.
        """
        counts = DayCounts()
        users: dict[str, int] = {}
        nodes: dict[str, int] = {}
        own_pairs, tree_pairs = array("q"), array("q")
        for event in self.events(day):
            if event.type != PageView.type:
                continue
            partner = event.partner
            if event.is_bot:
                counts.bot_pv[partner] = counts.bot_pv.get(partner, 0) + 1
                continue
            counts.pv_self[partner] = counts.pv_self.get(partner, 0) + 1
            user = users.setdefault(event.openid, len(users)) if event.openid else None
            node = nodes.setdefault(partner, len(nodes))
            if user is not None:
                own_pairs.append(node << 32 | user)
            for code in event.path:
                counts.pv_tree[code] = counts.pv_tree.get(code, 0) + 1
                if user is not None:
                    tree_pairs.append(nodes.setdefault(code, len(nodes)) << 32 | user)
        codes = list(nodes)
        for pairs, uv, pv in (
            (own_pairs, counts.uv_self, counts.pv_self),
            (tree_pairs, counts.uv_tree, counts.pv_tree),
        ):
            for code in pv:
                uv[code] = 0
            distinct = numpy.unique(numpy.frombuffer(pairs, dtype=numpy.int64)) >> 32
            for node, n in zip(*numpy.unique(distinct, return_counts=True), strict=True):
                uv[codes[node]] = int(n)
        return counts


def _from_epoch_micros(micros: int) -> dt.datetime:
    return EPOCH + dt.timedelta(microseconds=micros)


class MongoArchive(Archive):
    """Raw events in MongoDB, ``_id = event_id``."""

    name = "mongo"

    def __init__(self, url: str, database: str):
        if url.startswith("mongomock://"):
            import mongomock

            client: Any = mongomock.MongoClient()  # the same interface as pymongo's
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

    def events(self, day: dt.date) -> Iterator[ArchivedEvent]:
        for doc in self.collection.find({"day": day.isoformat()}).sort("_id"):
            ts = doc["ts"] if doc["ts"].tzinfo else doc["ts"].replace(tzinfo=UTC)  # mongomock drops the zone
            yield ArchivedEvent(
                event_id=doc["_id"],
                type=doc["type"],
                ts=ts,
                day=dt.date.fromisoformat(doc["day"]),
                partner=doc["partner"],
                path=tuple(doc["path"]),
                openid=doc["openid"],
                is_bot=doc["is_bot"],
                payload=doc["payload"],
            )

    def count_events(self) -> int:
        return self.collection.count_documents({})

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
