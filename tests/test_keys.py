"""Every Redis key of the product, spelled out; and no key built anywhere but in a keys module."""

import ast
import importlib
import inspect
import re
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


# Every key builder of ``stats.keys``, with arguments to build one key; and what else the module holds.
KEY_BUILDERS = {
    "partitions": (),
    "layout_version": (),
    "offset": ("cps-stats", "cps-events", 2),
    "counters_version": (2,),
    "dead_letter_counts": (2,),
    "pv_bucket": (2, "P001", "202611211005"),
    "pv_index": (2,),
    "uv_day": (2, "P001", "20261121", "self"),
    "uv_index": (2, "20261121"),
    "uv_days": (2,),
    "kafka_end_offsets": ("cps-events",),
    "kafka_probe": (),
    "final_days_generation": (),
    "final_days": (7, "202611"),
    "final_union": (7, "tree", "20261110", "20261114"),
    "ranking_slot": (2, "24h", "tree", 1763690400),
    "ranking_slots": (2, "1h", "self"),
    "series_known": (2,),
    "series_hash": (2, 60, "p:P001"),
    "series_hash_of_member": (2, "300:all"),
    "series_cleaned": (),
    "metrics_counted": (2,),
    "metrics_batch_seconds": (),
    "metrics_members": ("cps-stats",),
}
NOT_KEY_BUILDERS = {
    "realtime_ttl",
    "final_days_ttl",
    "ranking_ttl",
    "series_ttl",
    "partition_tag",
    "parse_pv_bucket",
    "parse_uv_day",
    "series_member",
    "metrics_counted_field",
    "parse_metrics_counted_field",
    "version1_pattern",
    "version1_key",
    "version1_moved",
}
# Placeholders whose values may hold a colon (a series counter "p:P001", a topic "file:PATH").
_COLON_PLACEHOLDERS = {"{counter}", "{topic}"}


def _documented_patterns() -> list[str]:
    """The key patterns the module docstring draws: the first word of each line that starts with a tag."""
    return re.findall(r"^ {4}(\{P(?::pN)?\}:\S+)", stats_keys.__doc__, flags=re.MULTILINE)


def _as_regex(pattern: str) -> re.Pattern:
    parts = re.split(r"(\{[^{}]+\})", pattern)
    regex = ""
    for part in parts:
        if part == "{P}":
            regex += r"\{cps\}"
        elif part == "{P:pN}":
            regex += r"\{cps:p\d+(?:\.\d+)?\}"
        elif part in _COLON_PLACEHOLDERS:
            regex += ".+"
        elif part.startswith("{"):
            regex += "[^:]+"
        else:
            regex += re.escape(part)
    return re.compile(regex)


def test_every_builder_is_classified():
    functions = {
        name
        for name, value in vars(stats_keys).items()
        if inspect.isfunction(value) and value.__module__ == stats_keys.__name__ and not name.startswith("_")
    }
    assert functions == set(KEY_BUILDERS) | NOT_KEY_BUILDERS


def test_the_docstring_draws_exactly_the_keys_the_builders_build(settings):
    settings.CPS_REDIS_PREFIX = "cps"
    patterns = {pattern: _as_regex(pattern) for pattern in _documented_patterns()}
    built = {name: getattr(stats_keys, name)(*args) for name, args in KEY_BUILDERS.items()}
    undocumented = [
        f"{name}: {key}"
        for name, key in built.items()
        if not any(r.fullmatch(key) for r in patterns.values())
    ]
    unbuilt = [
        pattern for pattern, r in patterns.items() if not any(r.fullmatch(key) for key in built.values())
    ]
    assert undocumented == []
    assert unbuilt == []
    assert len(patterns) >= 20


def test_version1_keys_are_told_apart(settings):
    settings.CPS_REDIS_PREFIX = "cps"
    kind = {
        "{cps}:offsets:cps-stats:file:/tmp/a.jsonl": stats_keys.Version1Key(
            stats_keys.VERSION1_OFFSETS, "cps-stats", "file:/tmp/a.jsonl"
        ),
        "{cps}:fence:cps-stats:cps-events:3": stats_keys.Version1Key(stats_keys.VERSION1_FENCE),
        "{cps}:pv:index": stats_keys.Version1Key(stats_keys.VERSION1_INDEX),
        "{cps}:uv:index:20261121": stats_keys.Version1Key(stats_keys.VERSION1_INDEX),
        "{cps}:rank:1h:self:slots": stats_keys.Version1Key(stats_keys.VERSION1_INDEX),
        "{cps}:pv:P001:202611211005": stats_keys.Version1Key(stats_keys.VERSION1_MOVED),
        "{cps}:uv:days": stats_keys.Version1Key(stats_keys.VERSION1_MOVED),
        "{cps}:series:60:all": stats_keys.Version1Key(stats_keys.VERSION1_MOVED),
        "{cps}:deadletters": stats_keys.Version1Key(stats_keys.VERSION1_MOVED),
        "{cps}:series:cleaned": stats_keys.Version1Key(stats_keys.VERSION1_STAYS),
        "{cps}:final:gen": stats_keys.Version1Key(stats_keys.VERSION1_STAYS),
        "{cps}:lock:flush": stats_keys.Version1Key(stats_keys.VERSION1_STAYS),
    }
    assert {key: stats_keys.version1_key(key) for key in kind} == kind
    assert stats_keys.version1_moved("{cps}:pv:index") == "{cps:p0.1}:pv:index"


def test_every_owner_the_docstring_names_exists():
    """The docstring names the module that owns each structure: a module moved must take its name along."""
    owners = set(re.findall(r"\b((?:pipeline|counters|jobs|read)\.\w+)", stats_keys.__doc__))
    assert len(owners) >= 8
    missing = []
    for owner in sorted(owners):
        try:
            importlib.import_module(f"stats.{owner}")
        except ModuleNotFoundError:
            missing.append(owner)
    assert missing == []
