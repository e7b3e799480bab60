"""Every Redis key of the product, spelled out; and no key built anywhere but in a keys module."""

import ast
from collections import Counter
from pathlib import Path

from redis.crc import key_slot

from cpsproject.common import redis_keys
from loginlog import keys as login_keys
from stats import keys as stats_keys

ROOT = Path(__file__).resolve().parent.parent
KEYS_MODULES = {"cpsproject/common/redis_keys.py", "stats/keys.py", "loginlog/keys.py"}
PRODUCT = ["cpsproject", "partners", "stats", "loginlog"]


def test_every_key_starts_with_a_hash_tag_built_on_the_prefix(settings):
    settings.CPS_REDIS_PREFIX = "cps"
    # Shared keys: the prefix alone is the tag.
    assert redis_keys.lock("flush") == "{cps}:lock:flush"
    assert stats_keys.partitions() == "{cps}:partitions"
    assert stats_keys.layout_version() == "{cps}:layout"
    assert stats_keys.kafka_end_offsets("cps-events") == "{cps}:kafka:ends:cps-events"
    assert stats_keys.kafka_probe() == "{cps}:kafka:probe"
    assert stats_keys.metrics_members("cps-stats") == "{cps}:metrics:members:cps-stats"
    assert stats_keys.series_cleaned() == "{cps}:series:cleaned"
    # A scratch key has a tag of its own, which its parts share.
    assert redis_keys.scratch("t1") == "{cps:tmp:t1}"
    assert redis_keys.scratch_part("{cps:tmp:t1}", 2) == "{cps:tmp:t1}:2"
    # What a Kafka partition increments: under the partition's tag ({cps:p0.1} is partition 0's, see below).
    p0, p2 = "{cps:p0.1}", "{cps:p2.4}"
    assert stats_keys.partition_tag(0) == p0
    assert stats_keys.partition_tag(2) == p2
    assert stats_keys.offset("cps-stats", "cps-events", 2) == f"{p2}:offset:cps-stats:cps-events"
    assert stats_keys.dead_letter_counts(2) == f"{p2}:deadletters"
    assert stats_keys.metrics_counted(2) == f"{p2}:metrics:counted"
    assert stats_keys.pv_bucket(0, "P001", "202611211005") == f"{p0}:pv:P001:202611211005"
    assert stats_keys.pv_bucket(0, stats_keys.NO_PARTNER, "202611211005") == f"{p0}:pv:~site:202611211005"
    assert stats_keys.pv_index(2) == f"{p2}:pv:index"
    assert stats_keys.uv_day(0, "P001", "20261121", "tree") == f"{p0}:uv:P001:20261121:tree"
    assert stats_keys.uv_index(0, "20261121") == f"{p0}:uv:index:20261121"
    assert stats_keys.uv_days(0) == f"{p0}:uv:days"
    assert stats_keys.ranking_slot(0, "24h", "tree", 1763690400) == f"{p0}:rank:24h:tree:slot:1763690400"
    assert stats_keys.ranking_slots(0, "1h", "self") == f"{p0}:rank:1h:self:slots"
    assert stats_keys.ranking_total(0, "7d", "tree") == f"{p0}:rank:7d:tree:total"
    assert stats_keys.series_known(0) == f"{p0}:series:known"
    assert stats_keys.series_member(60, "p:P001") == "60:p:P001"
    assert stats_keys.series_hash(0, 60, "p:P001") == f"{p0}:series:60:p:P001"
    assert stats_keys.series_hash_of_member(0, "300:p:P001") == f"{p0}:series:300:p:P001"
    # Logins: per user type and block of 65,536 user ids (user 70000 is in block 1).
    assert login_keys.login_month("client", 1001, "202611") == "{cps:login:client:b0}:1001:202611"
    assert login_keys.login_month("client", 70000, "202611") == "{cps:login:client:b1}:70000:202611"
    assert (
        login_keys.login_day(login_keys.Block("client", 0), "20261121")
        == "{cps:login:client:b0}:day:20261121"
    )
    assert (
        login_keys.login_index(login_keys.Block("office", 2), "202611")
        == "{cps:login:office:b2}:index:202611"
    )
    assert login_keys.login_blocks() == "{cps}:login:blocks"


def test_partition_tags_land_in_evenly_spread_slots(settings):
    """Six partitions on three masters holding equal slot ranges: two each (hashed as they come, {cps:p0} to
    {cps:p5} put three on the second master and one on the first); twelve on four: three each."""
    for prefix in ("cps", "cps-eu", "another"):
        settings.CPS_REDIS_PREFIX = prefix
        slots = [key_slot(stats_keys.partition_tag(n).strip("{}").encode()) for n in range(12)]
        assert sorted(Counter(slot * 3 // 16384 for slot in slots[:6]).values()) == [2, 2, 2]
        assert sorted(Counter(slot * 4 // 16384 for slot in slots).values()) == [3, 3, 3, 3]
        assert sorted(Counter(slot * 2 // 16384 for slot in slots[:2]).values()) == [1, 1]


def test_bucket_and_uv_keys_parse_back():
    assert stats_keys.parse_pv_bucket(stats_keys.pv_bucket(3, "P-1.a", "202611211005")) == (
        "P-1.a",
        "202611211005",
    )
    uv = stats_keys.uv_day(3, stats_keys.NO_PARTNER, "20261121", "self")
    assert stats_keys.parse_uv_day(uv) == (stats_keys.NO_PARTNER, "20261121", "self")


def _prefix_uses(path: Path) -> list[int]:
    """Lines that call ``prefix()`` or read the prefix setting: the only ways to start a key."""
    tree = ast.parse(path.read_text(), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) == "prefix"
        ):
            lines.append(node.lineno)
        if isinstance(node, ast.Attribute) and node.attr == "CPS_REDIS_PREFIX":
            lines.append(node.lineno)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("{cps"):
            lines.append(node.lineno)
    return lines


def test_no_key_is_formatted_outside_the_keys_modules():
    offenders = []
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT).as_posix()
            if relative in KEYS_MODULES or "/migrations/" in relative or relative == "cpsproject/settings.py":
                continue
            offenders += [f"{relative}:{line}" for line in _prefix_uses(path)]
    assert offenders == []
