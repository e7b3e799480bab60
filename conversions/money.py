"""The arithmetic of money: minor units, exchange rates, commissions and their split over a partner chain.

Every amount is an integer in a currency's minor units (ISO 4217 exponent, from ``iso4217``). The only
decimal is an exchange rate; a conversion rounds half up to the reporting currency's minor unit, once per event,
and a commission rounds half up once per order net. No float touches money.
"""

import bisect
import datetime as dt
import decimal
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from functools import cache

import iso4217
from django.db.models import Max

from conversions.conf import conversion_setting
from conversions.models import ExchangeRate

BASIS_POINTS = 10_000
# Wide enough for a 64-bit amount times a rate of 24 digits, exactly: a conversion never rounds but once.
_EXACT = decimal.Context(prec=80, rounding=ROUND_HALF_UP)


class NotMoney(ValueError):
    """A currency code that ISO 4217 does not know, or one with no minor unit (``XXX``, ``XAU``)."""


@cache
def minor_exponent(currency: str) -> int:
    """Return the number of decimals of ``currency``'s minor unit (CNY 2, JPY 0, BHD 3); raise ``NotMoney``."""
    try:
        exponent = iso4217.Currency(currency).exponent
    except ValueError as exc:
        raise NotMoney(f"{currency!r} is not an ISO 4217 currency") from exc
    if exponent is None:
        raise NotMoney(f"{currency!r} has no minor unit: it is not money")
    return exponent


def reporting_currency() -> str:
    return conversion_setting("REPORTING_CURRENCY")


@dataclass(frozen=True, slots=True)
class Rate:
    """Units of the reporting currency per unit of ``currency``, in force from ``valid_from``."""

    currency: str
    value: Decimal
    valid_from: dt.date


def rate_on(currency: str, day: dt.date) -> Rate | None:
    """Return the rate of ``currency`` with the latest ``valid_from`` on or before business day ``day``.

    The reporting currency is its own rate 1 (valid from ``day``); None when no imported rate is in force yet.
    """
    if currency == reporting_currency():
        return Rate(currency, Decimal(1), day)
    row = (
        ExchangeRate.objects.filter(currency=currency, valid_from__lte=day)
        .order_by("-valid_from")
        .values_list("rate", "valid_from")
        .first()
    )
    return None if row is None else Rate(currency, row[0], row[1])


def rates_on(wanted: Iterable[tuple[str, dt.date]]) -> dict[tuple[str, dt.date], Rate | None]:
    """``rate_on`` of each (currency, day) of ``wanted``, in two queries whatever their number: the latest
    rate of each currency before the earliest day, then every rate from there to the latest day."""
    wanted = set(wanted)
    foreign = {currency for currency, _ in wanted if currency != reporting_currency()}
    history: dict[str, list[tuple[dt.date, Decimal]]] = defaultdict(list)
    if foreign:
        first, last = min(day for _, day in wanted), max(day for _, day in wanted)
        before = ExchangeRate.objects.filter(currency__in=foreign, valid_from__lte=first).values("currency")
        floors = before.annotate(latest=Max("valid_from")).values_list("latest", flat=True)
        since = min(floors, default=first)
        rows = ExchangeRate.objects.filter(currency__in=foreign, valid_from__gte=since, valid_from__lte=last)
        for currency, valid_from, value in rows.order_by("valid_from").values_list(
            "currency", "valid_from", "rate"
        ):
            history[currency].append((valid_from, value))
    found: dict[tuple[str, dt.date], Rate | None] = {}
    for currency, day in wanted:
        if currency == reporting_currency():
            found[currency, day] = Rate(currency, Decimal(1), day)
            continue
        days = history[currency]
        at = bisect.bisect_right(days, day, key=lambda row: row[0])
        found[currency, day] = Rate(currency, days[at - 1][1], days[at - 1][0]) if at else None
    return found


def round_half_up(value: Decimal) -> int:
    return int(value.quantize(Decimal(1), rounding=ROUND_HALF_UP, context=_EXACT))


def to_reporting(amount: int, *, currency: str, rate: Decimal) -> int:
    """Return ``amount`` minor units of ``currency`` in minor units of the reporting currency, half up."""
    shift = minor_exponent(reporting_currency()) - minor_exponent(currency)
    exact = _EXACT.multiply(_EXACT.multiply(Decimal(amount), rate), Decimal(10) ** shift)
    return round_half_up(exact)


def commission(net: int, commission_bp: int) -> int:
    """Return the commission of a net amount (minor units) at ``commission_bp`` basis points, half up."""
    return round_half_up(_EXACT.divide(Decimal(net * commission_bp), Decimal(BASIS_POINTS)))


def chain_shares(chain_length: int, shares: Sequence[int]) -> list[int]:
    """Return the shares (bp) of a chain of ``chain_length`` partners, the attributed one first.

    ``shares`` are those of [attributed, parent, grandparent]; a shorter chain gives the missing ones to the
    attributed partner, so the shares always add up to the whole.
    """
    if not 1 <= chain_length <= len(shares):
        raise ValueError(f"a chain of {chain_length} partners, not 1 to {len(shares)}")
    kept = list(shares[:chain_length])
    kept[0] += sum(shares[chain_length:])
    return kept


def split(total: int, shares: Sequence[int]) -> list[int]:
    """Split ``total`` (>= 0, minor units) by ``shares`` (bp adding up to 10,000), adding up to it exactly.

    Largest remainder: each gets the floor of its quota, and the units left over go one each to the largest
    remainders; on equal remainders, to the earlier share (the partner closer to the order).
    """
    if total < 0:
        raise ValueError(f"cannot split a negative amount {total}")
    if sum(shares) != BASIS_POINTS:
        raise ValueError(f"shares {list(shares)} do not add up to {BASIS_POINTS}")
    quotas = [divmod(total * share, BASIS_POINTS) for share in shares]
    parts = [whole for whole, _ in quotas]
    left = total - sum(parts)
    by_remainder = sorted(range(len(shares)), key=lambda i: (-quotas[i][1], i))
    for index in by_remainder[:left]:
        parts[index] += 1
    return parts
