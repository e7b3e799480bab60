"""The exact expected orders, money and commissions of simulated order events, computed on their own.

The simulator knows which page view (or explicit partner) each order should go to and every amount it sent, so
it works out what the product must report without asking the product: the rules are written out again here
(rates, half-up rounding once per event, commission rates by level, the chain split by largest remainder) so
that a mistake in the product's arithmetic cannot hide in the truth it is compared with.
"""

import csv
import datetime as dt
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import iso4217
from django.conf import settings

from cpsproject.common.timeutil import local_day
from partners.selectors import Lineage
from stats.keys import NO_PARTNER

SAMPLE_RATES = Path(settings.BASE_DIR) / "sample" / "rates.csv"
FIGURES = (
    "orders",
    "orders_self",
    "buyers",
    "buyers_self",
    "gross",
    "gross_self",
    "refunded",
    "refunded_self",
    "net",
    "net_self",
    "commission",
)

Rates = dict[str, list[tuple[dt.date, Decimal]]]


@dataclass(frozen=True)
class CommissionTerms:
    """The options the product applies to money, as the simulator reads them for itself."""

    reporting_currency: str = "CNY"
    level_bp: tuple[int, ...] = (500, 300, 200)
    shares: tuple[int, ...] = (8000, 1500, 500)
    window: dt.timedelta = dt.timedelta(days=30)

    @classmethod
    def from_settings(cls) -> "CommissionTerms":
        """Return the terms of ``settings.CPS_CONVERSIONS``, the documented defaults where it says nothing."""
        given = getattr(settings, "CPS_CONVERSIONS", {})
        default = cls()
        return cls(
            reporting_currency=given.get("REPORTING_CURRENCY", default.reporting_currency),
            level_bp=tuple(given.get("COMMISSION_BP", default.level_bp)),
            shares=tuple(given.get("COMMISSION_SHARES", default.shares)),
            window=dt.timedelta(days=given.get("ATTRIBUTION_WINDOW_DAYS", default.window.days)),
        )


def read_rates(path: Path = SAMPLE_RATES) -> Rates:
    """Return the rates of a ``currency,valid_from,rate`` CSV (a header line is skipped), oldest first."""
    rates: Rates = defaultdict(list)
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.reader(handle):
            if not row or row[0] == "currency":
                continue
            currency, valid_from, rate = (cell.strip() for cell in row)
            rates[currency].append((dt.date.fromisoformat(valid_from), Decimal(rate)))
    return {currency: sorted(rows) for currency, rows in rates.items()}


def rate_on(rates: Rates, *, currency: str, day: dt.date, reporting: str) -> Decimal:
    """Return the rate of ``currency`` in force on ``day``: the latest ``valid_from`` on or before it."""
    if currency == reporting:
        return Decimal(1)
    valid = [rate for valid_from, rate in rates.get(currency, []) if valid_from <= day]
    if not valid:
        raise ValueError(f"no {currency} rate valid on {day}")
    return valid[-1]


def exponent(currency: str) -> int:
    """Return the ISO 4217 number of minor-unit digits of ``currency`` (ValueError: not a currency for money)."""
    digits = iso4217.Currency(currency).exponent
    if digits is None:
        raise ValueError(f"{currency} has no minor unit: not a currency for money")
    return digits


