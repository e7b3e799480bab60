"""Builders for order events and a look at what the recorder wrote, for the conversions tests."""

import datetime as dt
import itertools
import json

from conversions.models import LedgerEntry, Order

_ids = itertools.count()


def order_event(
    ts: dt.datetime,
    order_id: str,
    status: str = "paid",
    amount: object = 12999,
    currency: str = "CNY",
    openid: str = "o-1",
    **extra: object,
) -> bytes:
    event = {
        "event_id": extra.pop("event_id", f"o-{next(_ids)}"),
        "type": "order",
        "ts": ts.isoformat(),
        "order_id": order_id,
        "openid": openid,
        "status": status,
        "amount": amount,
        "currency": currency,
    }
    event.update(extra)
    return json.dumps(event).encode()


def ledger_of(order_id: str) -> dict[str, int]:
    """Each partner's ledger total for an order, by partner code."""
    totals: dict[str, int] = {}
    for code, amount in LedgerEntry.objects.filter(order__order_id=order_id).values_list(
        "partner__code", "amount"
    ):
        totals[code] = totals.get(code, 0) + amount
    return totals


def ledger_rows(order_id: str) -> list[tuple[str, str, int]]:
    """(reason, partner code, amount) of an order's ledger entries, in the order they were appended."""
    return list(
        LedgerEntry.objects.filter(order__order_id=order_id)
        .order_by("id")
        .values_list("reason", "partner__code", "amount")
    )


def order(order_id: str) -> Order:
    return Order.objects.select_related("partner").get(order_id=order_id)
