"""The final-days cache behind the stats API: what it serves is what SQL and Redis hold, before and after it fills.

Reconciled days come from a Redis cache that a reconcile moves to a new generation; days still live are read
per request. Each test asks the API with the cache warm and again with it emptied (a cold request reads
everything from SQL and Redis), and both answers must equal the numbers written from the events.
"""

import csv
import datetime as dt
import io

import pytest

from stats.jobs.flush import flush
from stats.jobs.reconcile import reconcile
from tests.factories import at, create_tree, feed, hll_estimate_of, portal_client, pv_event

pytestmark = pytest.mark.django_db

NOW = at("2026-11-23 12:00")
TODAY = dt.date(2026, 11, 23)
RECONCILED = dt.date(2026, 11, 20)


def stats(client, start: dt.date, end: dt.date) -> dict:
    response = client.get(f"/api/v1/partners/A1/stats/?start={start}&end={end}")
    assert response.status_code == 200, response.content
    return response.json()


def cold_stats(client, redis_client, redis_prefix: str, start: dt.date, end: dt.date) -> dict:
    """The same request with every cache entry gone: everything read from SQL and Redis."""
    cached = list(redis_client.scan_iter(match=f"{{{redis_prefix}}}:final:*", count=1000))
    if cached:
        redis_client.delete(*cached)
    return stats(client, start, end)


def numbers(body: dict) -> dict[str, tuple]:
    """The days that had traffic: date -> (pv, uv, pv_self, uv_self, reconciled)."""
    return {
        d["date"]: (d["pv"], d["uv"], d["pv_self"], d["uv_self"], d["reconciled"])
        for d in body["days"]
        if d["pv"] or d["reconciled"]
    }


@pytest.mark.time_machine("2026-11-23T12:00:00+08:00", tick=False)
def test_a_recount_after_the_cache_filled_shows_at_once_and_live_counts_move(redis_client, redis_prefix):
    create_tree()
    for day in (20, 21, 22):  # every day up to yesterday reconciled: only today is read per request
        noon = at(f"2026-11-{day} 12:00")
        feed(
            [pv_event(noon, "A1", "u1"), pv_event(noon, "A1", "u2"), pv_event(noon, "A1a", "u3")],
            now=noon + dt.timedelta(minutes=1),
        )
        flush(now=noon + dt.timedelta(hours=1))
        reconcile(day=dt.date(2026, 11, day), now=at(f"2026-11-{day + 1} 00:30"))
    feed([pv_event(at("2026-11-23 11:00"), "A1", "u1")], now=NOW)  # today: in Redis only
    client = portal_client("A1")

    first = stats(client, RECONCILED, TODAY)  # fills the cache
    assert numbers(first) == {
        "2026-11-20": (3, 3, 2, 2, True),
        "2026-11-21": (3, 3, 2, 2, True),
        "2026-11-22": (3, 3, 2, 2, True),
        "2026-11-23": (1, 1, 1, 1, False),
    }
    assert first["total_pv"] == 10
    assert stats(client, RECONCILED, TODAY) == first  # from the cache
    assert cold_stats(client, redis_client, redis_prefix, RECONCILED, TODAY) == first

    # A late event for a reconciled day changes nothing shown until the day is recounted.
    feed([pv_event(at("2026-11-20 13:00"), "A1a", "u4")], now=NOW)
    assert stats(client, RECONCILED, TODAY) == first
    reconcile(day=RECONCILED, now=NOW)  # the recount finds the late event: other numbers
    # Today moves too: a new user, and an event flushed while its bucket is still open.
    feed([pv_event(at("2026-11-23 11:58"), "A1", "u9")], now=NOW)
    flush(now=NOW, include_open=True)
    feed([pv_event(at("2026-11-23 11:59"), "A1a", "u1")], now=NOW)  # same bucket, not flushed yet

    second = stats(client, RECONCILED, TODAY)
    assert numbers(second) == {
        "2026-11-20": (4, 4, 2, 2, True),
        "2026-11-21": (3, 3, 2, 2, True),
        "2026-11-22": (3, 3, 2, 2, True),
        "2026-11-23": (3, 2, 2, 2, False),
    }
    assert second["total_pv"] == 13
    assert cold_stats(client, redis_client, redis_prefix, RECONCILED, TODAY) == second
    assert stats(client, RECONCILED, TODAY) == second


