"""Orders through the real ingest pipeline (``process_batch``): recorded once, attributed, refunded, held."""

import datetime as dt
import json
from decimal import Decimal

import pytest
from django.db.models import Count

from conversions.models import ExchangeRate, HeldRefund, LedgerEntry, MonthClose, Order, OrderEvent
from partners.models import Partner
from stats.models import DeadLetter
from stats.pipeline.ingest import Message, process_batch
from tests.conversions.orders import ledger_of, ledger_rows, order, order_event
from tests.factories import archived_event_count, at, create_tree, feed, pv_event

pytestmark = pytest.mark.django_db

NOON = at("2026-11-21 12:00")


@pytest.fixture
def tree() -> dict[str, Partner]:
    partners = create_tree()
    # A1a sells at 5% (its own rate); the others at their level's default: A 500, A1 and A2 300 bp.
    Partner.objects.filter(code="A1a").update(commission_bp=500)
    return partners


def test_paid_order_goes_to_the_last_partner_view_with_its_chain_and_commission(tree):
    feed([pv_event(at("2026-11-21 10:00"), "A1a", "o-1", event_id="v-1", url="/p?id=3")], now=NOON)
    result = feed([order_event(at("2026-11-21 10:05"), "SO-1", openid="o-1", event_id="p-1")], now=NOON)

    assert result.counted == 1
    sale = order("SO-1")
    assert (sale.partner.code, sale.attribution) == ("A1a", "view")
    assert (sale.view_event_id, sale.view_url) == ("v-1", "/p?id=3")
    assert sale.view_ts == at("2026-11-21 10:00")
    assert sale.path == tree["A1a"].path
    assert sale.commission_bp == 500
    assert sale.chain == [
        {"partner": tree["A1a"].pk, "share_bp": 8000},
        {"partner": tree["A1"].pk, "share_bp": 1500},
        {"partner": tree["A"].pk, "share_bp": 500},
    ]
    assert (sale.amount, sale.amount_reporting, sale.rate, sale.paid_date) == (
        12999,
        12999,
        Decimal(1),
        dt.date(2026, 11, 21),
    )
    # 12999 x 5% = 649.95 -> 650, split 520 / 97.5 / 32.5 -> the tied unit to A1 (closer to the order)
    assert ledger_rows("SO-1") == [
        ("commission", "A1a", 520),
        ("commission", "A1", 98),
        ("commission", "A", 32),
    ]
    assert OrderEvent.objects.get(event_id="p-1").amount_reporting == 12999


def test_a_view_in_the_same_batch_attributes_but_not_one_after_the_order_or_outside_the_window(tree):
    feed([pv_event(at("2026-10-20 09:00"), "B", "o-2")], now=at("2026-10-20 10:00"))  # 32 days before
    feed(
        [
            pv_event(at("2026-11-21 09:00"), "A2", "o-1"),
            pv_event(at("2026-11-21 11:00"), "B", "o-1"),  # after the order's ts: not the one
            order_event(at("2026-11-21 10:00"), "SO-1", openid="o-1"),
            order_event(at("2026-11-21 10:00"), "SO-2", openid="o-2"),
            pv_event(at("2026-11-21 09:30"), "A1", "o-3", ua="Googlebot/2.1"),  # a bot's view
            order_event(at("2026-11-21 10:00"), "SO-3", openid="o-3"),
        ],
        now=NOON,
    )
    assert order("SO-1").partner.code == "A2"
    assert (order("SO-2").partner, order("SO-2").attribution) == (None, "none")
    assert (order("SO-3").partner, order("SO-3").attribution) == (None, "none")
    assert not LedgerEntry.objects.filter(order__order_id__in=["SO-2", "SO-3"]).exists()


def test_explicit_partner_wins_and_a_foreign_currency_converts_at_the_rate_of_the_paid_day(tree):
    ExchangeRate.objects.create(currency="JPY", valid_from=dt.date(2026, 11, 1), rate=Decimal("0.047"))
    ExchangeRate.objects.create(currency="JPY", valid_from=dt.date(2026, 11, 21), rate=Decimal("0.048"))
    feed([pv_event(at("2026-11-21 09:00"), "A1a", "o-1")], now=NOON)
    feed([order_event(at("2026-11-21 10:00"), "SO-J", amount=1000, currency="JPY", partner="A2")], now=NOON)

    sale = order("SO-J")
    assert (sale.partner.code, sale.attribution, sale.view_event_id) == ("A2", "explicit", "")
    # 1000 yen x 0.048 = 48.00 CNY
    assert (sale.rate, sale.rate_valid_from, sale.amount_reporting) == (
        Decimal("0.048"),
        dt.date(2026, 11, 21),
        4800,
    )
    # A2 is level 2 (300 bp): 144, split over a chain of two, 8500/1500: 122.4 / 21.6 -> 122 / 22
    assert ledger_rows("SO-J") == [("commission", "A2", 122), ("commission", "A", 22)]


