"""Simulated days with orders, through the consumer, read back from the API: the simulator's own truth.

``simulate --orders-share`` works out every partner's orders, buyers and money by itself (attribution by the
last view, late and repeated payments, refunds before their order, part refunds and cancellations, three
currencies), without the product's code; the product must give the same numbers, to the minor unit.
"""

import datetime as dt
import json
from collections import defaultdict
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.db.models import F, Sum

from conversions.models import LedgerEntry, Order, OrderDrift, OrderEvent, Statement
from conversions.rates import rates_import_csv
from conversions.statements import close_month
from cpsproject.common.viewers import (
    CONVERSIONS_GROUP_NAME,
    CONVERSIONS_PERMISSIONS,
    ensure_statistics_viewers,
)
from stats.devtools.order_truth import OrderTruth, SimulatedOrder, commission_of, split_commission
from stats.devtools.producer import write_to_file
from stats.devtools.simulate import simulate_events
from stats.keys import NO_PARTNER
from stats.pipeline.consumer import StopFlag, consume_file
from tests.factories import create_tree, staff_client

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine("2026-11-25T15:00:00+08:00", tick=False)]

DAY = dt.date(2026, 11, 24)
RATES = Path(__file__).resolve().parents[2] / "sample" / "rates.csv"
MONEY = (
    "orders",
    "orders_self",
    "buyers",
    "buyers_self",
    "gross",
    "refunded",
    "net",
    "net_self",
    "commission",
)


@pytest.fixture
def money_reader(django_user_model):
    client = staff_client()
    group = ensure_statistics_viewers(
        group_model=Group,
        permission_model=Permission,
        group_name=CONVERSIONS_GROUP_NAME,
        permissions=CONVERSIONS_PERMISSIONS,
    )
    django_user_model.objects.get(username="staff").groups.add(group)
    return client


def count_a_simulated_day(tmp_path: Path, *, batch_size: int) -> dict[str, dict[str, int]]:
    create_tree()
    rates_import_csv(text=RATES.read_text())
    values, truth = simulate_events(events=1500, day=DAY, users=80, seed=3, orders_share=0.1)
    write_to_file(tmp_path / "events.jsonl", values)
    consume_file(tmp_path / "events.jsonl", batch_size=batch_size, stop=StopFlag())
    return truth.orders.figures()


@pytest.mark.parametrize("batch_size", [5000, 97])
def test_each_partners_orders_and_money_are_the_simulators_truth(tmp_path, money_reader, batch_size):
    truth = count_a_simulated_day(tmp_path, batch_size=batch_size)
    partners = sorted(code for code in truth if code != NO_PARTNER)
    assert len(partners) >= 5 and sum(truth[code]["orders_self"] for code in truth) >= 50
    for code in partners:
        answer = money_reader.get(f"/api/v1/partners/{code}/conversions/?start={DAY}&end={DAY}")
        assert answer.status_code == 200, answer.content
        (day,) = answer.json()["days"]
        assert {name: day[name] for name in MONEY} == {name: truth[code][name] for name in MONEY}, code
    # No order recorded twice, and the whole ledger is the commissions the simulator split.
    assert Order.objects.count() == sum(truth[code]["orders_self"] for code in truth)
    assert sum(LedgerEntry.objects.values_list("amount", flat=True)) == sum(
        truth[code]["commission"] for code in partners
    )


# --- A month's end: three simulated days, reconciled, the month closed, a late refund after it -------------

MONTH_END = [dt.date(2026, 11, 29), dt.date(2026, 11, 30), dt.date(2026, 12, 1)]
NOV, DEC = dt.date(2026, 11, 1), dt.date(2026, 12, 1)


def merged(truths: list[OrderTruth]) -> OrderTruth:
    """One truth of several simulated days: their orders and their buyers' views together."""
    views: defaultdict = defaultdict(list)
    for truth in truths:
        for openid, seen in truth.views.items():
            views[openid].extend(seen)
    first = truths[0]
    return OrderTruth(
        terms=first.terms,
        rates=first.rates,
        partner_bp=first.partner_bp,
        orders=[order for truth in truths for order in truth.orders],
        views=views,
    )


def expected_ledger(truth: OrderTruth, order: SimulatedOrder) -> dict[str, int]:
    """Each chain partner's share of the commission of the order's net, as the simulator works it out."""
    lineage = truth.attributed(order)
    if lineage is None:
        return {}
    paid, refunded = truth.order_money(order)
    chain = list(reversed(lineage.codes))[: len(truth.terms.shares)]
    shares = split_commission(
        commission_of(paid - refunded, truth.commission_bp(lineage)), chain=chain, shares=truth.terms.shares
    )
    return {code: amount for code, amount in shares.items() if amount}


def figures_through_the_api(client, code: str, start: dt.date, end: dt.date) -> tuple[list[dict], dict]:
    answer = client.get(f"/api/v1/partners/{code}/conversions/?start={start}&end={end}")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    return body["days"], body["total"]


def assert_days_are_the_truth(client, per_day: dict[dt.date, dict], whole: dict, *, reconciled: bool) -> None:
    for code in sorted(c for c in whole if c != NO_PARTNER):
        days, total = figures_through_the_api(client, code, MONTH_END[0], MONTH_END[-1])
        for day in days:
            truth = per_day[dt.date.fromisoformat(day["date"])].get(code, dict.fromkeys(MONEY, 0))
            assert {name: day[name] for name in MONEY} == {name: truth[name] for name in MONEY}, (code, day)
            assert day["reconciled"] is reconciled
        # the range: money summed over the days, buyers distinct over them
        assert {name: total[name] for name in MONEY} == {name: whole[code][name] for name in MONEY}, code


