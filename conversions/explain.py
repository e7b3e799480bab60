"""An order's money as staff read it: amounts in major units, and the arithmetic behind every ledger entry.

Everything is recomputed here from the order's stored inputs (its events' amounts, the rate, ``commission_bp``,
the chain's shares), independently of the code that wrote the ledger, so that the page shows the sum a partner
can redo by hand and flags any stored entry that differs from it.
"""

import hashlib
import hmac
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

import iso4217
from django.conf import settings
from django.utils.formats import number_format

from conversions.models import LedgerEntry, Order, OrderEvent


def exponent(currency: str) -> int:
    """The ISO 4217 minor-unit exponent of ``currency`` (CNY 2, JPY 0); a code with none counts as 0."""
    try:
        return iso4217.Currency(currency).exponent or 0
    except ValueError:
        return 0


def major(amount: int, currency: str) -> str:
    """``amount`` minor units as the reader's language writes the major units, grouped: ``-1,299.99``.

    Built from the integer (a quotient and a remainder), never through a float.
    """
    digits = exponent(currency)
    sign = "-" if amount < 0 else ""
    whole, part = divmod(abs(amount), 10**digits)
    text = number_format(whole, force_grouping=True)
    return f"{sign}{text}.{part:0{digits}d}" if digits else f"{sign}{text}"


def grouped(value: int) -> str:
    """An integer grouped as the reader's language writes it: ``12,999``, ``-120``."""
    return number_format(value, force_grouping=True)


def money(amount: int | None, currency: str) -> str:
    """``amount`` minor units with the currency's code: ``1,299.99 CNY``; None is ``—``."""
    return "—" if amount is None else f"{major(amount, currency)} {currency}"


def decimal_text(value: Decimal) -> str:
    """A decimal as written, grouped, without a float or an exponent: ``4.9995``, ``12,999``."""
    sign = "-" if value < 0 else ""
    text = format(abs(value).normalize(), "f")
    whole, _dot, part = text.partition(".")
    text = number_format(int(whole), force_grouping=True)
    return f"{sign}{text}.{part}" if part else f"{sign}{text}"


