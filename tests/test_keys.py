"""Every Redis key of the product, spelled out; and no key built anywhere but in a keys module."""

import ast
from pathlib import Path

from cpsproject.common import redis_keys
from loginlog import keys as login_keys
from stats import keys as stats_keys

ROOT = Path(__file__).resolve().parent.parent
KEYS_MODULES = {"cpsproject/common/redis_keys.py", "stats/keys.py", "loginlog/keys.py"}
PRODUCT = ["cpsproject", "partners", "stats", "loginlog"]


def test_every_key_carries_the_prefix_as_one_hash_tag(settings):
    settings.CPS_REDIS_PREFIX = "cps"
    assert redis_keys.lock("flush") == "{cps}:lock:flush"
    assert redis_keys.scratch("t1") == "{cps}:tmp:t1"
    assert redis_keys.scratch_part("{cps}:tmp:t1", 2) == "{cps}:tmp:t1:2"
    assert stats_keys.pv_bucket("P001", "202611211005") == "{cps}:pv:P001:202611211005"
    assert stats_keys.pv_bucket(stats_keys.NO_PARTNER, "202611211005") == "{cps}:pv:~site:202611211005"
    assert stats_keys.pv_index() == "{cps}:pv:index"
    assert stats_keys.uv_day("P001", "20261121", "tree") == "{cps}:uv:P001:20261121:tree"
    assert stats_keys.uv_index("20261121") == "{cps}:uv:index:20261121"
    assert stats_keys.uv_days() == "{cps}:uv:days"
    assert stats_keys.offsets("cps-stats", "cps-events") == "{cps}:offsets:cps-stats:cps-events"
    assert stats_keys.offset_fence("cps-stats", "cps-events", 2) == "{cps}:fence:cps-stats:cps-events:2"
    assert stats_keys.dead_letter_counts() == "{cps}:deadletters"
    assert stats_keys.kafka_end_offsets("cps-events") == "{cps}:kafka:ends:cps-events"
    assert stats_keys.kafka_probe() == "{cps}:kafka:probe"
    assert stats_keys.metrics_members("cps-stats") == "{cps}:metrics:members:cps-stats"
    assert stats_keys.ranking_slot("24h", "tree", 1763690400) == "{cps}:rank:24h:tree:slot:1763690400"
    assert stats_keys.ranking_slots("1h", "self") == "{cps}:rank:1h:self:slots"
    assert stats_keys.ranking_total("7d", "tree") == "{cps}:rank:7d:tree:total"
    assert stats_keys.series_known() == "{cps}:series:known"
    assert stats_keys.series_member(60, "p:P001") == "60:p:P001"
    assert stats_keys.series_hash(60, "p:P001") == "{cps}:series:60:p:P001"
    assert stats_keys.series_hash_of_member("300:p:P001") == "{cps}:series:300:p:P001"
    assert stats_keys.series_cleaned() == "{cps}:series:cleaned"
    assert login_keys.login_month("client", 1001, "202611") == "{cps}:login:client:1001:202611"
    assert login_keys.login_day("client", "20261121") == "{cps}:login:day:client:20261121"
    assert login_keys.login_index("202611") == "{cps}:login:index:202611"
    assert login_keys.login_months() == "{cps}:login:months"


def test_bucket_and_uv_keys_parse_back():
    assert stats_keys.parse_pv_bucket(stats_keys.pv_bucket("P-1.a", "202611211005")) == (
        "P-1.a",
        "202611211005",
    )
    uv = stats_keys.uv_day(stats_keys.NO_PARTNER, "20261121", "self")
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