@pytest.mark.time_machine("2026-12-02T10:00:00+08:00", tick=False)
def test_a_month_end_is_the_simulators_truth_live_after_reconcile_and_in_the_statements(
    tmp_path, money_reader, settings
):
    settings.CPS_CONVERSIONS = {"STATEMENT_LATENESS_DAYS": 1}  # November closes from December 2
    create_tree()
    rates_import_csv(text=RATES.read_text())
    simulated = [
        simulate_events(events=700, day=day, users=60, seed=40 + n, orders_share=0.12)
        for n, day in enumerate(MONTH_END)
    ]
    per_day = {day: truth.orders.figures() for day, (_, truth) in zip(MONTH_END, simulated, strict=True)}
    truth = merged([t.orders for _, t in simulated])
    whole = truth.figures()
    assert sum(whole[code]["orders_self"] for code in whole) >= 60 and len(whole) >= 5
    # Out of order across the days: half of December 1st first, then November, then the rest.
    (v29, _), (v30, _), (v1, _) = simulated
    write_to_file(tmp_path / "events.jsonl", v1[: len(v1) // 2] + v30 + v29 + v1[len(v1) // 2 :])
    consume_file(tmp_path / "events.jsonl", batch_size=97, stop=StopFlag())

    # Live: every partner's days and range, own and subtree, to the minor unit.
    assert_days_are_the_truth(money_reader, per_day, whole, reconciled=False)
    # Each order's ledger rows are its commission, split over its chain.
    recorded = {
        (order_id, code): amount
        for order_id, code, amount in LedgerEntry.objects.values_list("order__order_id", "partner__code")
        .annotate(total=Sum("amount"))
        .values_list("order__order_id", "partner__code", "total")
    }
    expected = {
        (order.order_id, code): amount
        for order in truth.orders
        for code, amount in expected_ledger(truth, order).items()
    }
    assert {key: amount for key, amount in recorded.items() if amount} == expected

    # A lost order and a lost refund: reconcile finds them in the archive and records them again.
    lost_paid = next(o for o in truth.orders if o.paid_at.date() == MONTH_END[1] and truth.attributed(o))
    lost_refund = OrderEvent.objects.filter(date=MONTH_END[0], status="refunded").order_by("event_id").first()
    LedgerEntry.objects.filter(source_event_id=lost_refund.event_id).delete()
    lost_refund.delete()
    LedgerEntry.objects.filter(order__order_id=lost_paid.order_id).delete()
    OrderEvent.objects.filter(order__order_id=lost_paid.order_id).delete()
    Order.objects.filter(order_id=lost_paid.order_id).delete()
    lines = []
    for day in MONTH_END:
        out = StringIO()
        call_command("reconcile", date=str(day), stdout=out)
        lines.append(out.getvalue())
    assert f"recorded now 1 ({lost_refund.event_id})" in lines[0]
    assert "recorded now" in lines[1] and "partners with drift" in lines[1]
    assert "0 partners with drift" in lines[2] and "recorded now" not in lines[2]
    assert OrderDrift.objects.filter(date=MONTH_END[1], recorded_orders__lt=F("exact_orders")).exists()
    assert_days_are_the_truth(money_reader, per_day, whole, reconciled=True)

    # November closed: each statement is its partner's ledger booked in November, the days' commissions.
    close_month(month=NOV, now=dt.datetime.now(tz=dt.UTC))
    november = {s.partner.code: s.amount for s in Statement.objects.filter(month=NOV)}
    nov_truth = {
        code: per_day[MONTH_END[0]].get(code, {}).get("commission", 0)
        + per_day[MONTH_END[1]].get(code, {}).get("commission", 0)
        for code in whole
    }
    assert november == {code: amount for code, amount in nov_truth.items() if code != NO_PARTNER and amount}

    # A refund of a November order after the close: booked on December 1st, November's statement unchanged.
    order = Order.objects.filter(paid_date=MONTH_END[1]).exclude(partner=None).order_by("order_id").first()
    left = order.amount - sum(order.events.exclude(status="paid").values_list("amount", flat=True))
    late = {
        "event_id": "late-refund",
        "type": "order",
        "ts": "2026-11-30T23:59:59+08:00",
        "status": "refunded",
    }
    late |= {"order_id": order.order_id, "openid": order.openid, "amount": left, "currency": order.currency}
    write_to_file(tmp_path / "late.jsonl", [json.dumps(late).encode()])
    consume_file(tmp_path / "late.jsonl", batch_size=10, stop=StopFlag())
    rows = list(
        LedgerEntry.objects.filter(source_event_id="late-refund").values_list("event_date", "booked_date")
    )
    assert rows and set(rows) == {(MONTH_END[1], DEC)}
    # refunded whole: its rows add up to nothing, and November's statements did not move
    assert LedgerEntry.objects.filter(order=order).aggregate(total=Sum("amount"))["total"] == 0
    assert {s.partner.code: s.amount for s in Statement.objects.filter(month=NOV)} == november
