"""Multi-resolution series (stats.counters.series), fed through the real ingest pipeline."""

import datetime as dt
import random

import numpy as np
import pytest

from cpsproject.common.lua import HASHTABLE_PAST_FIELDS
from stats import keys
from stats.counters.hincrby import queue_hincrby_many
from stats.counters.series import ALL_TRAFFIC, clean_series, partner_counter, read_series
from tests.factories import SHANGHAI, at, create_tree, feed, pv_event

pytestmark = pytest.mark.django_db

CHAINS = {"A1a": ["A", "A1", "A1a"], "A1": ["A", "A1"], "A2": ["A", "A2"], "B": ["B"]}


def random_events(rng: random.Random, *, start: dt.datetime, hours: float, n: int):
    leaves = ["A1a", "A1a", "A1", "A2", "B", "B", "B"]
    return [
        (start + dt.timedelta(seconds=rng.randrange(int(hours * 3600))), rng.choice(leaves)) for _ in range(n)
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
        site = read_series(counter=ALL_TRAFFIC, precision=precision, start=start, end=end)
        assert sum(count for _, count in site) == 800, precision
        a_total = sum(
            c for _, c in read_series(counter=partner_counter("A"), precision=precision, start=start, end=end)
        )
        assert a_total == sum(1 for _, code in events if "A" in CHAINS[code])
    # Every hourly sample holds exactly the events of its hour.
    hours = read_series(counter=ALL_TRAFFIC, precision=3600, start=start, end=end - dt.timedelta(seconds=1))
    assert [ts for ts, _ in hours] == [at(f"2026-11-21 {h:02}:00") for h in range(8, 14)]
    assert [count for _, count in hours] == [
        sum(1 for ts, _ in events if ts.astimezone(SHANGHAI).hour == h) for h in range(8, 14)
    ]


@pytest.mark.parametrize(
    ("last_second", "first_second"),
    [
        (at("2026-12-31 23:59:59"), at("2027-01-01 00:00")),
        (at("2027-02-28 23:59:59"), at("2027-03-01 00:00")),
        (at("2026-11-30 23:59:59"), at("2026-12-01 00:00")),
    ],
    ids=["year end", "end of february", "month end"],
)
def test_day_and_hour_samples_split_at_business_midnight(last_second, first_second):
    create_tree()
    feed(
        [pv_event(last_second, "B"), pv_event(first_second, "B"), pv_event(first_second, "B")],
        now=first_second,
    )
    before, after = last_second.replace(hour=0, minute=0, second=0), first_second
    days = read_series(counter=partner_counter("B"), precision=86400, start=before, end=after)
    assert days == [(before, 1), (after, 2)]
    hours = read_series(counter=ALL_TRAFFIC, precision=3600, start=last_second, end=first_second)
    assert hours == [(last_second.replace(minute=0, second=0), 1), (first_second, 2)]


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
    minutes = read_series(counter=ALL_TRAFFIC, precision=60, start=start, end=now)
    assert [c for _, c in minutes] == [0] * 20 + [1] * 10  # the 10 newest minutes are kept
    assert sum(c for _, c in read_series(counter=ALL_TRAFFIC, precision=3600, start=start, end=now)) == 30
    clean_series(now=now + dt.timedelta(days=1), force=True)
    assert redis_client.zcard(keys.series_known(0)) == 0  # every counter emptied and forgotten


def utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text + "+00:00")


def test_hour_samples_follow_the_zone_across_the_fall_back_hour(settings):
    # New York, 2026-11-01: 01:59:59 EDT (05:59:59Z) is followed by 01:00 EST (06:00Z). The two 01:00 hours
    # are two samples, an hour apart in epoch time.
    settings.TIME_ZONE = "America/New_York"
    create_tree()
    moments = ["04:59:59", "05:30:00", "05:59:59", "06:00:00", "06:30:00", "06:59:59"]
    feed([pv_event(utc(f"2026-11-01T{m}"), "B") for m in moments], now=utc("2026-11-01T07:00:00"))

    hours = read_series(
        counter=partner_counter("B"),
        precision=3600,
        start=utc("2026-11-01T04:00"),
        end=utc("2026-11-01T06:59"),
    )
    assert [(ts.astimezone(dt.UTC), n) for ts, n in hours] == [
        (utc("2026-11-01T04:00"), 1),
        (utc("2026-11-01T05:00"), 2),
        (utc("2026-11-01T06:00"), 3),
    ]


