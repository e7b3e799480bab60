"""The consumer's counting thread: batches counted in poll order, and none behind one that failed."""

import time

import pytest

from stats.pipeline import counting_thread, storing
from stats.pipeline.counting_thread import CountingThread
from stats.pipeline.ingest import Message, build_counters, parse_batch, stored_offsets
from stats.pipeline.isolation import StopRequested
from stats.pipeline.process import StopFlag
from tests.factories import archived_event_count, at, create_tree, pv_event

pytestmark = pytest.mark.django_db(transaction=True)

NOON = at("2026-11-21 12:00")


def parsed(offsets: range):
    messages = [Message("topic-c", 0, n, pv_event(NOON, "B", f"u{n}", event_id=f"c-{n}")) for n in offsets]
    batch = parse_batch(messages, now=NOON)
    build_counters(batch)
    return batch


def test_batches_are_counted_in_order_and_each_partition_ends_at_its_last_offset():
    create_tree()
    counting = CountingThread(group="gc", stop=StopFlag())
    try:
        done = counting.start(parsed(range(0, 10))) + counting.start(parsed(range(10, 15)))
        done += counting.start(parsed(range(15, 22))) + counting.drain()
    finally:
        counting.close()
    assert [future.result().counted for future in done] == [10, 5, 7]
    assert stored_offsets(group="gc", source="topic-c") == {0: 22}


def test_a_batch_queued_behind_one_that_failed_is_not_counted(monkeypatch):
    """Counting the second batch after the first failed would store an offset past the first one's events."""
    create_tree()
    real_count_batch = counting_thread.count_batch
    calls = []

    def first_batch_fails(batch, **kwargs):
        calls.append(batch.first_offsets)
        if len(calls) == 1:
            raise RuntimeError("a bug in counting")
        return real_count_batch(batch, **kwargs)

    monkeypatch.setattr(counting_thread, "count_batch", first_batch_fails)
    real_archive = storing._archive

    def slow_archive(pairs):
        time.sleep(0.3)
        real_archive(pairs)

    monkeypatch.setattr(storing, "_archive", slow_archive)
    counting = CountingThread(group="gf", stop=StopFlag())
    try:
        done = counting.start(parsed(range(0, 10))) + counting.start(parsed(range(10, 15))) + counting.drain()
    finally:
        counting.close()
    with pytest.raises(RuntimeError, match="a bug in counting"):
        done[0].result()
    with pytest.raises(StopRequested):
        done[1].result()
    assert len(calls) == 1
    assert stored_offsets(group="gf", source="topic-c") == {}
    # Both batches' archives were under way: once closed, nothing of them is still being written (a write
    # landing later went into the next test's database).
    assert archived_event_count() == 15
    time.sleep(0.7)
    assert archived_event_count() == 15


def test_the_revoke_hook_waits_for_every_batch_handed_over(monkeypatch):
    create_tree()
    real_count_batch = counting_thread.count_batch

    def slow_count_batch(batch, **kwargs):
        time.sleep(0.5)  # the next owner must not read the stored offsets before this batch is in them
        return real_count_batch(batch, **kwargs)

    monkeypatch.setattr(counting_thread, "count_batch", slow_count_batch)
    counting = CountingThread(group="gw", stop=StopFlag())
    try:
        counting.start(parsed(range(0, 10)))
        counting.start(parsed(range(10, 20)))
        counting.wait()  # what SeekToStoredOffsets calls before partitions go
        assert stored_offsets(group="gw", source="topic-c") == {0: 20}
    finally:
        counting.drain()
        counting.close()