def round_half_up(value: Decimal) -> int:
    return int(value.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def buyer_reference(openid: str) -> str:
    """A stable, non-reversible reference to a buyer: the same buyer gives the same reference on every order.

    A keyed hash (HMAC-SHA-256 with the installation's secret) rather than a plain one, so that a guessed
    openid cannot be checked against it; the openid itself never reaches a page.
    """
    digest = hmac.new(settings.SECRET_KEY.encode(), openid.encode(), hashlib.sha256).hexdigest()
    return f"#{digest[:10]}"


@dataclass(frozen=True)
class Share:
    partner_id: int
    share_bp: int


def chain_shares(order: Order, entries: list[LedgerEntry]) -> list[Share]:
    """The order's chain, attributed partner first, with the shares it was split by.

    ``Order.chain`` lists ``[partner, parent, grandparent]`` with their shares in basis points (as objects or
    pairs); the ledger entries of the ``paid`` event say the same and serve when the chain cannot be read.
    """
    shares: list[Share] = []
    for link in order.chain or []:
        if isinstance(link, dict):
            partner = link.get("partner", link.get("partner_id", link.get("id")))
            bp = link.get("share_bp", link.get("share", link.get("bp")))
        elif isinstance(link, list | tuple) and len(link) == 2:
            partner, bp = link
        else:
            partner = bp = None
        if not isinstance(partner, int) or not isinstance(bp, int):
            shares = []
            break
        shares.append(Share(partner, bp))
    if shares:
        return shares
    paid = [e for e in entries if e.source_event_id == order.paid_event_id]
    return [Share(e.partner_id, e.share_bp) for e in paid]


def split(commission: int, shares: list[Share]) -> list[tuple[Decimal, int]]:
    """Each share's exact part of ``commission`` and its whole part by the largest-remainder method.

    Parts are floored; the minor units left over go one each to the largest remainders, a tie to the partner
    closer to the order (earlier in the chain), so the parts add up to ``commission``.
    """
    exact = [Decimal(commission) * share.share_bp / 10_000 for share in shares]
    whole = [int(part // 1) for part in exact]
    left = commission - sum(whole)
    order = sorted(range(len(shares)), key=lambda i: (-(exact[i] - whole[i]), i))
    for index in order[:left]:
        whole[index] += 1
    return list(zip(exact, whole, strict=True))


@dataclass
class Step:
    """One event of the order and what it did to the net and to each partner's entries."""

    event: OrderEvent
    conversion: str  # the event's amount converted to the reporting currency, as a sum
    net_before: int
    net: int
    commission_bp: int
    commission_exact: Decimal
    commission: int
    lines: list["EntryLine"] = field(default_factory=list)

    @property
    def net_sum(self) -> str:
        """``12,999`` for the payment, ``12,999 − 3,000 = 9,999`` for a refund (minor units)."""
        if self.event.status == OrderEvent.Status.PAID:
            return grouped(self.net)
        return f"{grouped(self.net_before)} − {grouped(self.event.amount_reporting)} = {grouped(self.net)}"

    @property
    def commission_sum(self) -> str:
        """``9,999 × 500 bp ÷ 10,000 = 499.95 → 500``."""
        return (
            f"{grouped(self.net)} × {grouped(self.commission_bp)} bp ÷ 10,000 = "
            f"{decimal_text(self.commission_exact)} → {grouped(self.commission)}"
        )


@dataclass(frozen=True)
class EntryLine:
    """A ledger entry beside the sum that gives it."""

    partner_id: int
    share_bp: int
    commission: int  # the order's commission after the event, which the shares split
    share_exact: Decimal
    share: int
    before: int  # what the partner's entries of this order held before this event
    expected: int  # share - before
    entry: LedgerEntry | None  # the stored entry of this event and partner (None: none stored)

    @property
    def share_sum(self) -> str:
        """``500 × 8,000 bp ÷ 10,000 = 400 → 400``: the exact part, then the whole part it was given."""
        return (
            f"{grouped(self.commission)} × {grouped(self.share_bp)} bp ÷ 10,000 = "
            f"{decimal_text(self.share_exact)} → {grouped(self.share)}"
        )

    @property
    def entry_sum(self) -> str:
        """``400 − 520 = −120``: the new share less what the partner's entries held."""
        return f"{grouped(self.share)} − {grouped(self.before)} = {grouped(self.expected)}"

    @property
    def matches(self) -> bool:
        stored = self.entry.amount if self.entry is not None else 0
        return stored == self.expected


def convert(event: OrderEvent, order: Order, reporting: str) -> str:
    """The sum converting ``event``'s amount: ``19.99 USD × 7.1234 = 142.396766 → 142.40 CNY``."""
    if order.currency == reporting:
        return money(event.amount_reporting, reporting)
    exact = Decimal(event.amount) / 10 ** exponent(order.currency) * Decimal(order.rate)
    return (
        f"{money(event.amount, order.currency)} × {decimal_text(Decimal(order.rate))} = "
        f"{decimal_text(exact)} → {money(event.amount_reporting, reporting)}"
    )


def explain(order: Order, events: list[OrderEvent], entries: list[LedgerEntry], reporting: str) -> list[Step]:
    """Walk the order's events in time order: after each, the net, the commission and each partner's entry."""
    shares = chain_shares(order, entries)
    held = {share.partner_id: 0 for share in shares}
    by_event = {(entry.source_event_id, entry.partner_id): entry for entry in entries}
    steps, net = [], 0
    for event in events:
        before = net
        net = (
            event.amount_reporting if event.status == OrderEvent.Status.PAID else net - event.amount_reporting
        )
        exact = Decimal(net) * order.commission_bp / 10_000
        commission = round_half_up(exact)
        step = Step(
            event, convert(event, order, reporting), before, net, order.commission_bp, exact, commission
        )
        for share, (part_exact, part) in zip(shares, split(commission, shares), strict=True):
            line = EntryLine(
                partner_id=share.partner_id,
                share_bp=share.share_bp,
                commission=commission,
                share_exact=part_exact,
                share=part,
                before=held[share.partner_id],
                expected=part - held[share.partner_id],
                entry=by_event.get((event.event_id, share.partner_id)),
            )
            held[share.partner_id] = part
            step.lines.append(line)
        steps.append(step)
    return steps
