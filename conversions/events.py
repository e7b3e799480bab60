"""The ``order`` event: its type rules, and how the ingest pipeline reads one (registered in ``apps.py``).

``status`` is ``paid`` (``amount`` is what was paid), ``refunded`` (``amount`` is the part refunded now) or
``cancelled`` (a refund of whatever is not refunded yet; its ``amount`` is ignored). ``amount`` is an integer in
the minor units of ``currency`` (an ISO 4217 code with a minor unit). ``partner``, optional, is an explicit link
or coupon that wins over the buyer's last partner page view. Whether a refund fits what is left, and whether a
rate is in force, is decided when the event is recorded (``conversions.recording``).
"""

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from conversions.models import EVENT_ID_LENGTH
from conversions.money import NotMoney, minor_exponent
from partners.selectors import Lineage
from stats.plugins import Envelope, Reason, Rejected, identifier

PAID = "paid"
REFUNDED = "refunded"
CANCELLED = "cancelled"
STATUSES = (PAID, REFUNDED, CANCELLED)


@dataclass(frozen=True, slots=True)
class ParsedOrderEvent:
    event_id: str
    ts: dt.datetime
    seconds: int  # ts in whole epoch seconds
    order_id: str
    openid: str  # "" on a refund or cancellation that does not name the buyer
    status: str
    amount: int  # minor units of ``currency``; 0 for a cancellation
    currency: str  # "" on a cancellation that does not name it
    partner: Lineage | None  # the explicit partner, or None: attributed from the buyer's page views
    payload: str = field(repr=False)

    type = "order"


def _amount(payload: dict[str, Any]) -> int:
    value = payload.get("amount")
    if value is None:
        raise Rejected(Reason.MISSING_FIELD, "amount is missing")
    if type(value) is not int:
        raise Rejected(
            Reason.BAD_FIELD, f"amount must be an integer of minor units, not {type(value).__name__}"
        )
    if value < 0:
        raise Rejected(Reason.BAD_FIELD, f"amount must not be negative, not {value}")
    return value


def _currency(payload: dict[str, Any]) -> str:
    code = identifier(payload, "currency", required=True, limit=3, numbers=False)
    try:
        minor_exponent(code)
    except NotMoney as exc:
        raise Rejected(Reason.BAD_FIELD, f"currency: {exc}") from exc
    return code


def _explicit_partner(payload: dict[str, Any], envelope: Envelope) -> Lineage | None:
    code = identifier(payload, "partner", required=False, limit=64)
    if not code:
        return None
    lineage = envelope.lineages.get(code)
    if lineage is None:
        raise Rejected(Reason.UNKNOWN_PARTNER, f"partner {code!r} does not exist", subject=code)
    if not lineage.is_active:
        raise Rejected(Reason.INACTIVE_PARTNER, f"partner {code!r} is inactive")
    return lineage


def parse_order(payload: dict[str, Any], envelope: Envelope) -> ParsedOrderEvent:
    """Read an ``order`` event, or raise ``Rejected`` with the dead-letter reason."""
    order_id = identifier(payload, "order_id", required=True, limit=EVENT_ID_LENGTH)
    status = identifier(payload, "status", required=True, limit=16, numbers=False)
    if status not in STATUSES:
        raise Rejected(Reason.BAD_FIELD, f"status {status!r} is not one of {', '.join(STATUSES)}")
    cancelled = status == CANCELLED
    amount = 0 if cancelled else _amount(payload)
    currency = "" if cancelled and payload.get("currency") in (None, "") else _currency(payload)
    openid = identifier(payload, "openid", required=status == PAID, limit=EVENT_ID_LENGTH)
    partner = _explicit_partner(payload, envelope) if status == PAID else None
    return ParsedOrderEvent(
        event_id=envelope.event_id,
        ts=envelope.ts,
        seconds=envelope.seconds,
        order_id=order_id,
        openid=openid,
        status=status,
        amount=amount,
        currency=currency,
        partner=partner,
        payload=envelope.text,
    )
