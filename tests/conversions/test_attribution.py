"""What the consumer remembers to attribute orders: a buyer's last partner views in Redis, bounded."""

import pytest

from conversions import keys
from conversions.attribution import VIEWS_KEPT
from partners.models import Partner
from stats.pipeline.ingest import Message, process_batch
from tests.conversions.orders import order, order_event
from tests.factories import at, create_tree, feed, pv_event

pytestmark = pytest.mark.django_db

NOON = at("2026-11-21 12:00")
WINDOW = 30 * 86400


@pytest.fixture(autouse=True)
def tree() -> dict[str, Partner]:
    return create_tree()


def test_a_buyers_views_key_is_a_hash_tag_of_its_own_on_the_prefix(settings):
    settings.CPS_REDIS_PREFIX = "cps"
    assert keys.buyer_views("o-abc") == "{cps:views:o-abc}"


def test_the_last_views_are_kept_with_the_window_as_ttl_and_a_replay_changes_nothing(redis_client):
    views = [
        pv_event(at(f"2026-11-21 10:0{n}"), "A1", "o-1", event_id=f"v-{n}", url=f"/{n}") for n in range(6)
    ]
    messages = [Message("t", 0, n, v) for n, v in enumerate(views)]
    process_batch(messages, group="g1", now=NOON)
    key = keys.buyer_views("o-1")
    kept = redis_client.zrange(key, 0, -1)
    assert VIEWS_KEPT == 4
    assert kept == [f"A1\x1fv-{n}\x1f/{n}".encode() for n in (2, 3, 4, 5)]
    assert WINDOW - 60 < redis_client.ttl(key) <= WINDOW

    process_batch(messages, group="g2", now=NOON)  # the same batch again, as after a crash
    assert redis_client.zrange(key, 0, -1) == kept


def test_no_key_for_views_without_a_partner_a_buyer_or_a_human(redis_client):
    feed(
        [
            pv_event(NOON, None, "o-1"),
            pv_event(NOON, "A1", ""),
            pv_event(NOON, "A1", "o-2", ua="Mozilla/5.0 (compatible; Googlebot/2.1)"),
        ],
        now=NOON,
    )
    assert redis_client.exists(keys.buyer_views("o-1"), keys.buyer_views(""), keys.buyer_views("o-2")) == 0


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
    """A buyer with the most views kept, each with a UUID event id and a URL of typical length: what a
    remembered buyer costs."""
    views = [
        pv_event(
            at(f"2026-11-21 10:0{n}"),
            "A1a",
            "oX9f3k2Lq8mZ0pR7sT1uV4wY6",
            event_id=f"9f1c2e4a-7b3d-4e21-a8c6-{n:012d}",
            url=f"/item?id=10{n}&src=feed",
        )
        for n in range(VIEWS_KEPT)
    ]
    feed(views, now=NOON)
    used = redis_client.memory_usage(keys.buyer_views("oX9f3k2Lq8mZ0pR7sT1uV4wY6"), samples=0)
    with capsys.disabled():
        print(f"\nRedis bytes per remembered buyer ({VIEWS_KEPT} views): {used}")
    assert used < 512
