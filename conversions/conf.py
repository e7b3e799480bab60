"""The options of ``conversions`` with their defaults; ``settings.CPS_CONVERSIONS`` overrides any of them."""

from cpsproject.common.conf import AppSettings, Check, positive_int


def _basis_points(count: int, *, total: int | None = None) -> Check:
    def test(value: object) -> bool:
        return (
            isinstance(value, list | tuple)
            and len(value) == count
            and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 10_000 for v in value)
            and (total is None or sum(value) == total)
        )

    expected = f"{count} basis points (0-10000)" + (f" adding up to {total}" if total else "")
    return Check(test, expected)


DEFAULTS = {
    # Money is reported, and commissions are paid, in this ISO 4217 currency.
    "REPORTING_CURRENCY": "CNY",
    # An order without an explicit partner goes to the buyer's last partner page view this many days before it.
    "ATTRIBUTION_WINDOW_DAYS": 30,
    # The commission rate of a partner without its own ``commission_bp``, by level (1, 2, 3), in basis points.
    "COMMISSION_BP": [500, 300, 200],
    # How an order's commission is split over the attributed partner, its parent and its grandparent.
    "COMMISSION_SHARES": [8000, 1500, 500],
    # A refund whose order never arrives is held this long, then becomes a dead letter.
    "HELD_REFUND_DAYS": 7,
    # A month may be closed this many days after it ends: late events of the month still book into it.
    "STATEMENT_LATENESS_DAYS": 7,
}

conversion_setting = AppSettings(
    "CPS_CONVERSIONS",
    DEFAULTS,
    checks={
        "REPORTING_CURRENCY": Check(
            lambda v: isinstance(v, str) and len(v) == 3 and v.isupper(), "a currency code"
        ),
        "ATTRIBUTION_WINDOW_DAYS": positive_int(),
        "COMMISSION_BP": _basis_points(3),
        "COMMISSION_SHARES": _basis_points(3, total=10_000),
        "HELD_REFUND_DAYS": positive_int(),
        "STATEMENT_LATENESS_DAYS": positive_int(),
    },
)
