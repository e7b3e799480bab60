"""A day's orders recounted from the raw archive beside the recorded ones: drift when they differ."""

import datetime as dt
from decimal import Decimal

import pytest

from conversions.models import ExchangeRate, LedgerEntry, Order, OrderEvent
from conversions.reconcile import recount_orders
from tests.conversions.orders import order_event
from tests.factories import at, create_tree, feed

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 21)
NOON = at("2026-11-21 12:00")


@pytest.fixture(autouse=True)
def day_of_orders() -> None:
    create_tree()
    ExchangeRate.objects.create(currency="JPY", valid_from=dt.date(2026, 11, 1), rate=Decimal("0.048"))
    feed(
        [
            order_event(at("2026-11-21 09:00"), "SO-1", amount=12999, partner="A1"),
            order_event(at("2026-11-21 09:10"), "SO-2", amount=1000, currency="JPY", partner="B"),
            order_event(at("2026-11-21 09:20"), "SO-2", amount=5000, currency="JPY", partner="B"),  # again
            order_event(at("2026-11-21 10:00"), "SO-1", "refunded", amount=999, event_id="r-1"),
            order_event(at("2026-11-21 10:00"), "SO-9", "refunded", amount=5, event_id="r-held"),
            order_event(at("2026-11-21 10:00"), "SO-1", "refunded", amount=99999, event_id="r-big"),
        ],
        now=NOON,
    )


def test_a_day_recorded_whole_shows_no_drift():
    recount = recount_orders(day=DAY)
    # 12999 fen + 1000 yen x 0.048 = 4800 fen; the refund held for SO-9 and the refused one are not counted
    assert (recount.orders, recount.orders_recorded) == (2, 2)
    assert (recount.gross, recount.gross_recorded) == (17799, 17799)
    assert (recount.refund_events, recount.refund_events_recorded) == (1, 1)
    assert not recount.drifted
    assert (
        recount.summary()
        == "orders of 2026-11-21: 2 in the archive, 2 recorded; gross 17799 / 17799; refunds 1 / 1"
    )


def test_an_order_lost_by_the_tables_is_drift_named_by_its_id():
    LedgerEntry.objects.filter(order__order_id="SO-2").delete()
    OrderEvent.objects.filter(order__order_id="SO-2").delete()
    Order.objects.filter(order_id="SO-2").delete()
    recount = recount_orders(day=DAY)
    assert (recount.orders, recount.orders_recorded) == (2, 1)
    # the archive's first paid of SO-2, at the rate of its day: 1000 x 0.048 -> 4800 fen
    assert (recount.gross, recount.gross_recorded) == (17799, 12999)
    assert recount.missing_orders == ["SO-2"]
    assert recount.drifted


def test_a_refund_lost_by_the_tables_is_drift_named_by_its_event_id():
    LedgerEntry.objects.filter(source_event_id="r-1").delete()
    OrderEvent.objects.filter(event_id="r-1").delete()
    recount = recount_orders(day=DAY)
    assert (recount.refund_events, recount.refund_events_recorded, recount.missing_refunds) == (1, 0, ["r-1"])
    assert recount.drifted
