"""Traffic quality through the real pipeline: counted live with the offsets, flushed, recounted by reconcile."""

import datetime as dt
import json

import pytest

from quality import keys as quality_keys
from quality.flush import flush_quality
from quality.models import QualityDay
from quality.networks import import_networks
from stats.jobs.reconcile import reconcile
from stats.keys import partition_tag
from stats.pipeline.ingest import Message, process_batch
from tests.conversions.orders import order_event
from tests.factories import at, create_tree, feed, pv_event

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 21)
NOON = at("2026-11-21 12:00")
NEXT_DAY = at("2026-11-22 01:00")
CHROME = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/120.0 Safari/537.36"


def view(clock: str, partner: str | None, openid: str, **extra) -> bytes:
    return pv_event(at(f"2026-11-21 {clock}"), partner, openid, **({"ua": CHROME} | extra))


def signals(code: str) -> dict:
    row = QualityDay.objects.get(partner__code=code, date=DAY)
    return {
        "pv": row.pv,
        "automated_pv": row.automated_pv,
        "repeat_pv": row.repeat_pv,
        "addressed_pv": row.addressed_pv,
        "distinct_ips": row.distinct_ips,
        "distinct_networks": row.distinct_networks,
        "top_addresses": row.top_addresses,
        "listed_pv": row.listed_pv,
        "reconciled": row.reconciled_at is not None,
    }


def test_a_day_of_signals_live_then_exact_after_reconcile(redis_client, redis_prefix):
    create_tree()
    import_networks("cidr,label\n198.51.100.0/24,hosting\n")
    first = feed(
        [
            view("10:00:00", "A1", "o-1", ip="203.0.113.7"),
            view("10:00:20", "A1", "o-1", ip="203.0.113.7"),  # 20 s after: a repeat
            view("10:02:00", "A1", "o-1", ip="203.0.113.7"),  # 75 s after its previous view: not one
            view("10:00:10", "A1", "o-2", ip="2001:db8:1:2::5", ua="Go-http-client/1.1"),  # crawler list
            view("10:00:11", "A1", "o-3", ip="2001:DB8:1:3::6", ua="Googlebot/2.1"),  # product's list
            view("10:01:00", "A1", "o-4", ip="198.51.100.9"),  # a listed network
            view("10:01:00", "A1", "o-5", ip="999.1.1.1"),  # malformed: no address, still a view
            pv_event(at("2026-11-21 10:01:00"), "A1", "o-6"),  # no ip, no ua
            view("10:01:00", "A1", "o-7", ip="fe80::1%eth0", ua="x" * 60_000),
            view("10:01:00", "B", "o-8"),
            view("10:01:00", None, "o-9", ip="203.0.113.7"),  # no partner: no signals
            view("10:01:00", "A1", "o-10", ip=123),  # not a string: a dead letter, as the contract says
        ],
        now=NOON,
        partition=0,
    )
    assert (first.counted, dict(first.dead)) == (11, {"bad_field": 1})
    # 25 s after o-1's 10:00:20 view, but counted from another partition: the live count cannot see it.
    feed([view("10:00:45", "A1", "o-1", ip="203.0.113.8")], now=NOON, partition=1)

    flush_quality(now=NOON)
    live = {
        "pv": 10,
        "automated_pv": 2,
        "repeat_pv": 1,
        "addressed_pv": 7,
        "distinct_ips": 5,
        "distinct_networks": 3,  # 203.0.113.0/24, 2001:db8:1::/48, 198.51.100.0/24
        "top_addresses": [
            ["203.0.113.7", 3],
            ["198.51.100.9", 1],
            ["2001:db8:1:2::5", 1],
            ["2001:db8:1:3::6", 1],
            ["203.0.113.8", 1],
        ],
        "listed_pv": 1,
        "reconciled": False,
    }
    assert signals("A1") == live
    assert signals("B")["pv"] == 1
    quarters = QualityDay.objects.get(partner__code="A1", date=DAY).quarters
    assert (len(quarters), quarters[40], sum(quarters)) == (96, 10, 10)  # 10:00-10:15 is the 41st quarter
    assert not QualityDay.objects.filter(partner__code="A").exists()  # own traffic only

    result = reconcile(day=DAY, now=NEXT_DAY)
    assert "traffic quality of 2026-11-21: 2 partner-days recounted, 1 differ from the live figures" in (
        result.summary()
    )
    assert signals("A1") == live | {"repeat_pv": 2, "reconciled": True}
    # A reconciled day is final: its keys go at the next flush, and a late view no longer moves the row.
    assert flush_quality(now=NEXT_DAY).deleted_days == 2
    assert [k for k in redis_client.scan_iter(match=f"{{{redis_prefix}:p*}}:q:*")] == []
    assert redis_client.scard(f"{{{redis_prefix}}}:q:index") == 0
    feed([view("23:00:00", "A1", "o-11", ip="203.0.113.9")], now=NEXT_DAY)
    flush_quality(now=NEXT_DAY)
    assert signals("A1") == live | {"repeat_pv": 2, "reconciled": True}


