"""The ledger under two consumers: refunds of one order recorded at once never take more than was paid."""

import threading
import time

import pytest
from django.db import connection, connections

from conversions import recording
from conversions.events import ParsedOrderEvent
from conversions.models import OrderEvent
from partners.selectors import partner_lineages
from stats.pipeline.events import parse_event
from tests.conversions.orders import ledger_of, order_event
from tests.factories import at, create_tree, feed

NOON = at("2026-11-21 12:00")


def _parsed(value: bytes) -> ParsedOrderEvent:
    event = parse_event(value, lineages={}, now=NOON)
    assert isinstance(event, ParsedOrderEvent)
    return event


@pytest.mark.django_db(transaction=True)
def test_two_refunds_recorded_at_once_cannot_both_take_what_is_left(monkeypatch):
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no row locks: one writer at a time (the product runs MariaDB/MySQL)")
    create_tree()
    feed([order_event(at("2026-11-21 10:00"), "SO-1", partner="A")], now=NOON)  # 12999: commission 650

    # Each consumer reads what is left, then takes a while to convert: without the order's row lock, both
    # would read 12999 left and both record 7000.
    convert = recording.to_reporting

    def slow_conversion(*args, **kwargs):
        time.sleep(0.5)
        return convert(*args, **kwargs)

    monkeypatch.setattr(recording, "to_reporting", slow_conversion)
    refunds = [
        _parsed(order_event(at("2026-11-21 10:30"), "SO-1", "refunded", amount=7000, event_id=f"r-{n}"))
        for n in (1, 2)
    ]
    refused: dict[str, list] = {}
    start = threading.Barrier(2)

    def consumer(event: ParsedOrderEvent) -> None:
        start.wait()
        try:
            refused[event.event_id] = recording.record_orders([event], batch={})
        finally:
            connections.close_all()

    threads = [threading.Thread(target=consumer, args=(event,)) for event in refunds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert sorted(len(r) for r in refused.values()) == [0, 1]
    (refusal,) = [r for rs in refused.values() for r in rs]
    assert "beyond the 5999 left" in refusal.detail
    assert OrderEvent.objects.filter(status="refunded").count() == 1
    # net 5999 x 5% = 299.95 -> 300, all A's
    assert ledger_of("SO-1") == {"A": 300}


@pytest.mark.django_db(transaction=True)
def test_one_payment_recorded_by_two_consumers_at_once_is_one_order(monkeypatch):
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no row locks: one writer at a time (the product runs MariaDB/MySQL)")
    create_tree()
    # Both consumers find the event unseen, then take a while to convert: the second one's insert meets the
    # first one's order (a unique key), and recorded again, it finds the event seen and writes nothing.
    convert = recording.to_reporting

    def slow_conversion(*args, **kwargs):
        time.sleep(0.5)
        return convert(*args, **kwargs)

    monkeypatch.setattr(recording, "to_reporting", slow_conversion)
    value = order_event(at("2026-11-21 10:00"), "SO-1", partner="A1a", event_id="p-1")
    paid = parse_event(value, lineages=partner_lineages(), now=NOON)
    assert isinstance(paid, ParsedOrderEvent)
    refused: list[list] = []
    start = threading.Barrier(2)

    def consumer() -> None:
        start.wait()
        try:
            refused.append(recording.record_orders([paid], batch={}))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=consumer) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert refused == [[], []]
    assert list(OrderEvent.objects.values_list("event_id", "order__order_id")) == [("p-1", "SO-1")]
    # 12999 to A1a (level 3: 2%) = 259.98 -> 260, split 80/15/5% -> 208/39/13, booked once
    assert ledger_of("SO-1") == {"A1a": 208, "A1": 39, "A": 13}
