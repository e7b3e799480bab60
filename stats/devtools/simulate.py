"""Synthetic traffic over the partner tree with its exact ground truth (``manage.py simulate``, tests, bench)."""

import datetime as dt
import json
import logging
import random
import secrets
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from cpsproject.common.timeutil import day_bounds, local_day
from partners.selectors import Lineage, partner_lineages
from stats.keys import NO_PARTNER

logger = logging.getLogger(__name__)

HUMAN_UA = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148"
BOT_UA = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
BAD_EVENTS = [
    b"{not json",
    b"\xff\xfe\x00garbage",
    b'["a", "list"]',
    b'{"type": "pv", "ts": %d}',
    b'{"event_id": "bad-type", "type": "click", "ts": %d}',
    b'{"event_id": "bad-partner", "type": "pv", "ts": %d, "partner": "NOPE"}',
]


@dataclass
class GroundTruth:
    """Exact expected numbers per partner code (``NO_PARTNER``: traffic with no partner)."""

    pv: Counter[str] = field(default_factory=Counter)
    pv_self: Counter[str] = field(default_factory=Counter)
    bot_pv: Counter[str] = field(default_factory=Counter)
    users: defaultdict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    users_self: defaultdict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    bad: int = 0

    def add_view(self, lineage: Lineage | None, openid: str, *, bot: bool) -> None:
        own = lineage.code if lineage else NO_PARTNER
        if bot:
            self.bot_pv[own] += 1
            return
        self.pv_self[own] += 1
        self.users_self[own].add(openid)
        for code in lineage.codes if lineage else (NO_PARTNER,):
            self.pv[code] += 1
            self.users[code].add(openid)

    def table(self) -> list[str]:
        lines = [f"{'partner':<10} {'pv':>8} {'pv_self':>8} {'uv':>7} {'uv_self':>7} {'bot_pv':>6}"]
        for code in sorted(set(self.pv) | set(self.bot_pv)):
            lines.append(
                f"{code:<10} {self.pv[code]:>8} {self.pv_self[code]:>8} "
                f"{len(self.users[code]):>7} {len(self.users_self[code]):>7} {self.bot_pv[code]:>6}"
            )
        return lines


def simulate_events(
    *,
    events: int,
    day: dt.date,
    users: int = 1000,
    partners: int | None = None,
    bot_share: float = 0.02,
    bad_share: float = 0.01,
    unattributed_share: float = 0.1,
    seed: int | None = None,
    until: dt.datetime | None = None,
    rate: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[bytes], GroundTruth]:
    """Return ``events`` message values spread over ``day`` (up to ``until``) and their exact ground truth.

    Timestamps are drawn at random over the span; with ``rate`` they rise instead at ``rate`` events per
    second of event time, the last one at ``until`` (live traffic, whatever ``day`` says).

    Partners are drawn Zipf-like (the first partners get most traffic); users from a pool of ``users``. A
    ``seed`` makes the values (event ids included) the same on every run; without one, no two runs share an id.
    """
    # Without a seed every run draws other traffic under other event ids: the archive keeps one event per id,
    # so a second run reusing the ids would be counted live, then dropped by reconcile as duplicates.
    run = f"{seed}" if seed is not None else f"r{secrets.token_hex(6)}"
    rng = random.Random(seed if seed is not None else run)
    lineages = [lin for lin in partner_lineages().values() if lin.is_active]
    lineages.sort(key=lambda lin: lin.code)
    if partners:
        lineages = lineages[:partners]
    weights = [1 / (rank + 1) for rank in range(len(lineages))]
    start, end = day_bounds(day)
    if until is not None:
        end = min(end, until)
    span = max(1, int((end - start).total_seconds()) - 1)
    truth = GroundTruth()
    values: list[bytes] = []
    for n in range(events):
        if progress and n and n % 100_000 == 0:
            progress(n)
        if rate:
            ts = end - dt.timedelta(seconds=(events - n) / rate)
        else:
            ts = start + dt.timedelta(seconds=rng.randrange(span), milliseconds=rng.randrange(1000))
        if rng.random() < bad_share:
            bad = rng.choice(BAD_EVENTS)
            values.append(bad % int(ts.timestamp() * 1000) if b"%d" in bad else bad)
            truth.bad += 1
            continue
        lineage = None
        if lineages and rng.random() >= unattributed_share:
            lineage = rng.choices(lineages, weights)[0]
        openid = f"o-{rng.randrange(users)}"
        bot = rng.random() < bot_share
        truth.add_view(lineage, openid, bot=bot)
        event = {
            "event_id": f"sim-{run}-{day:%Y%m%d}-{n}",
            "type": "pv",
            "ts": int(ts.timestamp() * 1000) if n % 2 else ts.isoformat(timespec="milliseconds"),
            "openid": openid,
            "url": f"/landing?id={n % 50}",
            "ua": BOT_UA if bot else HUMAN_UA,
            "ip": f"203.0.113.{n % 250}",
        }
        if lineage:
            event["partner"] = lineage.code
        values.append(json.dumps(event, separators=(",", ":")).encode())
    assert rate or local_day(start) == day
    return values, truth
