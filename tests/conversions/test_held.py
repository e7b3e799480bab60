"""Refunds that arrive before their order: held, applied when it arrives, given up on after the hold."""

import datetime as dt

import pytest

from conversions.held import DEAD_LETTER_SOURCE, settle_held_refunds, waiting_refunds
from conversions.models import HeldRefund, OrderEvent
from conversions.recording import record_orders
from partners.models import Partner
from stats.models import DeadLetter
from tests.conversions.orders import ledger_of, order_event
from tests.factories import at, create_tree, feed

pytestmark = pytest.mark.django_db

NOON = at("2026-11-21 12:00")


@pytest.fixture(autouse=True)
def tree() -> dict[str, Partner]:
    partners = create_tree()
    Partner.objects.filter(code="A1a").update(commission_bp=500)
    return partners


def test_a_held_refund_older_than_the_hold_becomes_a_dead_letter_once():
    feed(
        [order_event(at("2026-11-21 10:00"), "SO-LOST", "refunded", amount=100, event_id="r-lost")], now=NOON
    )
    feed(
        [order_event(at("2026-11-25 10:00"), "SO-NEW", "refunded", amount=100, event_id="r-new")],
        now=at("2026-11-25 12:00"),
    )
    # 7 days after the first: neither is older than 7 days yet
    assert settle_held_refunds(now=at("2026-11-28 09:59")) == (0, 0)
    assert waiting_refunds(now=at("2026-11-28 10:01")) == (2, 1)

    assert settle_held_refunds(now=at("2026-11-28 10:01")) == (0, 1)
    lost = HeldRefund.objects.get(event_id="r-lost")
    assert lost.expired_at == at("2026-11-28 10:01")
    assert HeldRefund.objects.get(event_id="r-new").expired_at is None
    letter = DeadLetter.objects.get()
    assert (letter.source, letter.offset, letter.reason) == (DEAD_LETTER_SOURCE, lost.pk, "bad_field")
    assert "r-lost" in letter.detail and "SO-LOST" in letter.detail
    assert b'"r-lost"' in bytes(letter.raw)

    assert settle_held_refunds(now=at("2026-11-29 10:00")) == (0, 0)
    assert DeadLetter.objects.count() == 1
    # Its order arriving now finds nothing held: the refund is a dead letter, the order counts whole.
    feed([order_event(at("2026-11-23 09:00"), "SO-LOST", partner="A1a")], now=at("2026-11-29 10:00"))
    assert ledger_of("SO-LOST") == {"A1a": 520, "A1": 98, "A": 32}


def test_settle_applies_a_held_refund_whose_order_another_consumer_recorded():
    # Two consumers racing: the refund was held by one while the other recorded the order.
    held_by_one = [order_event(at("2026-11-21 10:30"), "SO-1", "refunded", amount=2999, event_id="r-1")]
    feed(held_by_one, now=NOON)
    HeldRefund.objects.update(order_id="elsewhere")
    feed([order_event(at("2026-11-21 10:00"), "SO-1", partner="A1a")], now=NOON)
    HeldRefund.objects.update(order_id="SO-1")
    assert ledger_of("SO-1") == {"A1a": 520, "A1": 98, "A": 32}

    assert settle_held_refunds(now=NOON) == (1, 0)
    assert ledger_of("SO-1") == {"A1a": 400, "A1": 75, "A": 25}
    assert HeldRefund.objects.get().applied_at == NOON
    assert settle_held_refunds(now=NOON) == (0, 0)


def test_a_held_refund_beyond_the_paid_amount_is_given_up_when_its_order_arrives():
    feed([order_event(at("2026-11-21 10:30"), "SO-1", "refunded", amount=20000, event_id="r-big")], now=NOON)
    feed([order_event(at("2026-11-21 10:00"), "SO-1", partner="A1a")], now=NOON)
    assert not OrderEvent.objects.filter(event_id="r-big").exists()
    assert HeldRefund.objects.get().expired_at is not None
    assert "beyond the 12999 left" in DeadLetter.objects.get(source=DEAD_LETTER_SOURCE).detail
    assert ledger_of("SO-1") == {"A1a": 520, "A1": 98, "A": 32}


def test_the_recorder_holds_a_refund_and_refuses_nothing():
    from stats.plugins import Envelope  # noqa: F401 (the recorder is called as the pipeline calls it)

    feed([order_event(at("2026-11-21 10:30"), "SO-9", "cancelled", event_id="c-9")], now=NOON)
    assert record_orders([], batch={}) == []
    held = HeldRefund.objects.get()
    assert (held.status, held.amount, held.currency) == ("cancelled", 0, "CNY")
    assert held.ts == at("2026-11-21 10:30")
    assert held.ts.astimezone(dt.UTC) == dt.datetime(2026, 11, 21, 2, 30, tzinfo=dt.UTC)


def test_health_names_refunds_held_too_long_until_they_are_settled():
    from stats.read.health import health_problems

    feed([order_event(at("2026-11-21 10:00"), "SO-LOST", "refunded", amount=100)], now=NOON)
    line = "1 held refund has waited more than 7 days for its order"
    assert line not in health_problems(now=at("2026-11-28 09:00"))
    assert line in health_problems(now=at("2026-11-28 11:00"))
    settle_held_refunds(now=at("2026-11-28 11:00"))
    assert line not in health_problems(now=at("2026-11-28 11:00"))
