"""The keys of ``quality``, spelled out; and no key of it built outside ``quality/keys.py``."""

from pathlib import Path

from quality import keys
from stats.keys import partition_tag
from tests.test_keys import _prefix_uses

ROOT = Path(__file__).resolve().parents[2]


def test_every_quality_key(settings):
    settings.CPS_REDIS_PREFIX = "cps"
    p2 = partition_tag(2)
    assert keys.signals(p2, "P001", "20261121") == f"{p2}:q:P001:20261121"
    assert keys.addresses(p2, "P001", "20261121") == f"{p2}:q:P001:20261121:addr"
    assert keys.addresses_sorted(p2, "P001", "20261121") == f"{p2}:q:P001:20261121:ips"
    assert keys.last_views(p2, "P001", "20261121") == f"{p2}:q:P001:20261121:last"
    assert keys.index() == "{cps}:q:index"
    member = keys.index_member("20261121", p2, "P-1.a")
    assert member == f"20261121\x1f{p2}\x1fP-1.a"
    assert keys.parse_index_member(member) == ("20261121", p2, "P-1.a")


def test_no_quality_key_is_formatted_outside_its_keys_module():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in (ROOT / "quality").rglob("*.py")
        if path.name != "keys.py" and "migrations" not in path.parts
        for line in _prefix_uses(path)
    ]
    assert offenders == []