@pytest.mark.parametrize(
    ("moments", "start", "end", "expected"),
    [
        # 2026-11-01 is 25 hours long in New York: 00:00 EDT (04:00Z) to 00:00 EST on the 2nd (05:00Z).
        (
            [
                "2026-10-31T12:00:00",
                "2026-11-01T04:00:00",
                "2026-11-01T12:00:00",
                "2026-11-02T04:59:59",
                "2026-11-02T05:00:00",
            ],
            "2026-10-31T04:00",
            "2026-11-02T05:00",
            [("2026-10-31T04:00", 1), ("2026-11-01T04:00", 3), ("2026-11-02T05:00", 1)],
        ),
        # 2026-03-08 is 23 hours long: 00:00 EST (05:00Z) to 00:00 EDT on the 9th (04:00Z).
        (
            ["2026-03-08T05:00:00", "2026-03-08T12:00:00", "2026-03-09T03:59:59", "2026-03-09T04:00:00"],
            "2026-03-08T05:00",
            "2026-03-09T04:00",
            [("2026-03-08T05:00", 3), ("2026-03-09T04:00", 1)],
        ),
    ],
    ids=["fall-back", "spring-forward"],
)
def test_a_day_sample_spans_the_whole_local_day_across_a_dst_change(settings, moments, start, end, expected):
    # A day's events used to land in two samples an hour apart (each event's own offset subtracted from local
    # midnight), and the reader, stepping 86,400 s, showed only one of them.
    settings.TIME_ZONE = "America/New_York"
    create_tree()
    feed([pv_event(utc(m), "B") for m in moments], now=utc(moments[-1]) + dt.timedelta(minutes=1))

    days = read_series(counter=partner_counter("B"), precision=86400, start=utc(start), end=utc(end))
    assert [(ts.astimezone(dt.UTC), n) for ts, n in days] == [(utc(day), n) for day, n in expected]


def test_the_five_hour_sample_holding_the_change_back_is_six_hours_long(settings):
    # Five-hour samples start where wall-clock seconds since 1970 are a multiple of 18,000: in New York on
    # 31 October-1 November 2026 at 22:00 EDT (02:00Z), then 03:00 local, which comes after the repeated hour,
    # at 03:00 EST (08:00Z), then 08:00 EST (13:00Z).
    settings.TIME_ZONE = "America/New_York"
    create_tree()
    moments = ["02:00:00", "05:59:59", "06:00:00", "07:59:59", "08:00:00", "12:59:59", "13:00:00"]
    feed([pv_event(utc(f"2026-11-01T{m}"), "B") for m in moments], now=utc("2026-11-01T14:00:00"))

    fives = read_series(
        counter=partner_counter("B"),
        precision=18000,
        start=utc("2026-11-01T02:00"),
        end=utc("2026-11-01T13:00"),
    )
    assert [(ts.astimezone(dt.UTC), n) for ts, n in fives] == [
        (utc("2026-11-01T02:00"), 4),
        (utc("2026-11-01T08:00"), 2),
        (utc("2026-11-01T13:00"), 1),
    ]


def test_five_minute_and_hour_samples_start_on_kathmandu_quarter_hours(settings):
    settings.TIME_ZONE = "Asia/Kathmandu"  # UTC+5:45: local hours start at :15 past the UTC hour
    create_tree()
    moments = ["2027-01-01T00:14:59", "2027-01-01T00:15:00", "2027-01-01T00:19:59", "2027-01-01T00:20:00"]
    feed([pv_event(utc(m), "A1a") for m in moments], now=utc("2027-01-01T00:30:00"))

    hours = read_series(
        counter=partner_counter("A"),
        precision=3600,
        start=utc("2026-12-31T23:15"),
        end=utc("2027-01-01T00:15"),
    )
    assert [(ts.astimezone(dt.UTC), n) for ts, n in hours] == [
        (utc("2026-12-31T23:15"), 1),
        (utc("2027-01-01T00:15"), 3),
    ]
    fives = read_series(
        counter=ALL_TRAFFIC, precision=300, start=utc("2027-01-01T00:10"), end=utc("2027-01-01T00:20")
    )
    assert [(ts.astimezone(dt.UTC), n) for ts, n in fives] == [
        (utc("2027-01-01T00:10"), 1),
        (utc("2027-01-01T00:15"), 2),
        (utc("2027-01-01T00:20"), 1),
    ]


