"""Sliding-window rankings and multi-resolution series, fed through the real ingest pipeline."""

import datetime as dt
import random
import threading
from collections import Counter

import pytest
from django.db import connections
from django_redis import get_redis_connection
from rest_framework.test import APIClient

from stats import keys
from stats.counters.rankings import rotate_all, top_partners, windows
from stats.counters.series import SITE_COUNTER, clean_series, partner_counter, read_series
from tests.factories import at, create_staff, create_tree, feed, pv_event

pytestmark = pytest.mark.django_db

CODES = ["A", "A1", "A1a", "A2", "B"]
CHAINS = {"A": ["A"], "A1": ["A", "A1"], "A1a": ["A", "A1", "A1a"], "A2": ["A", "A2"], "B": ["B"]}


def live_slot_sums(*, window: str, scope: str) -> tuple[dict[str, int], dict[str, int]]:
    """Return (totals zset, sum of the live slot hashes), read straight from Redis."""
    client = get_redis_connection("default")
    totals = {
        m.decode(): int(s)
        for m, s in client.zrange(keys.ranking_total(window, scope), 0, -1, withscores=True)
    }
    summed: Counter[str] = Counter()
    for slot_key in client.zrange(keys.ranking_slots(window, scope), 0, -1):
        for code, pv in client.hgetall(slot_key).items():
            summed[code.decode()] += int(pv)
    return totals, {code: pv for code, pv in summed.items() if pv}


def exact_top(events: list[tuple[dt.datetime, str]], *, since: dt.datetime, scope: str, limit: int):
    counts: Counter[str] = Counter()
    for ts, code in events:
        if ts >= since:
            for counted in CHAINS[code] if scope == "tree" else [code]:
                counts[counted] += 1
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return [(rank, code, pv) for rank, (code, pv) in enumerate(ordered, 1)]


def random_events(
    rng: random.Random, *, start: dt.datetime, hours: float, n: int
) -> list[tuple[dt.datetime, str]]:
    leaves = ["A1a", "A1a", "A1", "A2", "B", "B", "B"]
    return [
        (start + dt.timedelta(seconds=rng.randrange(int(hours * 3600))), rng.choice(leaves)) for _ in range(n)
    ]


@pytest.mark.parametrize("scope", ["tree", "self"])
def test_rankings_match_exact_top_n_in_every_window_as_slots_expire(scope):
    create_tree()
    rng = random.Random(1)
    start = at("2026-11-14 00:00")
    events = random_events(rng, start=start, hours=8 * 24, n=3000)
    events.sort()
    # Feed in time order, each batch with `now` at its newest event, as a live consumer would.
    for i in range(0, len(events), 250):
        chunk = events[i : i + 250]
        feed([pv_event(ts, code) for ts, code in chunk], now=chunk[-1][0])
    for now in [
        at("2026-11-22 00:00"),
        at("2026-11-22 00:07"),
        at("2026-11-22 05:30"),
        at("2026-11-25 12:00"),
    ]:
        for window in windows().values():
            since = dt.datetime.fromtimestamp(window.oldest_live_slot(now), tz=dt.UTC)
            got = [
                (r.rank, r.partner, r.pv)
                for r in top_partners(window=window.name, scope=scope, limit=3, now=now)
            ]
            assert got == exact_top(events, since=since, scope=scope, limit=3), (window.name, now)


def test_idle_window_rotates_to_empty_after_days():
    create_tree()
    feed([pv_event(at("2026-11-21 12:00"), "B")], now=at("2026-11-21 12:00"))
    assert top_partners(window="1h", now=at("2026-11-21 12:01"))[0].pv == 1
    assert top_partners(window="7d", now=at("2026-12-05 12:00")) == []
    totals, slots = live_slot_sums(window="7d", scope="tree")
    assert totals == slots == {}


# Writer threads use their own database connections: the partners must be committed for them to see.
@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_and_rotations_keep_totals_equal_to_live_slots():
    create_tree()
    base = at("2026-11-21 10:00")
    errors: list[BaseException] = []
    counted: list[int] = []

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for step in range(30):
                now = base + dt.timedelta(minutes=step * 3)
                batch = [
                    pv_event(now - dt.timedelta(minutes=rng.randrange(90)), rng.choice(CODES))
                    for _ in range(40)
                ]
                counted.append(feed(batch, now=now, partition=seed).counted)
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
    assert sum(counted) == 4 * 30 * 40
    assert live_slot_sums(window="24h", scope="tree")[0]
    for window in windows():
        for scope in ("tree", "self"):
            totals, slots = live_slot_sums(window=window, scope=scope)
            assert totals == slots, (window, scope)


