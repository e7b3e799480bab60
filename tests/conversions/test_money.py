"""The arithmetic of money, with every expected value worked out by hand from the inputs."""

import datetime as dt
from decimal import Decimal

import pytest

from conversions.models import ExchangeRate
from conversions.money import (
    NotMoney,
    chain_shares,
    commission,
    minor_exponent,
    rate_on,
    split,
    to_reporting,
)


@pytest.mark.parametrize(("currency", "exponent"), [("CNY", 2), ("USD", 2), ("JPY", 0), ("BHD", 3)])
def test_minor_exponent_comes_from_iso4217(currency: str, exponent: int) -> None:
    assert minor_exponent(currency) == exponent


@pytest.mark.parametrize("currency", ["ZZZ", "XXX", "XAU", "cny"])
def test_codes_that_are_not_money_are_refused(currency: str) -> None:
    with pytest.raises(NotMoney):
        minor_exponent(currency)


@pytest.mark.parametrize(
    ("amount", "currency", "rate", "expected"),
    [
        (1000, "JPY", "0.048", 4800),  # 1000 yen x 0.048 = 48.00 CNY
        (12999, "CNY", "1", 12999),
        (1999, "USD", "7.1234", 14240),  # 19.99 x 7.1234 = 142.396766 CNY -> 142.40
        (1, "USD", "0.125", 0),  # 0.01 x 0.125 = 0.00125 CNY = 0.125 fen -> 0
        (4, "USD", "0.125", 1),  # 0.5 fen: half up -> 1
        (1, "BHD", "19.15", 2),  # 0.001 BHD x 19.15 = 0.01915 CNY = 1.915 fen -> 2
        (7, "JPY", "0.0485", 34),  # 7 x 0.0485 = 0.3395 CNY = 33.95 fen -> 34
    ],
)
def test_conversion_to_reporting_minor_units_rounds_half_up(
    amount: int, currency: str, rate: str, expected: int
) -> None:
    assert to_reporting(amount, currency=currency, rate=Decimal(rate)) == expected


def test_a_huge_amount_converts_exactly() -> None:
    # 9,000,000,000,000,000 yen x 0.048 = 432,000,000,000,000 CNY = 43,200,000,000,000,000 fen
    assert to_reporting(9 * 10**15, currency="JPY", rate=Decimal("0.048")) == 432 * 10**14


@pytest.mark.parametrize(
    ("net", "bp", "expected"),
    [
        (12999, 500, 650),  # 649.95 -> 650
        (12990, 500, 650),  # 649.5 -> 650 (half up)
        (12989, 500, 649),  # 649.45 -> 649
        (10, 300, 0),  # 0.3
        (0, 500, 0),
        (100, 10_000, 100),
    ],
)
def test_commission_rounds_half_up(net: int, bp: int, expected: int) -> None:
    assert commission(net, bp) == expected


@pytest.mark.parametrize(
    ("total", "shares", "expected"),
    [
        # 520, 97.5, 32.5: one unit left; remainders .5 and .5 tie -> the parent (closer to the order)
        (650, [8000, 1500, 500], [520, 98, 32]),
        # 80, 15, 5: nothing left over
        (100, [8000, 1500, 500], [80, 15, 5]),
        # 0.8, 0.15, 0.05: the largest remainder (.8) takes the unit
        (1, [8000, 1500, 500], [1, 0, 0]),
        # 3 x 1/3: 0.333 each, remainders tie -> the earliest
        (1, [3334, 3333, 3333], [1, 0, 0]),
        # 1.6, 0.3, 0.1: floors 1, 0, 0; one left -> .6
        (2, [8000, 1500, 500], [2, 0, 0]),
        # 5.6, 1.05, 0.35: floors 5, 1, 0 = 6; one left -> .6 (the attributed partner)
        (7, [8000, 1500, 500], [6, 1, 0]),
        # 3.2, 0.6, 0.2: floors 3, 0, 0 = 3; one left -> .6 (the parent)
        (4, [8000, 1500, 500], [3, 1, 0]),
        (649, [10_000], [649]),
        (0, [8000, 1500, 500], [0, 0, 0]),
    ],
)
def test_split_by_largest_remainder_adds_up(total: int, shares: list[int], expected: list[int]) -> None:
    assert split(total, shares) == expected


def test_a_shorter_chain_gives_missing_shares_to_the_attributed_partner() -> None:
    assert chain_shares(3, [8000, 1500, 500]) == [8000, 1500, 500]
    assert chain_shares(2, [8000, 1500, 500]) == [8500, 1500]
    assert chain_shares(1, [8000, 1500, 500]) == [10_000]


@pytest.mark.django_db
def test_rate_is_the_latest_valid_on_or_before_the_day(settings) -> None:
    ExchangeRate.objects.create(currency="JPY", valid_from=dt.date(2026, 11, 1), rate=Decimal("0.047"))
    ExchangeRate.objects.create(currency="JPY", valid_from=dt.date(2026, 11, 20), rate=Decimal("0.048"))
    ExchangeRate.objects.create(currency="USD", valid_from=dt.date(2026, 11, 25), rate=Decimal("7.1"))

    assert rate_on("JPY", dt.date(2026, 10, 31)) is None
    assert rate_on("JPY", dt.date(2026, 11, 19)).value == Decimal("0.047")
    on_20 = rate_on("JPY", dt.date(2026, 11, 20))
    assert (on_20.value, on_20.valid_from) == (Decimal("0.048"), dt.date(2026, 11, 20))
    assert rate_on("JPY", dt.date(2027, 1, 1)).value == Decimal("0.048")
    assert rate_on("USD", dt.date(2026, 11, 24)) is None
    cny = rate_on("CNY", dt.date(2026, 11, 24))
    assert (cny.value, cny.valid_from) == (Decimal(1), dt.date(2026, 11, 24))
