"""``process_batch`` (stats.pipeline.ingest): every message ends counted or a dead letter, once."""

import datetime as dt
import json
import random

import pytest
from django.db.models import Count

from stats.jobs.flush import flush
from stats.models import DailyStat, DeadLetter
from stats.pipeline.ingest import stored_offsets
from tests.factories import archived_event_count, at, create_tree, daily, feed, pv_event

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 21)
NOON = at("2026-11-21 12:00")
LATER = at("2026-11-21 13:00")


def test_hostile_events_become_dead_letters_and_good_ones_all_count():
    create_tree()
    rng = random.Random(11)
    hostile = {
        "not_json": b"{oops",
        "not_utf8": b'{"event_id": "\xff"}',
        "not_object": b"[1, 2]",
        "missing_field": json.dumps({"type": "pv", "ts": NOON.isoformat()}).encode(),
        "unknown_type": json.dumps({"event_id": "x", "type": "click", "ts": NOON.isoformat()}).encode(),
        "bad_ts": json.dumps({"event_id": "x", "type": "pv", "ts": "2026-11-21T12:00:00"}).encode(),
        "ts_in_future": pv_event(NOON + dt.timedelta(hours=1), "A1"),
        "ts_too_old": pv_event(NOON - dt.timedelta(days=8), "A1"),
        "unknown_partner": pv_event(NOON, "NOPE"),
        "too_large": pv_event(NOON, "A1", url="x" * 70_000),
        "bad_field": json.dumps(
            {"event_id": "x", "type": "login", "ts": NOON.isoformat(), "user_type": "alien", "user_id": 1}
        ).encode(),
    }
    reasons = list(hostile)
    messages, expected_dead = [], {}
    good = 0
    for n in range(2000):
        if n % 2:
            reason = reasons[n % len(reasons)]
            messages.append(hostile[reason])
            expected_dead[reason] = expected_dead.get(reason, 0) + 1
        else:
            messages.append(pv_event(NOON, rng.choice(["A1", "A1a", "A2", "B"]), f"u{n}"))
            good += 1
    result = feed(messages, now=NOON)
    assert result.counted == good == 1000
    assert dict(result.dead) == expected_dead
    stored = dict(DeadLetter.objects.values_list("reason").annotate(n=Count("id")))
    assert stored == expected_dead
    assert bytes(DeadLetter.objects.filter(reason="not_utf8").first().raw) == hostile["not_utf8"]
    flush(now=LATER)
    assert daily("A", DAY).pv + daily("B", DAY).pv == 1000


@pytest.mark.parametrize(
    ("now", "oldest_kept", "newest_kept"),
    [
        # Up to MAX_FUTURE_SECONDS (10 min) ahead of the batch's now, up to MAX_LATENESS_SECONDS (7 days) behind.
        (at("2026-11-21 12:00"), at("2026-11-14 12:00"), at("2026-11-21 12:10")),
        (at("2026-12-31 23:55"), at("2026-12-24 23:55"), at("2027-01-01 00:05")),
        (at("2027-03-01 00:00"), at("2027-02-22 00:00"), at("2027-03-01 00:10")),
    ],
    ids=["noon", "year end", "after february"],
)
def test_the_accepted_time_range_is_measured_from_the_batch_now(now, oldest_kept, newest_kept):
    create_tree()
    second = dt.timedelta(seconds=1)
    result = feed(
        [
            pv_event(oldest_kept - second, "B"),
            pv_event(oldest_kept, "B"),
            pv_event(newest_kept, "B"),
            pv_event(newest_kept + second, "B"),
        ],
        now=now,
    )
    assert (result.counted, dict(result.dead)) == (2, {"ts_too_old": 1, "ts_in_future": 1})


def test_inactive_partner_events_are_dead_letters():
    from partners.services import partner_deactivate

    tree = create_tree()
    partner_deactivate(partner=tree["B"])
    feed([pv_event(NOON, "B")], now=NOON)
    assert DeadLetter.objects.get().reason == "inactive_partner"
    assert not DailyStat.objects.exists()


def test_replayed_batch_is_archived_once():
    create_tree()
    values = [pv_event(NOON, "A1", f"u{n}") for n in range(10)]
    feed(values, now=NOON)
    feed(values, now=NOON)
    assert archived_event_count() == 10


def test_each_partitions_next_offset_is_stored_with_its_counts():
    from stats.pipeline.ingest import Message, process_batch

    create_tree()
    messages = [Message("topic-x", 0, offset, pv_event(NOON, "B")) for offset in (7, 8, 9)]
    messages += [Message("topic-x", 2, 40, pv_event(NOON, "A1")), Message("topic-x", 2, 41, b"{oops")]
    result = process_batch(messages, group="g-offsets", now=NOON)
    assert (result.counted, dict(result.dead)) == (4, {"not_json": 1})
    assert stored_offsets(group="g-offsets", source="topic-x") == {0: 10, 2: 42}
    assert stored_offsets(group="another-group", source="topic-x") == {}


