"""Storage that does not grow without bound: every Redis key the product writes carries a safety TTL."""

import datetime as dt

import pytest

from loginlog import keys as login_keys
from loginlog.selectors import active_user_count
from loginlog.services import sync_logins
from stats.counters.rankings import rotate_all, top_partners
from stats.counters.series import clean_series
from stats.jobs.flush import flush
from stats.jobs.reconcile import reconcile
from stats.read.selectors import partner_days
from tests.factories import at, create_tree, feed, login_event, pv_event

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 21)
NOON = at("2026-11-21 12:00")
LATER = at("2026-11-21 13:00")
ONE_DAY = 86400


def test_after_a_full_cycle_no_product_key_lives_forever(redis_client, redis_prefix):
    tree = create_tree()
    feed(
        [
            pv_event(NOON, "A1a", "u1"),
            pv_event(NOON, None, "u2"),
            pv_event(NOON, "B", "u3", ua="Googlebot/2.1"),
            login_event(NOON, "client", 7),
            b"{not json",
        ],
        now=NOON,
    )
    feed([pv_event(LATER, "A2", "u4")], now=LATER)  # an open bucket that flush keeps
    flush(now=LATER)
    rotate_all(now=LATER)
    clean_series(now=LATER, force=True)
    sync_logins(now=LATER)
    reconcile(day=DAY, now=LATER)
    top_partners(window="24h", now=LATER)
    partner_days(partner=tree["A"], start=DAY, end=DAY)
    assert active_user_count(user_type="client", start=DAY, end=DAY) == 1

    product_keys = sorted(
        k.decode() for k in redis_client.scan_iter(match=f"{{{redis_prefix}}}:*", count=1000)
    )
    assert len(product_keys) > 20  # buckets, UV, rankings, series, logins, offsets, dead-letter counts
    assert [key for key in product_keys if redis_client.ttl(key) < 0] == []
    # Login bitmaps outlive the retention after their month ends plus several missed weekly syncs.
    month_key = login_keys.login_month("client", 7, "202611")
    assert redis_client.ttl(month_key) >= (31 + 62 + 4 * 7) * ONE_DAY


def test_a_write_renews_the_safety_ttl(redis_client):
    create_tree()
    feed([login_event(NOON, "client", 7)], now=NOON)
    key = login_keys.login_day("client", "20261121")
    redis_client.expire(key, 100)
    feed([login_event(NOON + dt.timedelta(minutes=1), "client", 8)], now=NOON)
    assert redis_client.ttl(key) > 100 * ONE_DAY
