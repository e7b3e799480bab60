"""A simulated day with orders, through the consumer, read back from the API: the simulator's own truth.

``simulate --orders-share`` works out every partner's orders, buyers and money by itself (attribution by the
last view, late and repeated payments, refunds before their order, part refunds and cancellations, three
currencies), without the product's code; the product must give the same numbers, to the minor unit.
"""

import datetime as dt
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, Permission

from conversions.models import LedgerEntry, Order
from conversions.rates import rates_import_csv
from cpsproject.common.viewers import (
    CONVERSIONS_GROUP_NAME,
    CONVERSIONS_PERMISSIONS,
    ensure_statistics_viewers,
)
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
