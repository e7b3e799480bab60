"""upsert_rows (cpsproject.common.upsert), as flush and reconcile use it: what goes in comes back out."""

import datetime as dt

import pytest
from django.db import IntegrityError, transaction

from cpsproject.common import upsert
from cpsproject.common.upsert import upsert_chunks, upsert_rows
from stats.models import BucketStat, DailyStat
from tests.factories import at, create_partner

pytestmark = pytest.mark.django_db

BUCKET_KEY = ["partner_id", "start", "generation"]
DAY_KEY = ["partner_id", "date"]
EVERY_BYTE = bytes(range(256))


def bucket_row(partner_id, start, generation, pv=1, **fields) -> dict:
    return {"partner_id": partner_id, "start": start, "generation": generation, "pv": pv, **fields}


def stored_buckets() -> dict:
    return {
        (pid, start, gen): (pv, pv_self, bot_pv)
        for pid, start, gen, pv, pv_self, bot_pv in BucketStat.objects.values_list(
            "partner_id", "start", "generation", "pv", "pv_self", "bot_pv"
        )
    }


@pytest.mark.parametrize(
    "generation",
    ["it's", 'say "hi"', "back\\slash", "100%s %d %%", "line\nbreak\ttab", "中文世代", "\x1a\r\x00nul", ""],
    ids=["quote", "double quote", "backslash", "percent", "control", "unicode", "zero byte", "empty"],
)
def test_text_comes_back_as_written(generation):
    partner = create_partner("A")
    start = at("2026-11-21 12:00")
    upsert_rows(BucketStat, [bucket_row(partner.pk, start, generation, pv=7)], key_fields=BUCKET_KEY)
    upsert_rows(BucketStat, [bucket_row(partner.pk, start, generation, pv=8)], key_fields=BUCKET_KEY)
    assert stored_buckets() == {(partner.pk, start, generation): (8, 0, 0)}


def test_times_dates_bytes_and_nulls_come_back_as_written():
    partner = create_partner("A")
    reconciled = dt.datetime(2026, 11, 22, 3, 4, 5, 678901, tzinfo=dt.UTC)
    upsert_rows(
        DailyStat,
        [
            {
                "partner_id": partner.pk,
                "date": dt.date(2026, 11, 21),
                "hll": EVERY_BYTE,
                "reconciled_at": reconciled,
            },
            {"partner_id": partner.pk, "date": dt.date(2026, 11, 22), "hll": b"", "reconciled_at": None},
        ],
        key_fields=DAY_KEY,
    )
    rows = {r.date: r for r in DailyStat.objects.all()}
    assert (bytes(rows[dt.date(2026, 11, 21)].hll), rows[dt.date(2026, 11, 21)].reconciled_at) == (
        EVERY_BYTE,
        reconciled,
    )
    assert (bytes(rows[dt.date(2026, 11, 22)].hll), rows[dt.date(2026, 11, 22)].reconciled_at) == (b"", None)
    start = at("2026-11-21 12:34:56.789012")  # Shanghai time, microseconds kept
    upsert_rows(BucketStat, [bucket_row(partner.pk, start, "g")], key_fields=BUCKET_KEY)
    assert BucketStat.objects.get().start == start


def test_a_field_a_row_leaves_out_keeps_its_stored_value_and_the_last_row_of_a_key_wins():
    a, b = create_partner("A"), create_partner("B")
    noon = at("2026-11-21 12:00")
    upsert_rows(
        BucketStat,
        [bucket_row(a.pk, noon, "g", pv=5, pv_self=2, bot_pv=1), bucket_row(b.pk, noon, "g", pv=3)],
        key_fields=BUCKET_KEY,
    )
    upsert_rows(
        BucketStat,
        [
            bucket_row(a.pk, noon, "g", pv=6),  # pv_self and bot_pv left out: kept
            bucket_row(b.pk, noon, "g", pv=4, pv_self=4),
            bucket_row(b.pk, noon, "g", pv=9, pv_self=9),  # same key again in one call: the last one counts
            bucket_row(None, noon, "g", pv=2),  # the site row: a NULL key the database cannot match
        ],
        key_fields=BUCKET_KEY,
    )
    upsert_rows(BucketStat, [bucket_row(None, noon, "g", pv=3)], key_fields=BUCKET_KEY)
    assert stored_buckets() == {
        (a.pk, noon, "g"): (6, 2, 1),
        (b.pk, noon, "g"): (9, 9, 0),
        (None, noon, "g"): (3, 0, 0),
    }


