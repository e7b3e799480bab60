"""What the consumer remembers to attribute orders: a buyer's last partner views in Redis, bounded."""

import pytest
from redis.crc import key_slot

from conversions import keys
from conversions.attribution import VIEWS_KEPT, field, generation, shard
from partners.models import Partner
from stats.pipeline.ingest import Message, process_batch
from tests.conversions.orders import order, order_event
from tests.factories import at, create_tree, feed, pv_event
from tests.reliability.test_redis_cluster import on_cluster, redis_cluster  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db

NOON = at("2026-11-21 12:00")
WINDOW = 30 * 86400


@pytest.fixture(autouse=True)
def tree() -> dict[str, Partner]:
    return create_tree()


def test_the_views_keys_are_hash_tags_of_their_own_on_the_prefix(settings):
    settings.CPS_REDIS_PREFIX = "cps"
    assert keys.views(681, 17) == "{cps:views:681:17}"
    assert keys.view_partitions() == "{cps:views:partitions}"


def test_a_buyer_goes_to_the_generation_of_the_views_window_and_a_shard_of_its_own():
    assert generation(int(at("2026-11-21 10:00").timestamp() * 1000)) == 692  # epoch day 20778 // 30
    assert shard("o-abc") == 50  # zlib.crc32(b"o-abc") is 1165883570


def remembered(redis_client, openid: str, ts, partition: int = 0) -> list[bytes]:
    key = keys.views(generation(int(ts.timestamp() * 1000)), shard(openid))
    value = redis_client.hget(key, field(openid, partition))
    return value.split(b"\x1e") if value else []


def test_the_last_views_are_kept_with_the_window_as_ttl_and_a_replay_changes_nothing(redis_client):
    views = [
        pv_event(at(f"2026-11-21 10:0{n}"), "A1", "o-1", event_id=f"v-{n}", url=f"/{n}") for n in range(6)
    ]
    messages = [Message("t", 0, n, v) for n, v in enumerate(views)]
    process_batch(messages, group="g1", now=NOON)
    kept = remembered(redis_client, "o-1", NOON)
    assert VIEWS_KEPT == 4
    ms = int(at("2026-11-21 10:00").timestamp() * 1000)
    assert kept == [f"{ms + n * 60_000}\x1fv-{n}\x1fA1\x1f/{n}".encode() for n in (5, 4, 3, 2)]
    # The hash expires a window and a day after the last day of its generation (a window of days).
    key = keys.views(generation(ms), shard("o-1"))
    ends = (generation(ms) + 1) * 30 * 86400
    assert redis_client.expiretime(key) == ends + WINDOW + 86400

    process_batch(messages, group="g2", now=NOON)  # the same batch again, as after a crash
    assert remembered(redis_client, "o-1", NOON) == kept


def test_no_key_for_views_without_a_partner_a_buyer_or_a_human(redis_client):
    feed(
        [
            pv_event(NOON, None, "o-1"),
            pv_event(NOON, "A1", ""),
            pv_event(NOON, "A1", "o-2", ua="Mozilla/5.0 (compatible; Googlebot/2.1)"),
        ],
        now=NOON,
    )
    assert remembered(redis_client, "o-1", NOON) == remembered(redis_client, "o-2", NOON) == []
    assert redis_client.hgetall(keys.views(generation(int(NOON.timestamp() * 1000)), shard(""))) == {}


def test_an_order_takes_the_latest_view_by_ts_not_by_arrival():
    feed([pv_event(at("2026-11-21 09:00"), "A2", "o-1")], now=NOON)
    feed([pv_event(at("2026-11-21 09:45"), "B", "o-1")], now=NOON)  # after the order, though it came before
    feed([pv_event(at("2026-11-21 08:00"), "A1", "o-1")], now=NOON)  # arrived last, but older
    feed([order_event(at("2026-11-21 09:30"), "SO-1", openid="o-1")], now=NOON)
    assert order("SO-1").partner.code == "A2"


def test_a_view_at_the_windows_edge_attributes_and_one_before_it_does_not():
    feed([pv_event(at("2026-11-01 10:00"), "A2", "o-1")], now=at("2026-11-01 12:00"))
    feed([pv_event(at("2026-11-01 09:59"), "B", "o-2")], now=at("2026-11-01 12:00"))
    feed(
        [
            order_event(at("2026-12-01 10:00"), "SO-1", openid="o-1"),  # exactly 30 days after
            order_event(at("2026-12-01 10:00"), "SO-2", openid="o-2"),  # 30 days and a minute
        ],
        now=at("2026-12-01 12:00"),
    )
    assert order("SO-1").partner.code == "A2"
    assert order("SO-2").partner is None


def test_redis_bytes_per_remembered_buyer(redis_client, capsys):
    """A thousand buyers with the most views kept, each with a UUID event id and a URL of typical length: what a
    remembered buyer costs, over the hashes that hold them."""
    buyers = [f"oX9f3k2Lq8mZ0pR7sT1u{n:05d}" for n in range(1000)]
    views = [
        pv_event(
            at(f"2026-11-21 10:0{n}"),
            "A1a",
            buyer,
            event_id=f"9f1c2e4a-7b3d-4e21-a8c6-{b:08d}{n:04d}",
            url=f"/item?id=10{n}&src=feed",
        )
        for b, buyer in enumerate(buyers)
        for n in range(VIEWS_KEPT)
    ]
    feed(views, now=NOON)
    gen = generation(int(NOON.timestamp() * 1000))
    hashes = [keys.views(gen, n) for n in range(keys.VIEW_SHARDS)]
    assert sum(redis_client.hlen(key) for key in hashes) == len(buyers)
    assert len(remembered(redis_client, buyers[0], NOON)) == VIEWS_KEPT
    used = sum(redis_client.memory_usage(key, samples=0) or 0 for key in hashes) / len(buyers)
    with capsys.disabled():
        print(f"\nRedis bytes per remembered buyer ({VIEWS_KEPT} views): {used:.0f}")
    assert used < 512


def test_on_a_redis_cluster_the_views_spread_over_the_masters_and_attribute(
    on_cluster,  # noqa: F811 (the cluster tests' fixtures)
    redis_cluster,  # noqa: F811
):
    buyers = [f"o-{n}" for n in range(200)]
    feed([pv_event(at("2026-11-21 09:00"), "A2", buyer, event_id=f"v-{buyer}") for buyer in buyers], now=NOON)
    feed([order_event(at("2026-11-21 09:30"), "SO-1", openid="o-7")], now=NOON)
    assert (order("SO-1").partner.code, order("SO-1").view_event_id) == ("A2", "v-o-7")
    gen = generation(int(NOON.timestamp() * 1000))
    masters = {redis_cluster.owner(key_slot(keys.views(gen, shard(buyer)).encode())) for buyer in buyers}
    assert masters == set(redis_cluster.master_ports())