def to_reporting(amount: int, *, currency: str, rate: Decimal, reporting: str) -> int:
    """Return ``amount`` minor units of ``currency`` in minor units of ``reporting``, rounded half up."""
    if currency == reporting:
        return amount
    shift = exponent(reporting) - exponent(currency)
    exact = Decimal(amount) * rate * Decimal(10) ** shift
    return int(exact.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def commission_of(net: int, bp: int) -> int:
    """Return ``net × bp / 10,000`` rounded half up to the minor unit."""
    return int((Decimal(net) * bp / 10_000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def split_commission(commission: int, *, chain: list[str], shares: tuple[int, ...]) -> dict[str, int]:
    """Split ``commission`` over ``chain`` (the attributed partner first) by largest remainder.

    A chain shorter than ``shares`` gives the missing shares to its first partner; a leftover unit goes to the
    largest remainders, a tie to the partner closer to the order (earlier in ``chain``).
    """
    bp = list(shares[: len(chain)])
    bp[0] += sum(shares[len(chain) :])
    floors = [commission * part // 10_000 for part in bp]
    remainders = [commission * part % 10_000 for part in bp]
    left = commission - sum(floors)
    for index in sorted(range(len(chain)), key=lambda i: (-remainders[i], i))[:left]:
        floors[index] += 1
    split: Counter[str] = Counter()
    for code, amount in zip(chain, floors, strict=True):
        split[code] += amount
    return dict(split)


@dataclass
class SimulatedOrder:
    """One order as the simulator sent it: what counts is its first ``paid`` event and its refunds."""

    order_id: str
    openid: str
    paid_at: dt.datetime
    amount: int
    currency: str
    explicit: Lineage | None
    refunds: list[int] = field(default_factory=list)  # in the order's currency, the cancellation's included


@dataclass
class OrderTruth:
    """Expected order figures per partner code, own (``*_self``) and subtree (``NO_PARTNER``: the site's own)."""

    terms: CommissionTerms = field(default_factory=CommissionTerms)
    rates: Rates = field(default_factory=dict)
    partner_bp: dict[str, int | None] = field(default_factory=dict)
    orders: list[SimulatedOrder] = field(default_factory=list)
    views: defaultdict[str, list[tuple[dt.datetime, Lineage]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def add_partner_view(self, openid: str, ts: dt.datetime, lineage: Lineage) -> None:
        self.views[openid].append((ts, lineage))

    def attributed(self, order: SimulatedOrder) -> Lineage | None:
        """Return the order's partner: explicit, else the buyer's last partner view in the window before it."""
        if order.explicit is not None:
            return order.explicit
        earliest = order.paid_at - self.terms.window
        before = [(ts, lin) for ts, lin in self.views[order.openid] if earliest <= ts < order.paid_at]
        return max(before, key=lambda view: view[0])[1] if before else None

    def reporting_amounts(self, order: SimulatedOrder, amounts: list[int]) -> list[int]:
        """Return ``amounts`` of the order's currency in the reporting currency at its rate, each rounded."""
        reporting = self.terms.reporting_currency
        rate = rate_on(self.rates, currency=order.currency, day=local_day(order.paid_at), reporting=reporting)
        return [
            to_reporting(part, currency=order.currency, rate=rate, reporting=reporting) for part in amounts
        ]

    def order_money(self, order: SimulatedOrder) -> tuple[int, int]:
        """Return the order's paid and refunded amounts in the reporting currency, each event rounded."""
        paid, *refunds = self.reporting_amounts(order, [order.amount, *order.refunds])
        return paid, sum(refunds)

    def commission_bp(self, lineage: Lineage) -> int:
        own = self.partner_bp.get(lineage.code)
        level_bp = self.terms.level_bp
        return own if own is not None else level_bp[min(len(lineage.codes), len(level_bp)) - 1]

    def figures(self) -> dict[str, dict[str, int]]:
        """Return ``{code: {figure: value}}`` for every partner with an order in its subtree or a commission."""
        numbers: defaultdict[str, Counter[str]] = defaultdict(Counter)
        buyers: defaultdict[str, set[str]] = defaultdict(set)
        buyers_self: defaultdict[str, set[str]] = defaultdict(set)
        for order in self.orders:
            lineage = self.attributed(order)
            paid, refunded = self.order_money(order)
            own = lineage.code if lineage else NO_PARTNER
            for code in lineage.codes if lineage else (NO_PARTNER,):
                numbers[code].update(orders=1, gross=paid, refunded=refunded, net=paid - refunded)
                buyers[code].add(order.openid)
            numbers[own].update(
                orders_self=1, gross_self=paid, refunded_self=refunded, net_self=paid - refunded
            )
            buyers_self[own].add(order.openid)
            if lineage is not None:
                commission = commission_of(paid - refunded, self.commission_bp(lineage))
                chain = list(reversed(lineage.codes))[: len(self.terms.shares)]
                for code, share in split_commission(
                    commission, chain=chain, shares=self.terms.shares
                ).items():
                    numbers[code]["commission"] += share
        return {
            code: {name: numbers[code][name] for name in FIGURES}
            | {"buyers": len(buyers[code]), "buyers_self": len(buyers_self[code])}
            for code in sorted(numbers)
        }

    def table(self) -> list[str]:
        """Return the figures as the lines ``simulate`` prints, in the reporting currency's minor units."""
        widths = {name: max(len(name), 9) for name in FIGURES}
        lines = [f"{'partner':<10} " + " ".join(f"{name:>{widths[name]}}" for name in FIGURES)]
        for code, row in self.figures().items():
            lines.append(f"{code:<10} " + " ".join(f"{row[name]:>{widths[name]}}" for name in FIGURES))
        return lines
