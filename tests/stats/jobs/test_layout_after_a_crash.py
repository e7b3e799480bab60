"""The layout upgrade run again after a crash part-way through: the API's live day then shows every count.

The stats API keeps a live day's numbers while the counters' versions it read them at are current. A read
between the crash and the second run sees the keys moved so far; the second run moves the rest and must give
the counters new versions, or the API goes on serving the partial day.
"""

import datetime as dt

import pytest

from stats import keys
from stats.jobs import layout
from tests.factories import create_tree, portal_client

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine("2026-11-21T12:20:00+08:00", tick=False)]

DAY = dt.date(2026, 11, 21)


def write_version_1(client, prefix: str) -> tuple[str, str, str]:
    """What version 1 left after counting B's 2 views at 12:00 and 1 at 12:05 from test-topic[0], offsets 0-2.

    Return the names of the offsets and of the two buckets.
    """
    p = "{" + prefix + "}"
    buckets = (f"{p}:pv:B:202611211200", f"{p}:pv:B:202611211205")
    for bucket, views in zip(buckets, (2, 1), strict=True):
        client.hset(bucket, mapping={"tree": views, "self": views, "bot": 0, "gen": "v1gen"})
        client.zadd(f"{p}:pv:index", {bucket: int(bucket.rsplit(":", 1)[1])})
    offsets = f"{p}:offsets:g:test-topic"
    client.hset(offsets, mapping={0: 3})
    return offsets, *buckets


def pv_of_b_today() -> int:
    response = portal_client("B").get(f"/api/v1/partners/B/stats/?start={DAY}&end={DAY}")
    assert response.status_code == 200, response.content
    return response.json()["days"][0]["pv"]


def test_after_a_crash_part_way_the_second_run_makes_the_api_read_the_whole_day(redis_client, redis_prefix):
    create_tree()
    offsets, first_bucket, _ = write_version_1(redis_client, redis_prefix)
    # A run that died after moving the offsets (which registers partition 0) and the 12:00 bucket.
    layout._move_offsets(redis_client, offsets, group="g", topic="test-topic")
    layout._move(redis_client, first_bucket, keys.version1_moved(first_bucket))
    assert pv_of_b_today() == 2  # the 12:05 bucket still sits under its old name
    assert layout.upgrade_layout() > 0
    assert pv_of_b_today() == 3