def test_repeats_across_batches_of_one_partition_compare_with_the_latest_view(redis_client):
    create_tree()
    # o-1: a view exactly the window (30 s) after the previous one is a repeat, 31 s is not; its next batch is
    # compared with its latest view of this batch (10:01:01), not its first.
    feed(
        [view(t, "A1", "o-1") for t in ("10:00:00", "10:00:30", "10:01:01")]
        + [view("10:05:00", "A1", "o-2")],
        now=NOON,
    )
    # o-1: 29 s after 10:01:01, a repeat. o-2: a view arriving after a later one is no repeat and leaves the
    # latest view where it was (10:05:00), so o-2's 10:05:20 in the next batch is one.
    feed([view("10:01:30", "A1", "o-1"), view("10:04:40", "A1", "o-2")], now=NOON)
    feed([view("10:05:20", "A1", "o-2")], now=NOON)
    flush_quality(now=NOON)
    assert (signals("A1")["pv"], signals("A1")["repeat_pv"]) == (7, 3)


def test_an_order_refused_in_a_batch_leaves_its_views_compared_with_the_batch_before(redis_client):
    create_tree()
    feed([view("10:00:00", "A1", "o-1")], now=NOON)
    # The order has no exchange rate (none imported): a recorder refuses it and it leaves the batch. The views'
    # counters stay as built, so o-1's view 20 s after the first batch's is still a repeat.
    result = feed(
        [view("10:00:20", "A1", "o-1"), order_event(at("2026-11-21 10:00:25"), "SO-1", currency="JPY")],
        now=NOON,
    )
    assert (result.counted, dict(result.dead)) == (1, {"bad_field": 1})
    flush_quality(now=NOON)
    assert (signals("A1")["pv"], signals("A1")["repeat_pv"]) == (2, 1)


def test_addresses_counted_before_the_upgrade_in_a_sorted_set_still_add_up_and_go(redis_client):
    create_tree()
    feed([view("10:00:00", "A1", "o-1", ip="203.0.113.7")], now=NOON, partition=0)
    # What the code before the address hash left for the same partner-day and partition: 2 views.
    old = quality_keys.addresses_sorted(partition_tag(0), "A1", "20261121")
    redis_client.zadd(old, {"203.0.113.7": 2, "203.0.113.8": 1})
    flush_quality(now=NOON)
    assert signals("A1")["top_addresses"] == [["203.0.113.7", 3], ["203.0.113.8", 1]]
    reconcile(day=DAY, now=NEXT_DAY)
    flush_quality(now=NEXT_DAY)
    assert not redis_client.exists(old)


def test_a_batch_read_again_after_a_crash_counts_once(redis_client):
    create_tree()
    messages = [
        Message("topic-q", 0, offset, view(f"10:00:{offset:02d}", "A1", "o-1", ip="203.0.113.7"))
        for offset in range(5)
    ]
    assert process_batch(messages, group="gq", now=NOON).counted == 5
    # The consumer died before committing to Kafka: the same messages come again.
    assert process_batch(messages, group="gq", now=NOON).counted == 0
    flush_quality(now=NOON)
    flush_quality(now=NOON)  # a flush run twice writes the same row
    assert signals("A1") | {"top_addresses": None} == {
        "pv": 5,
        "automated_pv": 0,
        "repeat_pv": 4,
        "addressed_pv": 5,
        "distinct_ips": 1,
        "distinct_networks": 1,
        "top_addresses": None,
        "listed_pv": 0,
        "reconciled": False,
    }


