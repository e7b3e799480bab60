"""insert_rows (cpsproject.common.upsert), as the order recorder uses it: plain rows in, the same rows out."""

import datetime as dt
from decimal import Decimal

import pytest
from django.db import IntegrityError, connection, transaction

from conversions.models import Order
from cpsproject.common.upsert import insert_rows
from tests.factories import at, create_partner

pytestmark = pytest.mark.django_db

FIELDS = (
    "order_id",
    "openid",
    "partner_id",
    "path",
    "attribution",
    "view_event_id",
    "view_ts",
    "view_url",
    "commission_bp",
    "chain",
    "currency",
    "amount",
    "rate",
    "rate_valid_from",
    "amount_reporting",
    "paid_event_id",
    "paid_at",
    "paid_date",
)
NOW = dt.datetime(2026, 11, 21, 4, 5, 6, 789012, tzinfo=dt.UTC)


def order_row(order_id: str, *, partner_id=None, amount: int = 12999, **fields) -> tuple:
    values = {
        "order_id": order_id,
        "openid": "o-1",
        "partner_id": partner_id,
        "path": "",
        "attribution": "none",
        "view_event_id": "",
        "view_ts": None,
        "view_url": "",
        "commission_bp": 0,
        "chain": [],
        "currency": "CNY",
        "amount": amount,
        "rate": Decimal("1.000000000000"),
        "rate_valid_from": dt.date(2026, 11, 1),
        "amount_reporting": amount,
        "paid_event_id": f"paid-{order_id}",
        "paid_at": at("2026-11-21 12:00"),
        "paid_date": dt.date(2026, 11, 21),
        **fields,
    }
    return tuple(values[name] for name in FIELDS)


def stored_orders() -> dict[str, tuple]:
    return {row[0]: row for row in Order.objects.values_list(*FIELDS)}


def test_rows_come_back_as_written_with_their_ids_and_the_insert_time():
    partner = create_partner("A")
    attributed = order_row(
        "SO-1",
        partner_id=partner.pk,
        openid='it\'s "100%s" back\\slash 中文\n\x00',
        path=f"{partner.pk}/",
        attribution="view",
        view_event_id="pv-1",
        view_ts=at("2026-11-21 11:59:58.123456"),
        view_url="https://shop.example/p?a=1&b='2'",
        commission_bp=500,
        chain=[{"partner": partner.pk, "share_bp": 10000}],
        currency="USD",
        amount=1800,
        rate=Decimal("7.123456789012"),
        amount_reporting=12822,
        paid_at=at("2026-11-21 23:59:59.999999"),
    )
    unattributed = order_row("SO-2", amount=-5)

    ids = insert_rows(Order, FIELDS, [attributed, unattributed], now=NOW, key="order_id")

    assert stored_orders() == {"SO-1": attributed, "SO-2": unattributed}
    assert ids == {
        "SO-1": Order.objects.get(order_id="SO-1").pk,
        "SO-2": Order.objects.get(order_id="SO-2").pk,
    }
    assert set(Order.objects.values_list("recorded_at", flat=True)) == {NOW}


def test_a_backend_without_returning_reads_the_ids_back(monkeypatch):
    """MySQL has no INSERT … RETURNING: the keys inserted are read back."""
    monkeypatch.setattr(type(connection.features), "can_return_rows_from_bulk_insert", False)
    insert_rows(Order, FIELDS, [order_row("SO-0")], now=NOW)  # not in this insert: not returned

    ids = insert_rows(
        Order, FIELDS, [order_row("SO-1", amount=1), order_row("SO-2", amount=2)], now=NOW, key="order_id"
    )

    assert {order_id: Order.objects.get(pk=pk).amount for order_id, pk in ids.items()} == {
        "SO-1": 1,
        "SO-2": 2,
    }


def test_without_a_key_the_rows_are_written_and_nothing_is_returned():
    assert insert_rows(Order, FIELDS, [order_row("SO-1"), order_row("SO-2")], now=NOW) == {}
    assert sorted(stored_orders()) == ["SO-1", "SO-2"]


def test_thousands_of_rows_go_out_in_several_statements_every_id_returned():
    """2,500 rows of 2 KB URLs: 5 MB, past the 1 MB a MySQL statement stops at and SQLite's 999 bound values."""
    rows = [order_row(f"SO-{n}", amount=n, view_url=f"{n}/" + "u" * 2000) for n in range(2500)]

    ids = insert_rows(Order, FIELDS, rows, now=NOW, key="order_id")

    stored = dict(Order.objects.values_list("pk", "amount"))
    assert len(stored) == 2500
    assert {order_id: stored[pk] for order_id, pk in ids.items()} == {f"SO-{n}": n for n in range(2500)}
    assert set(Order.objects.values_list("view_url", flat=True)) == {
        f"{n}/" + "u" * 2000 for n in range(2500)
    }


def test_a_taken_key_fails_the_insert_and_writes_none_of_its_rows():
    insert_rows(Order, FIELDS, [order_row("SO-1")], now=NOW)

    with pytest.raises(IntegrityError), transaction.atomic():
        insert_rows(Order, FIELDS, [order_row("SO-2"), order_row("SO-1", amount=1)], now=NOW, key="order_id")

    assert stored_orders() == {"SO-1": order_row("SO-1")}


def test_a_column_left_out_is_refused_before_anything_is_written():
    fields = tuple(name for name in FIELDS if name != "view_url")
    row = tuple(value for name, value in zip(FIELDS, order_row("SO-1"), strict=True) if name != "view_url")

    with pytest.raises(ValueError, match="view_url"):
        insert_rows(Order, fields, [row], now=NOW)

    assert Order.objects.count() == 0
