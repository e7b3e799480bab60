"""Sliding-window rankings (stats.counters.rankings), fed through the real ingest pipeline.

Expected rankings are counted from the events and the clock: which slots a window holds at a moment is written
out by hand below from the window definitions (1h: twelve 5-minute slots, 24h: twenty-four hourly slots, 7d:
seven business days, every slot starting on a Shanghai wall-clock boundary), never asked of the code under test.
"""

import datetime as dt
import random
import threading
from collections import Counter

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django_redis import get_redis_connection

from stats import keys
from stats.counters.rankings import rotate_all, top_partners
from stats.pipeline.partitions import known_partitions
from tests.factories import at, create_tree, feed, pv_event

pytestmark = pytest.mark.django_db

CODES = ["A", "A1", "A1a", "A2", "B"]
CHAINS = {"A": ["A"], "A1": ["A", "A1"], "A1a": ["A", "A1", "A1a"], "A2": ["A", "A2"], "B": ["B"]}
WINDOWS = ("1h", "24h", "7d")

# scenario -> (first event, eight days of events from it, {query moment: {window: oldest moment it counts}})
SCENARIOS = {
    "november": (
        at("2026-11-14 00:00"),
        {
            at("2026-11-22 00:00"): {
                "1h": at("2026-11-21 23:05"),
                "24h": at("2026-11-21 01:00"),
                "7d": at("2026-11-16 00:00"),
            },
            at("2026-11-22 00:07"): {
                "1h": at("2026-11-21 23:10"),
                "24h": at("2026-11-21 01:00"),
                "7d": at("2026-11-16 00:00"),
            },
            at("2026-11-22 05:30"): {
                "1h": at("2026-11-22 04:35"),
                "24h": at("2026-11-21 06:00"),
                "7d": at("2026-11-16 00:00"),
            },
            at("2026-11-25 12:00"): {
                "1h": at("2026-11-25 11:05"),
                "24h": at("2026-11-24 13:00"),
                "7d": at("2026-11-19 00:00"),
            },
        },
    ),
    "year end": (
        at("2026-12-24 00:00"),
        {
            at("2027-01-01 00:10"): {
                "1h": at("2026-12-31 23:15"),
                "24h": at("2026-12-31 01:00"),
                "7d": at("2026-12-26 00:00"),
            },
            at("2027-01-03 12:00"): {
                "1h": at("2027-01-03 11:05"),
                "24h": at("2027-01-02 13:00"),
                "7d": at("2026-12-28 00:00"),
            },
        },
    ),
    "end of february": (
        at("2027-02-21 00:00"),
        {
            at("2027-03-01 00:03"): {
                "1h": at("2027-02-28 23:05"),
                "24h": at("2027-02-28 01:00"),
                "7d": at("2027-02-23 00:00"),
            },
        },
    ),
}


def live_slots(*, window: str, scope: str) -> dict[str, int]:
    """The PV per partner in every partition's slot hashes still indexed, read straight from Redis."""
    client = get_redis_connection("default")
    summed: Counter[str] = Counter()
    for partition in known_partitions(client):
        for slot_key in client.zrange(keys.ranking_slots(partition, window, scope), 0, -1):
            for code, pv in client.hgetall(slot_key).items():
                summed[code.decode()] += int(pv)
    return dict(summed)


def exact_counts(
    events: list[tuple[dt.datetime, str]], *, since: dt.datetime, until: dt.datetime, scope: str
):
    counts: Counter[str] = Counter()
    for ts, code in events:
        if since <= ts <= until:
            for counted in CHAINS[code] if scope == "tree" else [code]:
                counts[counted] += 1
    return counts


def exact_top(events, *, since: dt.datetime, until: dt.datetime, scope: str, limit: int):
    counts = exact_counts(events, since=since, until=until, scope=scope)
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return [(rank, code, pv) for rank, (code, pv) in enumerate(ordered, 1)]


def random_events(
    rng: random.Random, *, start: dt.datetime, hours: float, n: int
) -> list[tuple[dt.datetime, str]]:
    leaves = ["A1a", "A1a", "A1", "A2", "B", "B", "B"]
    return [
        (start + dt.timedelta(seconds=rng.randrange(int(hours * 3600))), rng.choice(leaves)) for _ in range(n)
    ]


def ranked(*, window: str, scope: str, limit: int, now: dt.datetime) -> list[tuple[int, str, int]]:
    return [(r.rank, r.partner, r.pv) for r in top_partners(window=window, scope=scope, limit=limit, now=now)]


