"""One contract, two archive backends: the SQL table and MongoDB (in-process on mongomock)."""

import datetime as dt
import json
import zlib

import orjson
import pytest

from partners.selectors import partner_lineages
from stats.keys import NO_PARTNER
from stats.models import RawEventChunk
from stats.pipeline.archive import MongoArchive, SqlArchive
from stats.pipeline.events import parse_event
from tests.factories import at, create_tree, pv_event

# MongoDB drops an event ARCHIVE_RETENTION_DAYS after its ts (a TTL index, which mongomock applies when it
# reads): the archive is read here at a fixed moment soon after the events.
pytestmark = [pytest.mark.django_db, pytest.mark.time_machine("2026-11-22T09:00:00+08:00", tick=False)]

NOON = at("2026-11-21 12:00")
NOW_DAY = dt.date(2026, 11, 21)


@pytest.fixture(params=["sql", "mongo"])
def archive(request):
    if request.param == "sql":
        return SqlArchive()
    # A fresh in-process database per test.
    return MongoArchive("mongomock://localhost", f"cps_test_{id(request)}")


def stored_ids(archive, day: dt.date = NOW_DAY) -> list[str]:
    return sorted(event.event_id for event in archive.events(day))


def events(*values: bytes):
    lineages = partner_lineages()
    return [parse_event(v, lineages=lineages, now=NOON + dt.timedelta(days=1)) for v in values]


def test_storing_an_event_twice_keeps_one(archive):
    create_tree()
    batch = events(pv_event(NOON, "A1", event_id="same"), pv_event(NOON, "A2", event_id="other"))
    archive.store(batch)
    archive.store(batch)
    assert stored_ids(archive) == ["other", "same"]


def test_ids_that_differ_only_by_case_accent_or_a_trailing_space_are_different_events(archive):
    # Event ids and openids are the client's bytes: MariaDB's default collations would have taken each group
    # below for one value (case- and accent-insensitive, trailing spaces ignored), so the archive kept one
    # event per group and the exact recount found one user.
    create_tree()
    ids = ["e-1", "E-1", "e-1 ", "é-1"]
    openids = ["user", "USER", "user ", "üser"]
    archive.store(
        events(*(pv_event(NOON, "A1", openid, event_id=e) for e, openid in zip(ids, openids, strict=True)))
    )
    archive.store(events(pv_event(NOON, "A1", "user", event_id="e-1")))  # a true repeat: still one row
    assert stored_ids(archive) == sorted(ids)
    counts = archive.count_day(dt.date(2026, 11, 21))
    assert counts.pv_self == {"A1": 4}
    assert counts.uv_self == {"A1": 4}
    assert counts.uv_tree == {"A": 4, "A1": 4}


def test_day_counts_are_exact_per_partner_and_subtree(archive):
    create_tree()
    archive.store(
        events(
            pv_event(NOON, "A1a", "u1"),
            pv_event(NOON, "A1a", "u1"),
            pv_event(NOON, "A1", "u2"),
            pv_event(NOON, "A2", "u1"),
            pv_event(NOON, "A2", "u3", ua="Baiduspider"),
            pv_event(NOON, None, "u7"),
            pv_event(NOON, "B", ""),
            pv_event(at("2026-11-22 00:00"), "A1", "u9"),  # next business day
        )
    )
    counts = archive.count_day(dt.date(2026, 11, 21))
    assert counts.pv_tree == {"A": 4, "A1": 3, "A1a": 2, "A2": 1, "B": 1}
    assert counts.uv_tree == {"A": 2, "A1": 2, "A1a": 1, "A2": 1, "B": 0}
    assert counts.pv_self == {"A1a": 2, "A1": 1, "A2": 1, NO_PARTNER: 1, "B": 1}
    assert counts.uv_self == {"A1a": 1, "A1": 1, "A2": 1, NO_PARTNER: 1, "B": 0}
    assert counts.bot_pv == {"A2": 1}


@pytest.mark.parametrize(
    ("ts", "day"),
    [
        # the last microsecond of a Shanghai day, then its first moment: the business day, not the UTC one
        ("2026-11-21T15:59:59.999999+00:00", "2026-11-21"),
        ("2026-11-21T16:00:00+00:00", "2026-11-22"),
        ("2026-11-21T20:30:00.5+08:00", "2026-11-21"),
    ],
)
def test_the_archive_keeps_the_time_the_business_day_the_chain_and_the_payload(archive, ts, day):
    create_tree()
    fields = {"event_id": "e-odd", "type": "pv", "ts": ts, "partner": "A1a", "openid": "o-'\\q\"", "ua": "猫"}
    payload = json.dumps(fields, ensure_ascii=False)
    archive.store(events(payload.encode()))

    (event,) = archive.events(dt.date.fromisoformat(day))
    expected = dt.datetime.fromisoformat(ts)
    if isinstance(archive, MongoArchive):  # a BSON date holds milliseconds
        expected = expected.replace(microsecond=expected.microsecond // 1000 * 1000)
    assert (event.ts, event.ts.utcoffset()) == (expected, dt.timedelta(0))
    assert (event.partner, event.path) == ("A1a", ("A", "A1", "A1a"))
    assert (event.openid, event.is_bot, event.payload) == ("o-'\\q\"", False, payload)


def test_the_archive_keeps_traffic_with_no_partner_under_its_own_code(archive):
    create_tree()
    archive.store(events(pv_event(NOON, event_id="e-none"), pv_event(NOON, "A1", ua="Baiduspider")))

    (none, bot) = sorted(archive.events(NOON.date()), key=lambda event: event.event_id != "e-none")
    assert (none.partner, none.path, none.is_bot) == (NO_PARTNER, (), False)
    assert (bot.partner, bot.path, bot.is_bot) == ("A1", ("A", "A1"), True)


def test_a_discarded_event_is_left_out_and_the_rest_stay(archive):
    create_tree()
    archive.store(
        events(pv_event(NOON, "A1", "u1", event_id="kept"), pv_event(NOON, "A1", "u2", event_id="gone"))
    )
    archive.discard(["gone"])
    assert stored_ids(archive) == ["kept"]
    assert archive.count_day(NOW_DAY).pv_self == {"A1": 1}


def test_chunks_stored_before_zstd_are_read_beside_new_ones():
    # Archives written before 2026-11-27 hold zlib streams (as migration 0007 wrote them); a day spanning the
    # change is counted from both kinds of chunk.
    create_tree()
    old_document = {
        "event_id": ["old-1", "old-2"],
        "type": ["pv", "pv"],
        "ts": [1795233600_000_000, 1795233601_000_000],  # 2026-11-21 12:00:00 and :01 in Shanghai
        "partner": ["A1", "A1"],
        "openid": ["u1", "u2"],
        "payload": ["{}", "{}"],
        "bots": [1],
        "paths": {"A1": ["A", "A1"]},
    }
    RawEventChunk.objects.create(
        first_day=NOW_DAY, last_day=NOW_DAY, events=2, body=zlib.compress(orjson.dumps(old_document), 1)
    )
    archive = SqlArchive()
    archive.store(
        events(pv_event(NOON, "A1", "u1", event_id="new-1"), pv_event(NOON, "A1", "u3", event_id="new-2"))
    )

    assert stored_ids(archive) == ["new-1", "new-2", "old-1", "old-2"]
    counts = archive.count_day(NOW_DAY)
    assert (counts.pv_self, counts.uv_self, counts.bot_pv) == ({"A1": 3}, {"A1": 2}, {"A1": 1})
    assert (counts.pv_tree, counts.uv_tree) == ({"A": 3, "A1": 3}, {"A": 2, "A1": 2})