def test_hostile_values_never_stop_the_signals():
    create_tree()
    hostile = [
        view("10:00:00", "A1", "o-1", ip=ip, ua=ua)
        for ip, ua in [
            ("", ""),
            ("::", "\u202e\u0000bot"),
            ("255.255.255.255", "Mozilla" * 9000),
            ("0.0.0.0", None),
            ("::ffff:0:0", "\ud7ff"),
            ("1.2.3.4/24", "Googlebot"),
            ("[2001:db8::1]", CHROME),
            ("2001:db8::1:2:3:4:5:6:7", CHROME),
            ("١٢٣.١.١.١", CHROME),  # Arabic-Indic digits: not an address
        ]
    ]
    hostile.append(
        json.dumps({"event_id": "h-1", "type": "pv", "ts": 1795226400000, "partner": "A1"}).encode()
    )
    assert feed(hostile, now=NOON).counted == 10
    flush_quality(now=NOON)
    row = signals("A1")
    assert (row["pv"], row["distinct_ips"]) == (
        10,
        3,
    )  # ::, 255.255.255.255, 0.0.0.0 (and ::ffff:0:0 as 0.0.0.0)


def test_a_zombies_apply_behind_the_stored_offset_adds_nothing(redis_client):
    """The signals are fenced: a consumer that lost its partition while holding a batch applies its share after
    the new owner moved the offset, and none of it counts (increments outside the MULTI/EXEC would)."""
    from partners.selectors import partner_lineages
    from quality.counting import queue_quality
    from stats.pipeline.counting import RecordedCommands
    from stats.pipeline.events import parse_event
    from stats.pipeline.offsets import apply_with_offset
    from stats.plugins import CounterWrites

    create_tree()
    lineages = partner_lineages()
    events = [
        parse_event(view(f"10:00:0{n}", "A1", "o-1", ip="203.0.113.7"), lineages=lineages, now=NOON)
        for n in range(3)
    ]

    def apply() -> int | None:
        writes = CounterWrites(0, fenced=RecordedCommands(), idempotent=RecordedCommands())
        queue_quality(writes, events, now=NOON)
        return apply_with_offset(
            redis_client,
            group="gz",
            partition=("t", 0),
            first_offset=0,
            next_offset=3,
            writes=writes,
            dead={},
        )

    assert apply() is None  # the owner's apply
    assert apply() == 3  # the zombie's: stale
    flush_quality(now=NOON)
    assert (signals("A1")["pv"], signals("A1")["repeat_pv"], signals("A1")["top_addresses"]) == (
        3,
        2,
        [["203.0.113.7", 3]],
    )


def test_a_batch_built_then_read_again_is_not_compared_with_itself(redis_client):
    """A consumer builds a batch's counters, then loses the batch (it dies before the apply, or a rebalance
    moves the fence) and reads the same offsets again: its views were never counted, so none repeats itself."""
    from stats.pipeline.ingest import build_counters, parse_batch

    create_tree()
    messages = [Message("topic-r", 0, 40, view("10:00:00", "A1", "o-1"))]
    build_counters(parse_batch(messages, now=NOON))  # built, never applied
    assert process_batch(messages, group="gr", now=NOON).counted == 1
    # The next batch follows the counted one: compared with its view (10 s after: a repeat).
    follow = [Message("topic-r", 0, 41, view("10:00:10", "A1", "o-1"))]
    assert process_batch(follow, group="gr", now=NOON).counted == 1
    flush_quality(now=NOON)
    assert (signals("A1")["pv"], signals("A1")["repeat_pv"]) == (2, 1)


def test_after_a_seek_the_first_view_is_compared_by_the_recount_alone(redis_client):
    """A batch that does not start where the partition's last one ended (a restart, a rebalance, a stale batch
    skipped) forgets the views before it: live, the buyer's view 10 s after is no repeat; the recount finds it."""
    create_tree()
    assert process_batch(
        [Message("topic-s", 0, 7, view("10:00:00", "A1", "o-1"))], group="gs", now=NOON
    ).counted
    after = [
        Message("topic-s", 0, 20, view("10:00:10", "A1", "o-1")),
        Message("topic-s", 0, 21, view("10:00:15", "A1", "o-1")),
    ]
    assert process_batch(after, group="gs", now=NOON).counted == 2
    flush_quality(now=NOON)
    assert (signals("A1")["pv"], signals("A1")["repeat_pv"]) == (3, 1)  # 10:00:15 after 10:00:10 only
    reconcile(day=DAY, now=NEXT_DAY)
    assert (signals("A1")["pv"], signals("A1")["repeat_pv"]) == (3, 2)