@pytest.mark.parametrize("scope", ["tree", "self"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_rankings_match_exact_top_n_in_every_window_as_slots_expire(scenario, scope):
    create_tree()
    start, queries = SCENARIOS[scenario]
    rng = random.Random(1)
    events = sorted(random_events(rng, start=start, hours=8 * 24, n=3000))
    # Feed in time order, each batch with `now` at its newest event, as a live consumer would.
    for i in range(0, len(events), 250):
        chunk = events[i : i + 250]
        feed([pv_event(ts, code) for ts, code in chunk], now=chunk[-1][0])
    for now, oldest in queries.items():
        assert set(oldest) == set(WINDOWS)
        for window, since in oldest.items():
            expected = exact_top(events, since=since, until=now, scope=scope, limit=3)
            assert ranked(window=window, scope=scope, limit=3, now=now) == expected, (window, now)
            everyone = exact_top(events, since=since, until=now, scope=scope, limit=10)
            assert ranked(window=window, scope=scope, limit=10, now=now) == everyone, (window, now)


def test_an_event_counts_exactly_until_its_slot_leaves_the_window():
    """One event at 12:03 (slot 12:00) is in the 1h window up to 12:59:59 and gone at 13:00."""
    create_tree()
    feed([pv_event(at("2026-11-21 12:03"), "A1a")], now=at("2026-11-21 12:03"))
    for now, pv in [
        (at("2026-11-21 12:03"), 1),
        (at("2026-11-21 12:59:59"), 1),
        (at("2026-11-21 13:00"), 0),
    ]:
        got = {r.partner: r.pv for r in top_partners(window="1h", now=now)}
        assert got == ({"A": pv, "A1": pv, "A1a": pv} if pv else {}), now
    # The 24h window keeps it until the 12:00 hour slot leaves, at 12:00 the next day.
    assert top_partners(window="24h", scope="self", now=at("2026-11-22 11:59:59"))[0].pv == 1
    assert top_partners(window="24h", scope="self", now=at("2026-11-22 12:00")) == []
    # The 7d window holds seven business days: Saturday 21st to Friday 27th.
    assert top_partners(window="7d", scope="self", now=at("2026-11-27 23:59:59"))[0].pv == 1
    assert top_partners(window="7d", scope="self", now=at("2026-11-28 00:00")) == []


def test_an_event_ahead_of_the_clock_counts_in_both_scopes():
    """The consumer takes events up to MAX_FUTURE_SECONDS (10 minutes) ahead of its clock: one at 12:08, counted
    at 12:00, is in a slot after the clock's and counts at once, as it will when the clock reaches it."""
    create_tree()
    feed([pv_event(at("2026-11-21 12:08"), "A1a")], now=at("2026-11-21 12:00"))
    for now in (at("2026-11-21 12:00"), at("2026-11-21 12:08")):
        for window in WINDOWS:
            assert ranked(window=window, scope="self", limit=5, now=now) == [(1, "A1a", 1)], (window, now)
            tree = ranked(window=window, scope="tree", limit=5, now=now)
            assert tree == [(1, "A", 1), (2, "A1", 1), (3, "A1a", 1)], (window, now)


def test_a_series_retention_shorter_than_a_window_is_refused_when_the_tree_scope_is_read(settings):
    settings.CPS_STATS = {**settings.CPS_STATS, "SERIES_RETENTION": {300: 11, 3600: 720, 86400: 730}}
    with pytest.raises(
        ImproperlyConfigured, match=r"SERIES_RETENTION'\] must keep at least 12 samples of 300 s"
    ):
        top_partners(window="1h", scope="tree", now=at("2026-11-21 12:00"))
    assert top_partners(window="1h", scope="self", now=at("2026-11-21 12:00")) == []


def test_idle_window_rotates_to_empty_after_days():
    create_tree()
    feed([pv_event(at("2026-11-21 12:00"), "B")], now=at("2026-11-21 12:00"))
    assert top_partners(window="1h", now=at("2026-11-21 12:01"))[0].pv == 1
    assert top_partners(window="7d", now=at("2026-12-05 12:00")) == []
    rotate_all(now=at("2026-12-05 12:00"))
    assert live_slots(window="7d", scope="self") == {}


# Writer threads use their own database connections: the partners must be committed for them to see.
@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_and_rotations_count_each_view_once():
    create_tree()
    base = at("2026-11-21 10:00")
    errors: list[BaseException] = []
    counted: list[int] = []
    fed: list[tuple[dt.datetime, str]] = []

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for step in range(30):
                now = base + dt.timedelta(minutes=step * 3)
                batch = [
                    (now - dt.timedelta(minutes=rng.randrange(90)), rng.choice(CODES)) for _ in range(40)
                ]
                counted.append(
                    feed([pv_event(ts, code) for ts, code in batch], now=now, partition=seed).counted
                )
                fed.extend(batch)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connections.close_all()

    def rotator() -> None:
        try:
            for step in range(60):
                rotate_all(now=base + dt.timedelta(minutes=step * 1.5))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(s,)) for s in range(4)] + [
        threading.Thread(target=rotator)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sum(counted) == len(fed) == 4 * 30 * 40
    # At 11:30 each window holds exactly the events of its live slots: the 1h window from the 10:35 slot on,
    # the 24h window from 2026-11-20 12:00, the 7d window from 2026-11-15; a rotation then leaves only those.
    end = at("2026-11-21 11:30")
    rotate_all(now=end)
    for window in WINDOWS:  # the self scope's slots (the tree scope reads the series, which keep their own)
        ranked = {r.partner: r.pv for r in top_partners(window=window, scope="self", limit=100, now=end)}
        assert live_slots(window=window, scope="self") == ranked, window
    for window, since in [
        ("1h", at("2026-11-21 10:35")),
        ("24h", at("2026-11-20 12:00")),
        ("7d", at("2026-11-15 00:00")),
    ]:
        for scope in ("tree", "self"):
            got = {r.partner: r.pv for r in top_partners(window=window, scope=scope, limit=10, now=end)}
            assert got == dict(exact_counts(fed, since=since, until=end, scope=scope)), (window, scope)
    assert sum(exact_counts(fed, since=at("2026-11-21 10:35"), until=end, scope="self").values()) < len(fed)
