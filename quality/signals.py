"""The pure arithmetic of the signals: which user agents are automated, what an address and its network are,
whether an address is in a listed range. No Redis, no database: the consumer and the recount share it.
"""

import bisect
import ipaddress
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from crawleruseragents import CRAWLER_USER_AGENTS_DATA

from quality.conf import quality_setting

# IPv4 addresses live in the IPv4-mapped block of the IPv6 space (::ffff:0:0/96), so one sorted list of
# integer ranges holds both families.
_V4_MAPPED = 0xFFFF << 32
# Longest text an address can take (an IPv6 address with an embedded IPv4 one); longer is not an address.
_MAX_ADDRESS_CHARS = 45


@lru_cache(maxsize=1)
def _crawler_regex() -> re.Pattern[str]:
    # Case-sensitive, as the list's patterns are written (``Googlebot\/``, ``[wW]get``).
    return re.compile("|".join(f"(?:{entry['pattern']})" for entry in CRAWLER_USER_AGENTS_DATA))


@lru_cache(maxsize=8192)
def _listed_crawler(user_agent: str) -> bool:
    return _crawler_regex().search(user_agent) is not None


def is_automated(user_agent: str, *, product_bot: bool) -> bool:
    """Return whether a view is automated: the product's own bot list said so (``product_bot``), or the kept
    crawler list (crawler-user-agents) recognises the first ``UA_MATCH_CHARS`` characters of its user agent."""
    if product_bot:
        return True
    if not user_agent:
        return False
    return _listed_crawler(user_agent[: quality_setting("UA_MATCH_CHARS")])


@lru_cache(maxsize=65536)
def client_address(text: str) -> tuple[str, str, int] | None:
    """Return (canonical address, its network, its integer in the IPv6 space) of ``text``, or None when it is
    not an IP address. IPv4 networks are /24, IPv6 ones /48; an IPv4-mapped IPv6 address is its IPv4 address.
    """
    if not text or len(text) > _MAX_ADDRESS_CHARS or "%" in text:  # a scope id names a link, not a client
        return None
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if isinstance(address, ipaddress.IPv4Address):
        network = ipaddress.IPv4Network((int(address) & 0xFFFFFF00, 24))
        return str(address), str(network), _V4_MAPPED | int(address)
    network6 = ipaddress.IPv6Network((int(address) >> 80 << 80, 48))
    return str(address), str(network6), int(address)


def network_of(address: str) -> str:
    """Return the /24 or /48 network of a canonical address (``client_address``'s first part)."""
    parsed = client_address(address)
    return parsed[1] if parsed else ""


def cidr_range(cidr: str) -> tuple[int, int]:
    """Return the first and last integer (IPv6 space) of ``cidr``; raise ValueError when it is not one."""
    network = ipaddress.ip_network(cidr.strip(), strict=False)
    first, last = int(network.network_address), int(network.broadcast_address)
    if network.version == 4:
        return _V4_MAPPED | first, _V4_MAPPED | last
    return first, last


class Ranges:
    """Integer ranges merged into disjoint sorted ones, looked up by bisection (O(log n) per address)."""

    def __init__(self, ranges: Iterable[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for first, last in sorted(ranges):
            if merged and first <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], last)
            else:
                merged.append([first, last])
        self.starts: Sequence[int] = [first for first, _ in merged]
        self.ends: Sequence[int] = [last for _, last in merged]

    def __contains__(self, number: int) -> bool:
        at = bisect.bisect_right(self.starts, number) - 1
        return at >= 0 and number <= self.ends[at]

    def __len__(self) -> int:
        return len(self.starts)