def test_refunds_and_a_cancellation_append_differences_that_add_up_to_the_new_net(tree):
    feed([order_event(at("2026-11-21 10:00"), "SO-1", partner="A1a")], now=NOON)
    feed([order_event(at("2026-11-21 10:30"), "SO-1", "refunded", amount=2999, event_id="r-1")], now=NOON)
    # net 10000: commission 500 -> 400 / 75 / 25
    assert ledger_of("SO-1") == {"A1a": 400, "A1": 75, "A": 25}
    assert ledger_rows("SO-1")[3:] == [("refund", "A1a", -120), ("refund", "A1", -23), ("refund", "A", -7)]

    feed([order_event(at("2026-11-21 11:00"), "SO-1", "cancelled", amount=5, event_id="c-1")], now=NOON)
    assert ledger_of("SO-1") == {"A1a": 0, "A1": 0, "A": 0}
    cancel = OrderEvent.objects.get(event_id="c-1")
    assert (cancel.status, cancel.amount, cancel.amount_reporting) == ("cancelled", 10000, 10000)


def test_a_refund_beyond_what_is_left_is_a_dead_letter_and_counts_nothing(tree):
    feed([order_event(at("2026-11-21 10:00"), "SO-1", partner="A1a")], now=NOON)
    archived = archived_event_count()
    result = feed(
        [order_event(at("2026-11-21 10:30"), "SO-1", "refunded", amount=13000, event_id="r-big")], now=NOON
    )
    assert (result.counted, dict(result.dead)) == (0, {"bad_field": 1})
    letter = DeadLetter.objects.get()
    assert "beyond the 12999 left" in letter.detail
    assert not OrderEvent.objects.filter(event_id="r-big").exists()
    assert ledger_of("SO-1") == {"A1a": 520, "A1": 98, "A": 32}
    assert archived_event_count() == archived  # taken back from the archive


def test_repeated_events_and_a_second_paid_change_nothing(tree):
    paid = order_event(at("2026-11-21 10:00"), "SO-1", partner="A1a", event_id="p-1")
    refund = order_event(at("2026-11-21 10:30"), "SO-1", "refunded", amount=2999, event_id="r-1")
    feed([paid, refund], now=NOON)
    feed(
        [
            paid,
            refund,
            order_event(at("2026-11-21 10:40"), "SO-1", amount=50000, partner="B", event_id="p-2"),
        ],
        now=NOON,
    )
    assert Order.objects.count() == 1
    assert (order("SO-1").amount, order("SO-1").partner.code) == (12999, "A1a")
    assert list(OrderEvent.objects.values_list("event_id", flat=True)) == ["p-1", "r-1"]
    assert ledger_of("SO-1") == {"A1a": 400, "A1": 75, "A": 25}
    assert not DeadLetter.objects.exists()