def test_a_counter_the_cleaner_forgot_is_indexed_again_with_its_ttl_when_it_counts_again(
    settings, redis_client
):
    settings.CPS_STATS = {**settings.CPS_STATS, "SERIES_RETENTION": {60: 10}}
    create_tree()
    start = at("2026-11-21 08:00")
    feed([pv_event(start, "B")], now=start)
    clean_series(now=start + dt.timedelta(days=1), force=True)
    assert redis_client.zcard(keys.series_known(0)) == 0
    later = start + dt.timedelta(days=1)
    feed([pv_event(later, "B")], now=later)
    known = {member.decode() for member in redis_client.zrange(keys.series_known(0), 0, -1)}
    assert known == {keys.series_member(60, ALL_TRAFFIC), keys.series_member(60, partner_counter("B"))}
    for counter in (ALL_TRAFFIC, partner_counter("B")):
        assert 0 < redis_client.ttl(keys.series_hash(0, 60, counter)) <= 60 * 10 + 86400


def ttl_after_a_new_sample(settings, redis_client, *, ttl_left: int) -> int:
    """B's 1-minute hash (safety TTL 600 s + a day) with ``ttl_left`` seconds to live gains a sample: its TTL after."""
    settings.CPS_STATS = {**settings.CPS_STATS, "SERIES_RETENTION": {60: 10}}
    create_tree()
    start = at("2026-11-21 08:00")
    feed([pv_event(start, "B")], now=start)
    hash_key = keys.series_hash(0, 60, partner_counter("B"))
    redis_client.expire(hash_key, ttl_left)
    next_minute = start + dt.timedelta(minutes=1)
    feed([pv_event(next_minute, "B")], now=next_minute)
    return redis_client.ttl(hash_key)


def test_a_new_sample_renews_the_safety_ttl_of_its_hash(settings, redis_client):
    assert ttl_after_a_new_sample(settings, redis_client, ttl_left=100) > 100


def test_a_new_sample_leaves_a_hash_with_most_of_its_ttl_alone(settings, redis_client):
    """Renewing on every new sample was two writes for nearly every hash of every batch (issue 35)."""
    # Run down by less than a day.
    assert 0 < ttl_after_a_new_sample(settings, redis_client, ttl_left=60 * 10 + 1000) <= 60 * 10 + 1000


def test_many_increments_reach_their_hash_and_field_whatever_the_field_width_and_amount(redis_client):
    """``hincrby_many.lua`` reads the increments as bytes and each call's fields at one width: fields of several
    widths, a hash numbered past 255 and an amount past 65,535 each land where they were sent; a hash grown past
    ``HASHTABLE_PAST_FIELDS`` keeps every field, and nothing else."""
    hashes = [f"{keys.prefix()}:test-hincrby:{n}" for n in range(1, 301)]
    index = f"{keys.prefix()}:test-hincrby:index"

    def increment(triples: list[tuple[int, int, int]]) -> None:
        pipe = redis_client.pipeline(transaction=True)
        queue_hincrby_many(
            pipe,
            hashes,
            np.array(triples, dtype=np.int64),
            ttl=1000,
            index=index,
            members=[f"member-{n}" for n in range(1, 301)],
            index_ttl=2000,
            renew_after=100,
        )
        pipe.execute()

    past = HASHTABLE_PAST_FIELDS
    increment([(1, 7, 1), (1, 42, 2), (1, 1780000000, 3), (300, 1780000000, 70_000), (1, 7, 4)])
    # The second call fills hash 2 up to the threshold exactly, the third takes it past.
    increment([(2, 1780000000 + second, 1) for second in range(past)])
    increment([(2, 1780000000 + second, 2) for second in range(past - 5, past + 5)])
    assert redis_client.hgetall(hashes[0]) == {b"7": b"5", b"42": b"2", b"1780000000": b"3"}
    assert redis_client.hgetall(hashes[299]) == {b"1780000000": b"70000"}
    grown = redis_client.hgetall(hashes[1])
    assert len(grown) == past + 5
    assert (grown[b"1780000000"], grown[b"%d" % (1780000000 + past - 5)]) == (b"1", b"3")
    assert grown[b"%d" % (1780000000 + past + 4)] == b"2"
    # The cost the conversion is for (bench/redis_cost.md): a listpack is searched from its start.
    assert redis_client.object("encoding", hashes[1]) == b"hashtable"
    # Loaded from RDB (a restart, a replica's sync, a migrated slot), the hash is a listpack again; it is made a
    # hashtable again when it passes the next multiple.
    dumped = redis_client.dump(hashes[1])
    redis_client.delete(hashes[1])
    redis_client.restore(hashes[1], 0, dumped)
    increment([(2, 1780000000 + second, 1) for second in range(past + 5, 2 * past + 3)])
    grown = redis_client.hgetall(hashes[1])
    assert len(grown) == 2 * past + 3 and b"" not in grown
    assert redis_client.object("encoding", hashes[1]) == b"hashtable"
    assert redis_client.zrange(index, 0, -1) == [b"member-1", b"member-2", b"member-300"]