def test_rankings_api_scopes_portal_tokens_and_rejects_unknown_windows(capsys):
    from django.core.management import call_command

    create_tree()
    now = dt.datetime.now(tz=dt.UTC)
    feed([pv_event(now, "B")] * 1 + [pv_event(now, "A1")] * 2 + [pv_event(now, "A2")] * 3, now=now)
    create_staff()
    staff = APIClient()
    staff.login(username="staff", password="pw")
    assert staff.get("/api/v1/rankings/partners/?window=1h&limit=2").json() == [
        {"rank": 1, "partner": "A", "pv": 5},
        {"rank": 2, "partner": "A2", "pv": 3},
    ]
    assert staff.get("/api/v1/rankings/partners/?window=1h&scope=self").json()[0] == {
        "rank": 1,
        "partner": "A2",
        "pv": 3,
    }
    bad = staff.get("/api/v1/rankings/partners/?window=2h")
    assert bad.status_code == 400 and "1h, 24h, 7d" in bad.json()["window"]
    call_command("portal_token", "A1")
    portal = APIClient()
    portal.credentials(HTTP_AUTHORIZATION="Token " + capsys.readouterr().out.split()[-1])
    assert portal.get("/api/v1/rankings/partners/?window=24h").json() == [
        {"rank": 1, "partner": "A1", "pv": 2}
    ]


def test_series_at_every_precision_sum_to_the_pv_of_the_events():
    create_tree()
    rng = random.Random(4)
    start = at("2026-11-21 08:00")
    events = random_events(rng, start=start, hours=6, n=800)
    feed([pv_event(ts, code) for ts, code in events], now=start + dt.timedelta(hours=6))
    feed([pv_event(start, "B", ua="AhrefsBot")], now=start)  # bots are not in the series
    end = start + dt.timedelta(hours=6)
    for precision in (1, 5, 60, 300, 3600, 18000, 86400):
        site = read_series(counter=SITE_COUNTER, precision=precision, start=start, end=end)
        assert sum(count for _, count in site) == 800, precision
        a_total = sum(
            c for _, c in read_series(counter=partner_counter("A"), precision=precision, start=start, end=end)
        )
        assert a_total == sum(1 for _, code in events if "A" in CHAINS[code])


def test_cleaner_removes_exactly_the_expired_samples(settings, redis_client):
    settings.CPS_STATS = {**settings.CPS_STATS, "SERIES_RETENTION": {60: 10, 3600: 3}}
    create_tree()
    start = at("2026-11-21 08:00")
    feed(
        [pv_event(start + dt.timedelta(minutes=m), "B") for m in range(30)],
        now=start + dt.timedelta(minutes=30),
    )
    now = start + dt.timedelta(minutes=29, seconds=30)
    clean_series(now=now, force=True)
    minutes = read_series(counter=SITE_COUNTER, precision=60, start=start, end=now)
    assert [c for _, c in minutes] == [0] * 20 + [1] * 10  # the 10 newest minutes are kept
    assert sum(c for _, c in read_series(counter=SITE_COUNTER, precision=3600, start=start, end=now)) == 30
    clean_series(now=now + dt.timedelta(days=1), force=True)
    from stats import keys

    assert redis_client.zcard(keys.series_known()) == 0  # every counter emptied and forgotten


def test_series_api_zero_fills_in_business_time_and_names_bad_parameters():
    create_tree()
    create_staff()
    client = APIClient()
    client.login(username="staff", password="pw")
    feed([pv_event(at("2026-11-21 08:01:30"), "A1")], now=at("2026-11-21 08:05"))
    body = client.get(
        "/api/v1/series/?precision=60&partner=A&start=2026-11-21T08:00&end=2026-11-21T08:03"
    ).json()
    assert body == [
        {"ts": "2026-11-21T08:00:00+08:00", "count": 0},
        {"ts": "2026-11-21T08:01:00+08:00", "count": 1},
        {"ts": "2026-11-21T08:02:00+08:00", "count": 0},
        {"ts": "2026-11-21T08:03:00+08:00", "count": 0},
    ]
    assert "precision" in client.get("/api/v1/series/?precision=7").json()
    assert "start" in client.get("/api/v1/series/?precision=60&start=noon").json()
    assert client.get("/api/v1/series/?precision=60&partner=NOPE").status_code == 404