_next_offset = iter(range(10**9))


def _batch(values, *, directory):
    from stats.pipeline.ingest import Message, process_batch

    messages = [Message("test-topic", 0, next(_next_offset), v) for v in values]
    return process_batch(messages, group="g", directory=directory, now=NOON)


def test_a_partner_created_after_the_cache_was_loaded_is_counted():
    from stats.pipeline.ingest import PartnerDirectory

    tree = create_tree()
    directory = PartnerDirectory()
    assert _batch([pv_event(NOON, "A1", "u1")], directory=directory).counted == 1
    from tests.factories import create_partner

    create_partner("A3", parent=tree["A"])
    result = _batch([pv_event(NOON, "A3", "u2"), pv_event(NOON, "A3", "u3")], directory=directory)
    assert (result.counted, dict(result.dead)) == (2, {})


def test_events_naming_a_missing_partner_reload_the_partners_once():
    from stats.pipeline.ingest import PartnerDirectory

    create_tree()
    directory = PartnerDirectory()
    _batch([pv_event(NOON, "A1", "u1")], directory=directory)  # loads the partners
    first = _batch([pv_event(NOON, "NOPE", "u2")], directory=directory)
    assert dict(first.dead) == {"unknown_partner": 1}
    # Later batches naming the same missing code read no partner rows: only the archive and dead letters.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        later = _batch([pv_event(NOON, "NOPE", f"u{n}") for n in range(3, 6)], directory=directory)
    assert dict(later.dead) == {"unknown_partner": 3}
    assert not [q for q in queries.captured_queries if "partners_partner" in q["sql"]]


def _zombie_scenario(*, archive_concurrently: bool) -> None:
    """A consumer frozen with a polled batch while another took its partition and counted on (a zombie)."""
    from stats.pipeline.ingest import Message, process_batch

    create_tree()

    def batch(offsets, code):
        messages = [
            Message("topic-z", 0, n, pv_event(NOON, code, f"u{n}", event_id=f"z-{n}")) for n in offsets
        ]
        return process_batch(messages, group="gz", now=NOON, archive_concurrently=archive_concurrently)

    assert batch(range(0, 10), "B").counted == 10  # the consumer that took over: offsets 0-9
    zombie = batch(range(0, 5), "B")  # the woken zombie's batch from before: offsets 0-4
    assert (zombie.counted, zombie.stale) == (0, {("topic-z", 0): 10})
    assert stored_offsets(group="gz", source="topic-z") == {0: 10}
    assert batch(range(10, 13), "B").counted == 3  # the next batch, from the stored offset
    assert batch(range(20, 22), "B").counted == 2  # a gap (retention, compaction) is not stale
    flush(now=LATER)
    assert daily("B", DAY).pv == 15
    assert archived_event_count() == 15  # the zombie took nothing back from the archive


def test_a_batch_behind_the_stored_offset_is_not_counted_again():
    _zombie_scenario(archive_concurrently=False)


@pytest.mark.django_db(transaction=True)
def test_a_batch_behind_the_stored_offset_is_not_counted_again_with_the_archive_worker():
    _zombie_scenario(archive_concurrently=True)


def test_a_message_the_parser_crashes_on_is_a_dead_letter_with_its_bytes_and_the_rest_counts(monkeypatch):
    """A bug in the parser (an exception other than a rejection) loses no message and stops no counting."""
    from stats.pipeline import batch
    from stats.pipeline.events import EventReader
    from stats.pipeline.ingest import Message, process_batch

    class BuggyReader(EventReader):
        def read(self, value):
            if b'"u-crash"' in value:
                raise ZeroDivisionError("a parser bug")
            return super().read(value)

    monkeypatch.setattr(batch, "EventReader", BuggyReader)
    create_tree()
    crashing = pv_event(NOON, "A1", "u-crash")
    values = [pv_event(NOON, "A1", f"u{n}") for n in range(6)]
    values.insert(3, crashing)
    messages = [Message("topic-bug", 1, 100 + n, value) for n, value in enumerate(values)]
    result = process_batch(messages, group="g-bug", now=NOON)
    assert (result.counted, dict(result.dead)) == (6, {"parse_error": 1})
    (letter,) = DeadLetter.objects.all()
    where = (letter.source, letter.partition, letter.offset)
    assert (where, letter.reason) == (("topic-bug", 1, 103), "parse_error")
    assert bytes(letter.raw) == crashing
    assert letter.detail == "ZeroDivisionError: a parser bug"
    # The offset moves past all seven, the crashing one included: it is kept, not read again.
    assert stored_offsets(group="g-bug", source="topic-bug") == {1: 107}
    flush(now=LATER)
    assert (daily("A1", DAY).pv, daily("A", DAY).pv) == (6, 6)
