"""Click to order and conversion outliers, from the orders the conversions app recorded (conversions.public)."""

import datetime as dt

import pytest

from quality.flush import flush_quality
from quality.models import Finding, QualityDay
from stats.jobs.reconcile import reconcile
from tests.conversions.orders import order_event
from tests.factories import at, create_tree, feed, pv_event

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 21)
NOON = at("2026-11-21 12:00")


def sales(code: str, *, views: int, orders: int, after: dt.timedelta, clock: str = "10:00:00") -> list[bytes]:
    """``views`` views of ``code`` by as many buyers; the first ``orders`` buyers pay ``after`` their view."""
    seen = at(f"2026-11-21 {clock}")
    events = [pv_event(seen, code, f"{code}-b{n}", ip=f"203.0.{n % 250}.{n % 200 + 1}") for n in range(views)]
    events += [order_event(seen + after, f"{code}-SO-{n}", openid=f"{code}-b{n}") for n in range(orders)]
    return events


def row(code: str) -> QualityDay:
    return QualityDay.objects.get(partner__code=code, date=DAY)


def test_a_pile_of_orders_seconds_after_the_view_and_a_partner_converting_far_above_the_others(settings):
    settings.CPS_QUALITY = {**settings.CPS_QUALITY, "MIN_VIEWS": 1000}  # judge only the orders here
    create_tree()
    feed(sales("A1", views=5, orders=5, after=dt.timedelta(seconds=5)), now=NOON)  # a cookie stuffer
    feed(sales("A2", views=100, orders=5, after=dt.timedelta(hours=1)), now=NOON)
    feed(sales("B", views=200, orders=5, after=dt.timedelta(minutes=3), clock="09:00:00"), now=NOON)
    flush_quality(now=NOON)

    stuffer, honest = row("A1"), row("A2")
    assert (stuffer.orders, stuffer.orders_by_view, stuffer.median_seconds_to_order) == (5, 5, 5.0)
    # under 10 s, 1 min, 10 min, 1 h, 1 day, longer
    assert stuffer.order_seconds == [5, 0, 0, 0, 0, 0]
    assert honest.order_seconds == [0, 0, 0, 0, 5, 0]  # exactly an hour is not under an hour
    assert row("B").order_seconds == [0, 0, 5, 0, 0, 0]
    # Conversion: A1 5/5 = 1.0, A2 5/100 = 0.05, B 5/200 = 0.025; median 0.05; A1 is 20x it.
    found = sorted(Finding.objects.values_list("partner__code", "rule", "value", "threshold"))
    assert found == [("A1", "conversion_outlier", 20.0, 5), ("A1", "fast_orders", 5.0, 10)]

    reconcile(day=DAY, now=at("2026-11-22 01:00"))
    assert row("A1").median_seconds_to_order == 5.0 and row("A1").reconciled_at is not None
    assert sorted(Finding.objects.values_list("partner__code", "rule", "value")) == [
        ("A1", "conversion_outlier", 20.0),
        ("A1", "fast_orders", 5.0),
    ]


def test_fewer_fast_orders_than_the_minimum_are_no_finding():
    create_tree()
    feed(sales("A1", views=4, orders=4, after=dt.timedelta(seconds=2)), now=NOON)
    flush_quality(now=NOON)
    assert (row("A1").orders_by_view, row("A1").median_seconds_to_order) == (4, 2.0)
    assert not Finding.objects.exists()
