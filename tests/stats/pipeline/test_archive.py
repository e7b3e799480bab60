"""One contract, two archive backends: the SQL table and MongoDB (in-process on mongomock)."""

import datetime as dt
import json

import pytest

from partners.selectors import partner_lineages
from stats.keys import NO_PARTNER
from stats.models import RawEvent
from stats.pipeline.archive import MongoArchive, SqlArchive
from stats.pipeline.events import parse_event
from tests.factories import at, create_tree, pv_event

# MongoDB drops an event ARCHIVE_RETENTION_DAYS after its ts (a TTL index, which mongomock applies when it
# reads): the archive is read here at a fixed moment soon after the events.
pytestmark = [pytest.mark.django_db, pytest.mark.time_machine("2026-11-22T09:00:00+08:00", tick=False)]

NOON = at("2026-11-21 12:00")


@pytest.fixture(params=["sql", "mongo"])
def archive(request):
    if request.param == "sql":
        return SqlArchive()
    # A fresh in-process database per test.
    return MongoArchive("mongomock://localhost", f"cps_test_{id(request)}")


def stored_ids(archive) -> list[str]:
    if isinstance(archive, MongoArchive):
        return sorted(doc["_id"] for doc in archive.collection.find({}, {"_id": 1}))
    return sorted(RawEvent.objects.values_list("event_id", flat=True))


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
    ("ts", "stored_ts", "day"),
    [
        # the last microsecond of a Shanghai day, then its first moment: the business day, not the UTC one
        ("2026-11-21T15:59:59.999999+00:00", "2026-11-21 15:59:59.999999", "2026-11-21"),
        ("2026-11-21T16:00:00+00:00", "2026-11-21 16:00:00", "2026-11-22"),
        ("2026-11-21T20:30:00.5+08:00", "2026-11-21 12:30:00.500000", "2026-11-21"),
    ],
)
def test_the_sql_archive_stores_the_utc_time_the_business_day_and_the_chain(ts, stored_ts, day):
    create_tree()
    fields = {"event_id": "e-odd", "type": "pv", "ts": ts, "partner": "A1a", "openid": "o-'\\q\"", "ua": "猫"}
    payload = json.dumps(fields, ensure_ascii=False)
    SqlArchive().store(events(payload.encode()))

    row = RawEvent.objects.get(event_id="e-odd")
    assert row.ts.replace(tzinfo=None).isoformat(" ", timespec="microseconds") == (
        stored_ts if "." in stored_ts else stored_ts + ".000000"
    )
    assert row.day.isoformat() == day
    assert (row.partner, row.partner_l1, row.partner_l2, row.partner_l3) == ("A1a", "A", "A1", "A1a")
    assert row.openid == "o-'\\q\""
    assert row.payload == payload


def test_the_sql_archive_stores_traffic_with_no_partner_under_its_own_code():
    SqlArchive().store(events(pv_event(NOON, event_id="e-none")))

    row = RawEvent.objects.get(event_id="e-none")
    assert (row.partner, row.partner_l1, row.partner_l2, row.partner_l3) == (NO_PARTNER, "", "", "")
    assert (row.day, row.is_bot) == (dt.date(2026, 11, 21), False)
