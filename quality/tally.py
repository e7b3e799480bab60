"""A partner-day's signals added up from its views: what the consumer counts per batch and the recount per day.

Both walk the same ``add`` so that a live figure and its exact recount differ only where the live one is an
estimate (repeats across Kafka partitions, out of order, or across a consumer's restart; see ``counting``).
"""

from collections import Counter
from dataclasses import dataclass, field

from quality.signals import Ranges, client_address, is_automated


@dataclass(slots=True)
class DayTally:
    """The signals of one partner-day, or of one partition's share of a batch for that partner-day."""

    pv: int = 0
    automated: int = 0
    listed: int = 0
    repeats: int = 0  # live: set by the consumer from its memory of the partition (``counting.RecentViews``)
    addresses: Counter[str] = field(default_factory=Counter)
    quarters: Counter[int] = field(default_factory=Counter)  # quarter hour of the business day -> views
    # (epoch seconds, openid) of the views with a buyer, for the repeats
    views: list[tuple[int, str]] = field(default_factory=list)

    def add(
        self, *, seconds: int, quarter: int, openid: str, ua: str, ip: str, bot: bool, listed: Ranges
    ) -> None:
        """Count one view: its quarter hour, automated or not, its address and whether a listed network holds it."""
        self.pv += 1
        self.quarters[quarter] += 1
        if is_automated(ua, product_bot=bot):
            self.automated += 1
        parsed = client_address(ip) if ip else None
        if parsed is not None:
            self.addresses[parsed[0]] += 1
            if listed and parsed[2] in listed:
                self.listed += 1
        if openid:
            self.views.append((seconds, openid))


def quarter_of(seconds: int, offset: int) -> int:
    """Return the quarter hour (0-95) of the business day holding epoch ``seconds`` (``offset``: the business
    time zone's seconds ahead of UTC then)."""
    return (seconds + offset) % 86400 // 900


def count_repeats(views: list[tuple[int, str]], window: int) -> int:
    """Return the views (epoch seconds, openid) that come at most ``window`` seconds after the previous view of
    the same openid: the exact figure, over a whole day's views of one partner."""
    last: dict[str, int] = {}
    repeats = 0
    for seconds, openid in sorted(views):
        previous = last.get(openid)
        if previous is not None and seconds - previous <= window:
            repeats += 1
        last[openid] = seconds
    return repeats