@pytest.mark.time_machine("2026-11-23T12:00:00+08:00", tick=False)
def test_days_past_the_horizon_without_rows_are_zeros_warm_or_cold(redis_client, redis_prefix):
    create_tree()
    noon = at("2026-11-20 12:00")
    feed([pv_event(noon, "A1", "u1"), pv_event(noon, "A1a", "u2")], now=noon + dt.timedelta(minutes=1))
    flush(now=noon + dt.timedelta(hours=1))
    reconcile(day=RECONCILED, now=at("2026-11-21 00:30"))
    feed([pv_event(at("2026-11-23 11:00"), "A1", "u1")], now=NOW)
    client = portal_client("A1")
    start = dt.date(2026, 10, 1)  # October and the first half of November ended beyond the lateness horizon
    first = stats(client, start, TODAY)
    assert len(first["days"]) == 54 and first["total_pv"] == 3
    assert numbers(first) == {"2026-11-20": (2, 2, 1, 1, True), "2026-11-23": (1, 1, 1, 1, False)}
    assert stats(client, start, TODAY) == first
    assert cold_stats(client, redis_client, redis_prefix, start, TODAY) == first


@pytest.mark.time_machine("2026-11-23T12:00:00+08:00", tick=False)
def test_a_range_that_starts_inside_the_cached_months_reads_the_same_days(redis_client, redis_prefix):
    create_tree()
    noon = at("2026-11-20 12:00")
    feed([pv_event(noon, "A1", "u1")], now=at("2026-11-20 12:01"))
    flush(now=at("2026-11-20 13:00"))
    reconcile(day=RECONCILED, now=at("2026-11-21 00:30"))
    client = portal_client("A1")
    whole = stats(client, dt.date(2026, 10, 1), TODAY)  # fills October and November
    part = stats(client, dt.date(2026, 11, 19), dt.date(2026, 11, 21))
    assert [d["date"] for d in part["days"]] == ["2026-11-19", "2026-11-20", "2026-11-21"]
    assert part["days"] == [d for d in whole["days"] if "2026-11-19" <= d["date"] <= "2026-11-21"]
    assert numbers(part) == {"2026-11-20": (1, 1, 1, 1, True)}
    assert (
        cold_stats(client, redis_client, redis_prefix, dt.date(2026, 11, 19), dt.date(2026, 11, 21)) == part
    )


@pytest.mark.time_machine("2026-11-23T12:00:00+08:00", tick=False)
def test_the_json_and_the_csv_list_the_same_days_across_months_and_states():
    """JSON sends the closed days as rendered once; the CSV builds every day per request: they must agree."""
    create_tree()
    for moment, day in (("2026-10-31 23:00", dt.date(2026, 10, 31)), ("2026-11-20 12:00", RECONCILED)):
        feed([pv_event(at(moment), "A1", "u1"), pv_event(at(moment), "A1a", "u2")], now=at(moment))
        flush(now=at(moment) + dt.timedelta(hours=1))
        reconcile(day=day, now=NOW)
    feed([pv_event(at("2026-11-22 12:00"), "A1a", "u3")], now=at("2026-11-22 12:00"))
    flush(now=at("2026-11-22 13:00"))  # flushed, not reconciled
    feed([pv_event(at("2026-11-23 11:00"), "A1", "u1")], now=NOW)  # today: in Redis only
    client = portal_client("A1")
    start = dt.date(2026, 10, 30)

    for _ in ("cold", "warm"):
        body = stats(client, start, TODAY)
        assert numbers(body) == {
            "2026-10-31": (2, 2, 1, 1, True),
            "2026-11-20": (2, 2, 1, 1, True),
            "2026-11-22": (1, 1, 0, 0, False),
            "2026-11-23": (1, 1, 1, 1, False),
        }
        assert len(body["days"]) == 25 and body["total_pv"] == 6
        response = client.get(f"/api/v1/partners/A1/stats/?start={start}&end={TODAY}&format=csv")
        text = b"".join(response.streaming_content).decode("utf-8-sig")
        rows = list(csv.DictReader(io.StringIO(text)))
        assert [
            (r["date"], int(r["pv"]), int(r["uv"]), int(r["pv_self"]), int(r["uv_self"]), r["reconciled"])
            for r in rows
        ] == [
            (d["date"], d["pv"], d["uv"], d["pv_self"], d["uv_self"], "true" if d["reconciled"] else "false")
            for d in body["days"]
        ]


