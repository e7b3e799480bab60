"""A Redis written by version 1 (every key under the one tag {P}) moves to the per-partition layout in place:
nothing counted and not yet flushed is lost, offsets resume where they were, and a second run does nothing."""

import datetime as dt
import io

import pytest
from django.core.management import call_command

from stats.counters.rankings import top_partners
from stats.counters.series import ALL_TRAFFIC, read_series
from stats.jobs.flush import flush
from stats.pipeline.ingest import Message, process_batch, stored_offsets
from stats.pipeline.metrics import counted_events
from stats.read.pipeline_status import dead_letters_counted
from tests.factories import at, create_tree, daily, pv_event

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 21)
NOON = at("2026-11-21 12:00")
LATER = at("2026-11-21 13:00")


def write_version_1(client, prefix: str) -> None:
    """What version 1 left after counting 3 views of B by u1, u2, u1 at noon from test-topic[0], offsets 0-2,
    and offsets 0-6 of partition 2 (7 events of type login, not shown here), with one dead letter: the keys
    as that version spelled them."""
    p = "{" + prefix + "}"
    noon = int(NOON.timestamp())
    bucket = f"{p}:pv:B:202611211200"
    client.hset(bucket, mapping={"tree": 3, "self": 3, "bot": 0, "gen": "v1gen"})
    client.zadd(f"{p}:pv:index", {bucket: 202611211200})
    for scope in ("tree", "self"):
        client.pfadd(f"{p}:uv:B:20261121:{scope}", "u1", "u2")
        client.sadd(f"{p}:uv:index:20261121", f"{p}:uv:B:20261121:{scope}")
    client.zadd(f"{p}:uv:days", {"20261121": 20261121})
    client.hset(f"{p}:offsets:g:test-topic", mapping={0: 3, 2: 7})
    client.set(f"{p}:fence:g:test-topic:0", 3)
    client.set(f"{p}:fence:g:test-topic:2", 7)
    client.hset(f"{p}:metrics:counted", mapping={"pv:test-topic": 3, "login:test-topic": 7})
    client.hset(f"{p}:deadletters", mapping={"bad_json": 1})
    slot = f"{p}:rank:1h:tree:slot:{noon}"
    client.hset(slot, "B", 3)
    client.zadd(f"{p}:rank:1h:tree:slots", {slot: noon})
    client.zadd(f"{p}:rank:1h:tree:total", {"B": 3})
    client.hset(f"{p}:series:60:{ALL_TRAFFIC}", str(noon), 3)
    client.zadd(f"{p}:series:known", {f"60:{ALL_TRAFFIC}": 0})
    client.hset(f"{p}:series:300:p:B", str(noon), 3)  # B's subtree: what the rankings' tree scope reads today
    client.zadd(f"{p}:series:known", {"300:p:B": 0})


def test_version_1_keys_move_in_place_and_counting_goes_on_from_them(redis_client, redis_prefix):
    create_tree()
    write_version_1(redis_client, redis_prefix)
    out = io.StringIO()
    call_command("upgrade_redis_layout", stdout=out)
    assert out.getvalue().startswith("moved ")
    # Nothing of version 1 is left under the shared tag but what stays there.
    shared = "{" + redis_prefix + "}:"
    left = {k.decode().removeprefix(shared) for k in redis_client.scan_iter(match=shared + "*")}
    assert left - {"jobs:last_success", "jobs:last_duration"} == {"partitions", "layout"}

    assert stored_offsets(group="g", source="test-topic") == {0: 3, 2: 7}
    assert counted_events() == {("pv", "test-topic"): 3, ("login", "test-topic"): 7}
    assert dead_letters_counted() == {"bad_json": 1}
    assert [(r.partner, r.pv) for r in top_partners(window="1h", now=NOON + dt.timedelta(minutes=1))] == [
        ("B", 3)
    ]
    series = read_series(counter=ALL_TRAFFIC, precision=60, start=NOON, end=NOON)
    assert series == [(NOON, 3)]

    # Partition 0 goes on from offset 3: a batch from 0 is stale, one from 3 counts on top.
    again = [Message("test-topic", 0, n, pv_event(NOON, "B", "u1", event_id=f"old-{n}")) for n in range(3)]
    assert process_batch(again, group="g", now=NOON).counted == 0
    more = [Message("test-topic", 0, 3 + n, pv_event(NOON, "B", f"u{3 + n}")) for n in range(2)]
    assert process_batch(more, group="g", now=NOON).counted == 2
    flush(now=LATER)
    row = daily("B", DAY)
    # 3 views by u1, u2 (version 1) and 2 by u3, u4; the bucket of version 1 stays its own row.
    assert (row.pv, row.pv_self, row.uv, row.uv_self) == (5, 5, 4, 4)

    out = io.StringIO()
    call_command("upgrade_redis_layout", stdout=out)
    assert out.getvalue().strip() == "Redis layout is current"
