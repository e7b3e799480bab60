"""Login keys spread over blocks of user ids, each its own hash tag; and the upgrade from the one-tag layout."""

import datetime as dt

import pytest
from redis.crc import key_slot

from loginlog import keys
from loginlog.layout import upgrade_login_layout
from loginlog.models import LoginMonth
from loginlog.selectors import (
    active_counts,
    active_page,
    active_user_count,
    active_user_ids,
    active_users,
    every_active_user,
    login_days,
)
from loginlog.services import login_record, sync_logins
from tests.factories import at

pytestmark = pytest.mark.django_db

D = dt.date
# Ids in four blocks of 65,536: 0, 3, 137 (9 million) and the last id of block 1.
LOGINS = [
    ("client", 5, D(2025, 10, 30)),
    ("client", 5, D(2025, 11, 2)),
    ("client", 200_000, D(2025, 10, 30)),
    ("client", 200_000, D(2025, 10, 31)),
    ("client", 131_071, D(2025, 11, 1)),
    ("client", 9_000_001, D(2025, 11, 1)),
    ("client", 9_000_001, D(2025, 12, 1)),
    ("office", 7, D(2025, 10, 31)),
    ("office", 70_000, D(2025, 11, 2)),
]


def answers() -> dict:
    start, end = D(2025, 10, 30), D(2025, 11, 2)
    return {
        "days_5": login_days(user_type="client", user_id=5, start=start, end=end),
        "days_200000": login_days(user_type="client", user_id=200_000, start=start, end=D(2025, 12, 31)),
        "ids": active_user_ids(user_type="client", start=start, end=end).tolist(),
        "ids_to_december": active_user_ids(user_type="client", start=start, end=D(2025, 12, 1)).tolist(),
        "count": active_user_count(user_type="client", start=start, end=end),
        "all": active_users(start=start, end=end),
        "page": active_page(user_types=["client", "office"], start=start, end=end, offset=2, limit=3),
        "export": [
            (t, ids.tolist())
            for t, ids in every_active_user(user_types=["client", "office"], start=start, end=end)
        ],
        "counts": active_counts(user_type="client", day=D(2025, 11, 1)),
    }


EXPECTED = {
    "days_5": [D(2025, 10, 30), D(2025, 11, 2)],
    "days_200000": [D(2025, 10, 30), D(2025, 10, 31)],
    "ids": [5, 131_071, 200_000, 9_000_001],
    "ids_to_december": [5, 131_071, 200_000, 9_000_001],
    "count": 4,
    "all": [
        ("client", 5),
        ("client", 131_071),
        ("client", 200_000),
        ("client", 9_000_001),
        ("office", 7),
        ("office", 70_000),
    ],
    "page": (6, [("client", 200_000), ("client", 9_000_001), ("office", 7)]),
    "export": [("client", [5, 131_071, 200_000, 9_000_001]), ("office", [7, 70_000])],
    "counts": {"dau": 2, "wau": 4, "mau": 4},
}


def record_all() -> None:
    for user_type, user_id, day in LOGINS:
        login_record(user_type=user_type, user_id=user_id, day=day)


def login_keys_in_redis(redis_client, redis_prefix) -> list[str]:
    found = [
        *redis_client.scan_iter(match=f"{{{redis_prefix}}}:login:*"),
        *redis_client.scan_iter(match=f"{{{redis_prefix}:login:*"),
    ]
    return sorted(key.decode() for key in found)


def test_the_logins_of_one_day_spread_over_slots_and_add_up(redis_client, redis_prefix):
    login_record(user_type="client", user_id=5, day=D(2026, 11, 21))
    login_record(user_type="client", user_id=200_000, day=D(2026, 11, 21))
    low, high = keys.block_of("client", 5), keys.block_of("client", 200_000)
    assert (low.number, high.number) == (0, 3)
    day_keys = [keys.login_day(low, "20261121"), keys.login_day(high, "20261121")]
    assert day_keys == [
        f"{{{redis_prefix}:login:client:b0}}:day:20261121",
        f"{{{redis_prefix}:login:client:b3}}:day:20261121",
    ]
    assert key_slot(day_keys[0].encode()) != key_slot(day_keys[1].encode())
    assert redis_client.exists(*day_keys) == 2
    # User 200000 is bit 200000 - 3 * 65536 of its block's day: the bitmap holds its block only.
    assert redis_client.strlen(day_keys[1]) == (200_000 - 3 * keys.BLOCK_IDS) // 8 + 1
    # Every key of a user sits in its block's slot.
    block_slot = key_slot(day_keys[1].encode())
    assert key_slot(keys.login_month("client", 200_000, "202611").encode()) == block_slot
    assert key_slot(keys.login_index(high, "202611").encode()) == block_slot
    assert key_slot(keys.login_scratch(high, "t", 2).encode()) == block_slot

    day = D(2026, 11, 21)
    assert active_user_ids(user_type="client", start=day, end=day).tolist() == [5, 200_000]
    assert active_user_count(user_type="client", start=day, end=day) == 2
    assert active_page(user_types=["client"], start=day, end=day, offset=1, limit=5) == (
        2,
        [("client", 200_000)],
    )
    assert active_counts(user_type="client", day=day) == {"dau": 2, "wau": 2, "mau": 2}