@pytest.mark.time_machine("2026-11-23T12:00:00+08:00", tick=False)
def test_a_live_day_kept_between_requests_follows_every_write_and_survives_a_flush():
    """The live day's numbers are kept while no batch has written to the partitions: each write shows at once."""
    create_tree()
    client = portal_client("A1")
    feed(
        [pv_event(at("2026-11-23 11:00"), "A1", "u1"), pv_event(at("2026-11-23 11:00"), "A1a", "u2")], now=NOW
    )
    assert numbers(stats(client, TODAY, TODAY)) == {"2026-11-23": (2, 2, 1, 1, False)}
    assert numbers(stats(client, TODAY, TODAY)) == {"2026-11-23": (2, 2, 1, 1, False)}  # kept

    feed([pv_event(at("2026-11-23 11:01"), "A1a", "u3")], now=NOW)  # same bucket
    assert numbers(stats(client, TODAY, TODAY)) == {"2026-11-23": (3, 3, 1, 1, False)}
    flush(now=NOW, include_open=True)  # from Redis to SQL: no sum changes
    assert numbers(stats(client, TODAY, TODAY)) == {"2026-11-23": (3, 3, 1, 1, False)}
    feed([pv_event(at("2026-11-23 11:02"), "A1", "u1")], now=NOW, partition=1)  # another partition, same user
    assert numbers(stats(client, TODAY, TODAY)) == {"2026-11-23": (4, 3, 2, 1, False)}
    flush(now=NOW, include_open=True)
    feed([pv_event(at("2026-11-23 11:03"), "A1", "u4")], now=NOW)
    assert numbers(stats(client, TODAY, TODAY)) == {"2026-11-23": (5, 4, 3, 2, False)}


@pytest.mark.time_machine("2026-11-23T12:00:00+08:00", tick=False)
def test_the_distinct_users_of_a_range_merge_the_final_days_once_and_the_open_days_per_request(
    redis_client, redis_prefix
):
    from partners.models import Partner
    from stats.read.selectors import uv_between

    create_tree()
    for day, views in ((10, (("A1", "u1"), ("A1a", "u2"))), (11, (("A1", "u2"), ("A1a", "u3")))):
        noon = at(f"2026-11-{day} 12:00")  # both days ended beyond the lateness horizon of today
        feed([pv_event(noon, code, user) for code, user in views], now=noon + dt.timedelta(minutes=1))
        flush(now=noon + dt.timedelta(hours=1))
        reconcile(day=dt.date(2026, 11, day), now=at(f"2026-11-{day + 1} 00:30"))
    feed([pv_event(at("2026-11-22 11:00"), "A1a", "u4")], now=NOW)  # inside the horizon: read per request
    a1, start = Partner.objects.get(code="A1"), dt.date(2026, 11, 10)

    def both_scopes() -> tuple[int, int]:
        return uv_between(a1, start, TODAY), uv_between(a1, start, TODAY, scope="self")

    expected = (hll_estimate_of(["u1", "u2", "u3", "u4"]), hll_estimate_of(["u1", "u2"]))
    assert both_scopes() == expected
    # One union per scope, of the days up to the 14th (the 12th to the 14th had no traffic).
    ours = redis_client.scan_iter(match=f"{{{redis_prefix}}}:final:*:uv:*", count=1000)
    cached = sorted(k.decode().rsplit(":", 2)[1:] for k in ours)
    assert cached == [["self", "20261110-20261114"], ["tree", "20261110-20261114"]]
    assert both_scopes() == expected  # warm
    feed([pv_event(at("2026-11-23 11:30"), "A1", "u5")], now=NOW)  # today
    expected = (hll_estimate_of(["u1", "u2", "u3", "u4", "u5"]), hll_estimate_of(["u1", "u2", "u5"]))
    assert both_scopes() == expected
    assert uv_between(a1, dt.date(2026, 11, 11), TODAY) == hll_estimate_of(["u2", "u3", "u4", "u5"])
    cold = list(redis_client.scan_iter(match=f"{{{redis_prefix}}}:final:*", count=1000))
    redis_client.delete(*cold)
    assert both_scopes() == expected