def test_every_key_keeps_a_ttl_set_once_and_old_latest_views_go_with_the_day(redis_client, redis_prefix):
    """Keys get their safety TTL when created, however the day's views arrive (the address hash may come after
    the signals hash), and a later apply does not renew it; the buyers' latest views an earlier version kept
    count for nothing now and are deleted with the day."""
    create_tree()
    tag = partition_tag(0)
    old = quality_keys.last_views(tag, "A1", "20261121")
    redis_client.hset(old, mapping={"o-1": "1795226400"})  # what a running older version left
    redis_client.expire(old, 3600)
    feed([pv_event(at("2026-11-21 10:00:00"), "A1", "o-1")], now=NOON)  # no address: no address hash yet
    feed([view("10:05:00", "A1", "o-2", ip="203.0.113.7")], now=NOON)
    signals_key, addresses_key = (
        quality_keys.signals(tag, "A1", "20261121"),
        quality_keys.addresses(tag, "A1", "20261121"),
    )
    for key in (signals_key, addresses_key):
        assert quality_keys.DAY_TTL - 60 < redis_client.ttl(key) <= quality_keys.DAY_TTL
        redis_client.expire(key, 1000)
    feed(
        [view("10:06:00", "A1", "o-3", ip="203.0.113.7"), view("10:06:01", "A1", "o-4", ip="203.0.113.9")],
        now=NOON,
    )
    assert 0 < redis_client.ttl(signals_key) <= 1000 and 0 < redis_client.ttl(addresses_key) <= 1000
    flush_quality(now=NOON)
    assert (signals("A1")["pv"], signals("A1")["repeat_pv"], signals("A1")["distinct_ips"]) == (4, 0, 2)
    reconcile(day=DAY, now=NEXT_DAY)
    flush_quality(now=NEXT_DAY)
    assert [k for k in redis_client.scan_iter(match=f"{{{redis_prefix}:p*}}:q:*")] == []


def test_a_busy_partner_days_addresses_stay_exact_when_their_hash_changes_encoding(redis_client):
    """Past ``HASHTABLE_PAST_FIELDS`` (64) addresses the address hash is made a hashtable (signals.lua): no
    address is lost, added or miscounted by it, within the batch that crosses the threshold or after."""
    create_tree()
    first = [
        view(f"10:{n // 60:02d}:{n % 60:02d}", "A1", f"o-{n}", ip=f"203.0.113.{n}") for n in range(1, 65)
    ]
    feed(first, now=NOON, partition=0)  # up to the threshold exactly; the second batch takes it past
    second = [
        view(f"10:06:{n % 60:02d}", "A1", f"o-{n}", ip=f"203.0.113.{n}") for n in (1, 2, 3, *range(65, 71))
    ]
    feed(second, now=NOON, partition=0)
    flush_quality(now=NOON)
    row = signals("A1")
    assert (row["pv"], row["addressed_pv"], row["distinct_ips"]) == (73, 73, 70)
    assert row["top_addresses"][:4] == [
        ["203.0.113.1", 2],
        ["203.0.113.2", 2],
        ["203.0.113.3", 2],
        ["203.0.113.10", 1],
    ]
    addresses_key = quality_keys.addresses(partition_tag(0), "A1", "20261121")
    assert redis_client.object("encoding", addresses_key) == b"hashtable"
    # Loaded from RDB (a restart, a replica's sync, a migrated slot), the hash is a listpack again; it is made a
    # hashtable again when it passes the next multiple of 64.
    dumped = redis_client.dump(addresses_key)
    redis_client.delete(addresses_key)
    redis_client.restore(addresses_key, 0, dumped)
    third = [view(f"11:01:{n - 71:02d}", "A1", f"o-{n}", ip=f"203.0.114.{n}") for n in range(71, 131)]
    feed(third, now=NOON, partition=0)
    assert redis_client.object("encoding", addresses_key) == b"hashtable"
    flush_quality(now=NOON)
    assert signals("A1")["distinct_ips"] == 130