def test_a_population_over_many_blocks_answers_from_redis_and_after_expiry(redis_client, redis_prefix):
    record_all()
    assert answers() == EXPECTED
    assert {m.decode() for m in redis_client.zrange(keys.login_blocks(), 0, -1)} == {
        "202510:client:0",
        "202510:client:3",
        "202510:office:0",
        "202511:client:0",
        "202511:client:1",
        "202511:client:137",
        "202511:office:1",
        "202512:client:137",
    }
    result = sync_logins(now=at("2026-11-22 03:00"))
    assert result.synced_rows == 0 and result.deleted_keys > 0
    assert LoginMonth.objects.count() == 8
    # Every key of the expired months is gone, in every block, and every answer is the same from MySQL.
    assert login_keys_in_redis(redis_client, redis_prefix) == []
    assert answers() == EXPECTED


def test_a_month_keeps_its_days_in_every_block_while_one_block_is_not_synced(redis_client, monkeypatch):
    record_all()
    from loginlog import services

    real = services._upsert_months

    def upsert_but_block_3(month, bitmaps):
        return real(month, [(t, u, bits) for t, u, bits in bitmaps if u != 200_000])

    monkeypatch.setattr(services, "_upsert_months", upsert_but_block_3)
    sync_logins(now=at("2026-11-22 03:00"))
    # October stays whole in Redis (block 3's user is not in MySQL); November went.
    assert redis_client.exists(keys.login_day(keys.Block("client", 0), "20251030")) == 1
    assert redis_client.exists(keys.login_month("client", 200_000, "202510")) == 1
    assert redis_client.exists(keys.login_month("client", 5, "202510")) == 0
    assert redis_client.exists(keys.login_day(keys.Block("client", 0), "20251102")) == 0
    assert answers() == EXPECTED


# --- Upgrade from layout version 1 ----------------------------------------------------------------------


def write_old_layout(redis_client, redis_prefix, logins) -> None:
    """The keys of layout version 1, spelled out as it built them."""
    p = f"{{{redis_prefix}}}"
    for user_type, user_id, day in logins:
        month, stamp = f"{day:%Y%m}", f"{day:%Y%m%d}"
        redis_client.setbit(f"{p}:login:{user_type}:{user_id}:{month}", day.day, 1)
        redis_client.setbit(f"{p}:login:day:{user_type}:{stamp}", user_id, 1)
        redis_client.sadd(f"{p}:login:index:{month}", f"{user_type}:{user_id}")
        redis_client.zadd(f"{p}:login:months", {month: int(month)})


def test_the_upgrade_moves_every_old_key_and_every_bit(redis_client, redis_prefix):
    write_old_layout(redis_client, redis_prefix, LOGINS)
    old = login_keys_in_redis(redis_client, redis_prefix)
    # 9 logins: 8 user-months, 7 type-days, 3 month indexes, the month list
    assert len(old) == 8 + 7 + 3 + 1
    # A login the new consumer wrote before the upgrade ran stays.
    login_record(user_type="client", user_id=5, day=D(2025, 12, 1))

    assert upgrade_login_layout(redis_client) == len(old)

    new = login_keys_in_redis(redis_client, redis_prefix)
    assert not set(old) & set(new)
    # Nothing is left on the shared tag but the blocks list.
    assert [key for key in new if key.startswith(f"{{{redis_prefix}}}")] == [keys.login_blocks()]
    assert answers() == EXPECTED
    assert login_days(user_type="client", user_id=5, start=D(2025, 11, 1), end=D(2025, 12, 31)) == [
        D(2025, 11, 2),
        D(2025, 12, 1),
    ]
    # Run again (as after an interruption: some old keys written again): nothing changes, nothing is lost.
    write_old_layout(redis_client, redis_prefix, LOGINS[:3])
    assert upgrade_login_layout(redis_client) == 3 + 2 + 2 + 1
    assert upgrade_login_layout(redis_client) == 0
    assert answers() == EXPECTED
    # The weekly sync finds every user-month through the new indexes.
    sync_logins(now=at("2025-11-05 03:00"))
    assert sorted(LoginMonth.objects.values_list("user_type", "user_id", "month", "days")) == [
        ("client", 5, D(2025, 10, 1), 1 << 29),
        ("client", 5, D(2025, 11, 1), 1 << 1),
        ("client", 131_071, D(2025, 11, 1), 1 << 0),
        ("client", 200_000, D(2025, 10, 1), 1 << 29 | 1 << 30),
        ("client", 9_000_001, D(2025, 11, 1), 1 << 0),
        ("office", 7, D(2025, 10, 1), 1 << 30),
        ("office", 70_000, D(2025, 11, 1), 1 << 1),
    ]


def test_the_upgrade_gives_the_answers_of_the_logins_recorded_anew(redis_client, redis_prefix):
    record_all()
    before = answers()
    recorded = login_keys_in_redis(redis_client, redis_prefix)
    redis_client.delete(*recorded)
    assert answers()["count"] == 0
    write_old_layout(redis_client, redis_prefix, LOGINS)
    upgrade_login_layout(redis_client)
    assert answers() == before == EXPECTED
    # The same keys as the logins recorded anew, and not one more.
    assert login_keys_in_redis(redis_client, redis_prefix) == recorded