def test_numbers_that_are_not_plain_ints_are_written_as_their_value():
    partner = create_partner("A")
    noon = at("2026-11-21 12:00")
    upsert_rows(
        BucketStat,
        [bucket_row(partner.pk, noon, "g", pv=True, pv_self=2**62), bucket_row(partner.pk, noon, "h", pv=-3)],
        key_fields=BUCKET_KEY,
    )
    assert stored_buckets() == {(partner.pk, noon, "g"): (1, 2**62, 0), (partner.pk, noon, "h"): (-3, 0, 0)}


def test_a_thousand_day_rows_of_large_hyperloglogs_are_all_written():
    """20 MB of HyperLogLog bytes in one call: more than MariaDB's default 16 MB packet in one statement."""
    partner = create_partner("A")
    first = dt.date(2024, 1, 1)
    blob = EVERY_BYTE * 80  # 20,480 bytes, every byte value the escaping has to handle
    rows = [
        {"partner_id": partner.pk, "date": first + dt.timedelta(days=n), "pv": n, "hll": blob[n:] + blob[:n]}
        for n in range(upsert.CHUNK)
    ]
    upsert_rows(DailyStat, rows, key_fields=DAY_KEY)
    stored = {r.date: (r.pv, bytes(r.hll)) for r in DailyStat.objects.all()}
    assert stored == {row["date"]: (row["pv"], row["hll"]) for row in rows}


# --- upsert_chunks: a stream of chunks, on MySQL the next one produced while the database writes ------------


def test_a_key_in_a_later_chunk_ends_with_the_later_values():
    a, b = create_partner("A"), create_partner("B")
    noon, later = at("2026-11-21 12:00"), at("2026-11-21 12:05")
    chunks = [
        [
            bucket_row(a.pk, noon, "g", pv=1),
            bucket_row(None, noon, "g", pv=1),
            bucket_row(b.pk, noon, "g", pv=1),
        ],
        [bucket_row(a.pk, noon, "g", pv=2), bucket_row(None, noon, "g", pv=2)],
        [bucket_row(a.pk, later, "g", pv=3, pv_self=3)],
    ]
    upsert_chunks(BucketStat, iter(chunks), key_fields=BUCKET_KEY)
    assert stored_buckets() == {
        (a.pk, noon, "g"): (2, 0, 0),
        (b.pk, noon, "g"): (1, 0, 0),
        (None, noon, "g"): (2, 0, 0),
        (a.pk, later, "g"): (3, 3, 0),
    }


def test_chunks_that_stop_with_an_error_write_nothing_and_leave_the_connection_usable():
    partner = create_partner("A")
    noon = at("2026-11-21 12:00")

    def chunks_then_redis_fails():
        yield [bucket_row(partner.pk, noon, f"g{n}") for n in range(500)]  # in flight when the error comes
        raise ConnectionError("Redis went away")

    with pytest.raises(ConnectionError, match="Redis went away"), transaction.atomic():
        upsert_chunks(BucketStat, chunks_then_redis_fails(), key_fields=BUCKET_KEY)
    assert BucketStat.objects.count() == 0
    upsert_chunks(BucketStat, iter([[bucket_row(partner.pk, noon, "g", pv=4)]]), key_fields=BUCKET_KEY)
    assert stored_buckets() == {(partner.pk, noon, "g"): (4, 0, 0)}


def test_a_row_the_database_refuses_mid_stream_is_a_django_database_error():
    partner = create_partner("A")
    noon = at("2026-11-21 12:00")
    chunks = [[bucket_row(partner.pk, noon, "g")], [bucket_row(partner.pk, noon, "h", pv=None)]]
    with pytest.raises(IntegrityError), transaction.atomic():
        upsert_chunks(BucketStat, iter(chunks), key_fields=BUCKET_KEY)
    assert BucketStat.objects.count() == 0
