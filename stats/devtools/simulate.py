"""Synthetic traffic over the partner tree with its exact ground truth (``manage.py simulate``, tests, bench)."""

import datetime as dt
import json
import logging
import random
import secrets
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cpsproject.common.timeutil import day_bounds, local_day
from partners.models import Partner
from partners.selectors import Lineage, partner_lineages
from stats.devtools.order_truth import SAMPLE_RATES, CommissionTerms, OrderTruth, SimulatedOrder, read_rates
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
    orders: OrderTruth = field(default_factory=OrderTruth)

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


# How simulated orders go wrong, in turn: each order gets the next way, so a few dozen orders hold every one.
LIFECYCLES = ("plain", "late", "duplicate", "second_paid", "refund_first", "partial", "cancelled")
ATTRIBUTIONS = ("view", "explicit", "none")
CURRENCIES = ("CNY", "USD", "JPY")
ORDER_AMOUNTS = {"CNY": (100, 100_000), "USD": (100, 20_000), "JPY": (100, 50_000)}  # minor units
# With ``rate`` (live traffic) an order's views, payment and refunds fall in the minutes before its moment.
LIVE_ORDER_SPAN = dt.timedelta(minutes=10)


class OrderMaker:
    """Write simulated orders as order events (and their buyers' page views) and note them in the truth.

    Attribution is made unambiguous: a buyer's views are sent before any order of theirs, and a buyer who
    comes back (explicit orders, every other one) gets no new view. Messages to arrive after everything else
    (a late payment, a duplicate, a second ``paid``) collect in ``tail``.
    """

    truth: GroundTruth
    span: tuple[dt.datetime, dt.datetime] | None

    def __init__(
        self, *, prefix: str, rng: random.Random, lineages: list[Lineage], weights: list[float]
    ) -> None:
        self.prefix, self.rng, self.lineages, self.weights = prefix, rng, lineages, weights
        self.made = rng.randrange(len(LIFECYCLES) * len(ATTRIBUTIONS) * len(CURRENCIES))
        self.tail: list[bytes] = []
        self.last_buyer: str | None = None

    def start(self, *, truth: GroundTruth, span: tuple[dt.datetime, dt.datetime] | None, rates: Path) -> None:
        """Note orders in ``truth``, converted by the ``rates`` CSV; place them in ``span`` (None: live)."""
        self.truth, self.span = truth, span
        truth.orders = OrderTruth(
            terms=CommissionTerms.from_settings(),
            rates=read_rates(rates),
            partner_bp=dict(Partner.objects.values_list("code", "commission_bp")),
        )

    def moments(self, ts: dt.datetime, count: int) -> list[dt.datetime]:
        """Return ``count`` distinct rising moments of the day's span, or of the minutes before ``ts``."""
        start, end = self.span or (ts - LIVE_ORDER_SPAN, ts)
        span_ms = max(int((end - start).total_seconds() * 1000), count)
        return [
            start + dt.timedelta(milliseconds=ms) for ms in sorted(self.rng.sample(range(span_ms), count))
        ]

    def view(self, n: int, name: str, openid: str, ts: dt.datetime, lineage: Lineage) -> bytes:
        self.truth.add_view(lineage, openid, bot=False)
        self.truth.orders.add_partner_view(openid, ts, lineage)
        event = {
            "event_id": f"{self.prefix}-{n}-{name}",
            "type": "pv",
            "ts": ts.isoformat(timespec="milliseconds"),
            "openid": openid,
            "url": f"/item?id={n % 50}",
            "ua": HUMAN_UA,
            "ip": f"203.0.113.{n % 250}",
            "partner": lineage.code,
        }
        return json.dumps(event, separators=(",", ":")).encode()

    def event(self, order: SimulatedOrder, name: str, status: str, amount: int, ts: dt.datetime) -> bytes:
        event = {
            "event_id": f"{self.prefix}-{order.order_id.rsplit('-', 1)[1]}-{name}",
            "type": "order",
            "ts": ts.isoformat(timespec="milliseconds"),
            "order_id": order.order_id,
            "openid": order.openid,
            "status": status,
            "amount": amount,
            "currency": order.currency,
        }
        if status == "paid" and order.explicit is not None:
            event["partner"] = order.explicit.code
        return json.dumps(event, separators=(",", ":")).encode()

    def make(self, n: int, ts: dt.datetime) -> list[bytes]:
        """Return the messages of one new order in the stream's place ``n`` (its late ones go to ``tail``)."""
        rng, turn = self.rng, self.made
        self.made += 1
        how = ATTRIBUTIONS[turn % len(ATTRIBUTIONS)] if self.lineages else "none"
        currency = CURRENCIES[turn // len(ATTRIBUTIONS) % len(CURRENCIES)]
        first_view, last_view, paid_at, *after = self.moments(ts, 6)
        comes_back = how == "explicit" and self.last_buyer is not None and turn % 2 == 0
        openid = self.last_buyer if comes_back else f"b-{self.prefix.removeprefix('sim-')}-{n}"
        assert openid is not None
        self.last_buyer = openid
        messages = []
        if how in ("view", "explicit") and not comes_back:
            early, late = (rng.choices(self.lineages, self.weights)[0] for _ in range(2))
            # The later view is sent first: the buyer's last view by ``ts`` wins, whatever the arrival order.
            messages.append(self.view(n, "v2", openid, last_view, late))
            if how == "view":
                messages.append(self.view(n, "v1", openid, first_view, early))
        explicit = rng.choices(self.lineages, self.weights)[0] if how == "explicit" else None
        low, high = ORDER_AMOUNTS[currency]
        order = SimulatedOrder(
            order_id=f"SO-{self.prefix.removeprefix('sim-')}-{n}",
            openid=openid,
            paid_at=paid_at,
            amount=rng.randrange(low, high),
            currency=currency,
            explicit=explicit,
        )
        self.truth.orders.orders.append(order)
        return messages + self.lifecycle(order, LIFECYCLES[turn % len(LIFECYCLES)], after)

    def lifecycle(self, order: SimulatedOrder, kind: str, after: list[dt.datetime]) -> list[bytes]:
        """Return the order's payment and refunds in the order ``kind`` sends them."""
        rng, amount = self.rng, order.amount
        paid = self.event(order, "paid", "paid", amount, order.paid_at)
        if kind == "late":
            self.tail.append(paid)
            return []
        if kind == "duplicate":
            self.tail.append(paid)
        elif kind == "second_paid":
            self.tail.append(self.event(order, "paid2", "paid", amount + 100, after[0]))
        elif kind == "refund_first":
            order.refunds = [rng.randrange(1, amount)]
            return [self.event(order, "r1", "refunded", order.refunds[0], after[0]), paid]
        elif kind == "partial":
            order.refunds = [rng.randrange(1, amount // 2)]
            if rng.random() < 0.5:
                order.refunds.append(rng.randrange(1, amount - order.refunds[0]))
            return [paid] + [
                self.event(order, f"r{i + 1}", "refunded", part, after[i])
                for i, part in enumerate(order.refunds)
            ]
        elif kind == "cancelled":
            order.refunds = [self.matching_refund(order)] if rng.random() < 0.5 else []
            refunds = [self.event(order, "r1", "refunded", part, after[0]) for part in order.refunds]
            order.refunds.append(amount - sum(order.refunds))
            return [paid, *refunds, self.event(order, "cancel", "cancelled", order.refunds[-1], after[2])]
        return [paid]

    def matching_refund(self, order: SimulatedOrder) -> int:
        """Return a part refund after which the rest converts to exactly what is left in the reporting currency.

        So a cancellation leaves a net of 0 whether its reporting amount is taken as the rest converted or as
        what was paid less what was refunded, both in the reporting currency.
        """
        for _ in range(1000):
            part = self.rng.randrange(1, order.amount)
            paid, part_rep, rest = self.truth.orders.reporting_amounts(
                order, [order.amount, part, order.amount - part]
            )
            if paid - part_rep == rest:
                return part
        raise ValueError(f"no part refund of {order.amount} {order.currency} converts without a rounding gap")


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
    orders_share: float = 0.0,
    rates: Path = SAMPLE_RATES,
) -> tuple[list[bytes], GroundTruth]:
    """Return ``events`` message values spread over ``day`` (up to ``until``) and their exact ground truth.

    Timestamps are drawn at random over the span; with ``rate`` they rise instead at ``rate`` events per
    second of event time, the last one at ``until`` (live traffic, whatever ``day`` says).

    Page views as ``_ViewMaker`` draws them. A ``seed`` makes the values (event ids included) the same on every
    run; without one, no two runs share an id.

    With ``orders_share``, that share of the events are orders instead (``OrderMaker``: each order is a few
    messages, its buyer's page views included), in the currencies of the ``rates`` CSV, their truth in
    ``truth.orders``. At 0 nothing else changes: the same seed gives the same values as without orders.
    """
    # Without a seed every run draws other traffic under other event ids: the archive keeps one event per id,
    # so a second run reusing the ids would be counted live, then dropped by reconcile as duplicates.
    run = f"{seed}" if seed is not None else f"r{secrets.token_hex(6)}"
    rng = random.Random(seed if seed is not None else run)
    lineages = _active_lineages(partners)
    views = _ViewMaker(f"sim-{run}-{day:%Y%m%d}", rng, lineages, users, bot_share, unattributed_share)
    start, end = day_bounds(day)
    end = min(end, until) if until is not None else end
    truth = GroundTruth()
    values: list[bytes] = []
    maker = None
    if orders_share:
        maker = OrderMaker(prefix=views.prefix, rng=rng, lineages=lineages, weights=views.weights)
        maker.start(truth=truth, span=None if rate else (start, end), rates=rates)
    for n, ts in enumerate(
        _moments(events=events, start=start, end=end, rate=rate, rng=rng, progress=progress)
    ):
        if rng.random() < bad_share:
            values.append(_bad_event(rng, ts))
            truth.bad += 1
        elif maker is not None and rng.random() < orders_share:
            values += maker.make(n, ts)
        else:
            values.append(views.make(n, ts, truth))
    if maker is not None:
        values += maker.tail
    assert rate or local_day(start) == day
    return values, truth


def _active_lineages(partners: int | None) -> list[Lineage]:
    """The active partners by code, the first ``partners`` of them if given."""
    lineages = sorted((lin for lin in partner_lineages().values() if lin.is_active), key=lambda lin: lin.code)
    return lineages[:partners] if partners else lineages


def _moments(
    *,
    events: int,
    start: dt.datetime,
    end: dt.datetime,
    rate: float | None,
    rng: random.Random,
    progress: Callable[[int], None] | None,
) -> Iterator[dt.datetime]:
    """Yield the events' timestamps: at random over ``start..end``, or rising at ``rate`` a second to ``end``.

    One at a time, as the events are made: each event's other draws follow its timestamp's, so that a seed
    gives the same run. ``progress`` hears every 100,000 events.
    """
    span = max(1, int((end - start).total_seconds()) - 1)
    for n in range(events):
        if progress and n and n % 100_000 == 0:
            progress(n)
        if rate:
            yield end - dt.timedelta(seconds=(events - n) / rate)
        else:
            yield start + dt.timedelta(seconds=rng.randrange(span), milliseconds=rng.randrange(1000))


def _bad_event(rng: random.Random, ts: dt.datetime) -> bytes:
    """One of the malformed messages, with ``ts`` in it where it has a place for one."""
    bad = rng.choice(BAD_EVENTS)
    return bad % int(ts.timestamp() * 1000) if b"%d" in bad else bad


@dataclass
class _ViewMaker:
    """Draws page views: partners Zipf-like (the first get most traffic), users from a pool of ``users``."""

    prefix: str  # of the event ids: the run and the day
    rng: random.Random
    lineages: list[Lineage]
    users: int
    bot_share: float
    unattributed_share: float
    weights: list[float] = field(init=False)

    def __post_init__(self) -> None:
        self.weights = [1 / (rank + 1) for rank in range(len(self.lineages))]

    def make(self, n: int, ts: dt.datetime, truth: GroundTruth) -> bytes:
        """Return the ``n``-th event of the run, a page view at ``ts``, added to ``truth``."""
        rng = self.rng
        lineage = None
        if self.lineages and rng.random() >= self.unattributed_share:
            lineage = rng.choices(self.lineages, self.weights)[0]
        openid = f"o-{rng.randrange(self.users)}"
        bot = rng.random() < self.bot_share
        truth.add_view(lineage, openid, bot=bot)
        event = {
            "event_id": f"{self.prefix}-{n}",
            "type": "pv",
            "ts": int(ts.timestamp() * 1000) if n % 2 else ts.isoformat(timespec="milliseconds"),
            "openid": openid,
            "url": f"/landing?id={n % 50}",
            "ua": BOT_UA if bot else HUMAN_UA,
            "ip": f"203.0.113.{n % 250}",
        }
        if lineage:
            event["partner"] = lineage.code
        return json.dumps(event, separators=(",", ":")).encode()