def test_a_batch_recorded_again_after_a_crash_before_its_counters_adds_no_row(tree):
    """Stored offsets make a re-read count nothing; a consumer that crashed after recording and before Redis
    stored no offset, so the batch is recorded a second time: nothing may change."""
    values = [
        pv_event(at("2026-11-21 09:00"), "A1", "o-1"),
        order_event(at("2026-11-21 10:00"), "SO-1", openid="o-1"),
        order_event(at("2026-11-21 10:10"), "SO-1", "refunded", amount=999),
        order_event(at("2026-11-21 10:20"), "SO-2", partner="B", openid="o-2"),
        order_event(at("2026-11-21 10:30"), "SO-2", "refunded", amount=99999),  # beyond: a dead letter
    ]
    messages = [Message("t", 0, n, v) for n, v in enumerate(values)]
    first = process_batch(messages, group="g1", now=NOON)
    rows = (Order.objects.count(), OrderEvent.objects.count(), LedgerEntry.objects.count())
    second = process_batch(messages, group="g2", now=NOON)  # no offset stored for g2: recorded again

    assert (first.counted, dict(first.dead)) == (second.counted, dict(second.dead)) == (4, {"bad_field": 1})
    assert rows == (2, 3, 5)  # A1's order (chain A1, A), its refund (2 more) and B's order
    assert (Order.objects.count(), OrderEvent.objects.count(), LedgerEntry.objects.count()) == rows
    assert DeadLetter.objects.count() == 1
    # 12000 net x 300 bp = 360, 8500/1500 -> 306 / 54
    assert ledger_of("SO-1") == {"A1": 306, "A": 54}


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"amount": 12.5}, "bad_field"),
        ({"amount": "100"}, "bad_field"),
        ({"amount": -1}, "bad_field"),
        ({"amount": True}, "bad_field"),
        ({"amount": None}, "missing_field"),
        ({"currency": "XXX"}, "bad_field"),
        ({"currency": "ZZZ"}, "bad_field"),
        ({"currency": "JPY"}, "bad_field"),  # no rate imported
        ({"status": "shipped"}, "bad_field"),
        ({"partner": "NOPE"}, "unknown_partner"),
        ({"openid": ""}, "missing_field"),
        ({"order_id": None}, "missing_field"),
    ],
)
def test_bad_order_events_are_dead_letters_with_their_reason(tree, fields, reason):
    event = {**json.loads(order_event(at("2026-11-21 10:00"), "SO-1")), **fields}
    result = feed([json.dumps(event).encode()], now=NOON)
    assert (result.counted, dict(result.dead)) == (0, {reason: 1})
    assert not Order.objects.exists()


def test_a_refund_before_its_order_is_held_then_applied_in_ts_order(tree):
    feed(
        [
            order_event(at("2026-11-21 10:40"), "SO-1", "cancelled", event_id="c-1"),
            order_event(at("2026-11-21 10:30"), "SO-1", "refunded", amount=2999, event_id="r-1"),
        ],
        now=NOON,
    )
    assert HeldRefund.objects.filter(applied_at=None).count() == 2
    assert not Order.objects.exists()

    feed([order_event(at("2026-11-21 10:00"), "SO-1", partner="A1a")], now=NOON)
    assert HeldRefund.objects.filter(applied_at=None).count() == 0
    events = list(OrderEvent.objects.order_by("ts").values_list("status", "amount"))
    assert events == [("paid", 12999), ("refunded", 2999), ("cancelled", 10000)]
    assert [r[0] for r in ledger_rows("SO-1")] == ["commission"] * 3 + ["refund"] * 3 + ["cancellation"] * 3
    assert ledger_of("SO-1") == {"A1a": 0, "A1": 0, "A": 0}


def test_an_entry_of_a_closed_month_is_booked_on_the_first_open_day(tree):
    feed([order_event(at("2026-10-30 10:00"), "SO-1", partner="A1a")], now=at("2026-10-30 12:00"))
    MonthClose.objects.create(month=dt.date(2026, 10, 1))
    late = at("2026-10-31 23:00")
    feed([order_event(late, "SO-1", "refunded", amount=2999)], now=at("2026-11-02 12:00"))

    booked = dict(
        LedgerEntry.objects.values_list("reason", "booked_date")
        .annotate(n=Count("id"))
        .values_list("reason", "booked_date")
    )
    assert booked == {"commission": dt.date(2026, 10, 30), "refund": dt.date(2026, 11, 1)}
    assert set(LedgerEntry.objects.filter(reason="refund").values_list("event_date", flat=True)) == {
        dt.date(2026, 10, 31)
    }


def test_the_refund_that_empties_an_order_takes_what_is_left_in_the_reporting_currency(tree):
    ExchangeRate.objects.create(currency="USD", valid_from=dt.date(2026, 11, 1), rate=Decimal("0.3"))
    feed([order_event(at("2026-11-21 10:00"), "SO-U", amount=3, currency="USD", partner="B")], now=NOON)
    feed(
        [
            order_event(at(f"2026-11-21 10:0{n}"), "SO-U", "refunded", amount=1, currency="USD")
            for n in (1, 2, 3)
        ],
        now=NOON,
    )
    # paid 3 cents x 0.3 = 0.9 fen -> 1; each refund of a cent 0.3 fen -> 0, but the last empties the order
    amounts = list(OrderEvent.objects.order_by("ts").values_list("amount_reporting", flat=True))
    assert amounts == [1, 0, 0, 1]
