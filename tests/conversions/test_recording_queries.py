"""Recording orders is set-based: a batch costs the same number of queries whatever its number of orders."""

import cProfile
import datetime as dt
import os
import pstats
import time
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversions.models import ExchangeRate, HeldRefund, LedgerEntry, OrderEvent
from tests.conversions.orders import ledger_of, order_event
from tests.factories import at, create_tree, feed

pytestmark = pytest.mark.django_db

NOON = at("2026-11-21 12:00")
# The second batch, through the whole pipeline; recording orders was 2412 for 200 orders and 4812 for 400
# (22 until the paid events' ids were looked up in one table of two, not three).
QUERIES = 21


def _payments(tag: str, first: int, n: int) -> list[bytes]:
    """``n`` payments of 10000 minor units to A1a (explicit), every second one in USD."""
    return [
        order_event(
            at("2026-11-21 10:00"),
            f"{tag}-{i}",
            currency="USD" if i % 2 else "CNY",
            amount=10_000,
            partner="A1a",
            event_id=f"{tag}-p{i}",
        )
        for i in range(first, first + n)
    ]


def _refunds(tag: str, n: int) -> list[bytes]:
    """A refund of 1000 of each first half of orders 0..n-1, a cancellation of the second half, and a refund
    of 500 of ``n // 4`` orders not paid yet (held)."""

    def refund(i: int, status: str, amount: int, order_id: str, kind: str = "") -> bytes:
        return order_event(
            at("2026-11-21 10:05"),
            order_id,
            status=status,
            amount=amount,
            currency="USD" if i % 2 else "CNY",
            event_id=f"{tag}-{kind or status}{i}",
        )

    return (
        [refund(i, "refunded", 1_000, f"{tag}-{i}") for i in range(n // 2)]
        + [refund(i, "cancelled", 0, f"{tag}-{i}") for i in range(n // 2, n)]
        + [refund(i, "refunded", 500, f"{tag}-late-{i}", "held") for i in range(n // 4)]
    )


def _second_batch_queries(n: int, tag: str) -> int:
    """Pay ``n`` orders, then record a batch of ``n`` more payments and refunds of the first ``n``: return
    the queries of that second batch (the whole pipeline: parsing, recording, archiving)."""
    feed(_payments(tag, 0, n), now=NOON)
    values = _payments(tag, n, n) + _refunds(tag, n)
    profile = os.environ.get("CPS_PROFILE_RECORDING")
    profiler = cProfile.Profile(time.process_time) if profile else None
    with CaptureQueriesContext(connection) as context:
        if profiler:
            profiler.enable()
        feed(values, now=NOON)
        if profiler:
            profiler.disable()
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").dump_stats(f"{profile}-{n}.prof")
    return _statements(context.captured_queries)


def _statements(queries: list[dict]) -> int:
    """The queries, an insert split into chunks counted once: SQLite binds at most 999 values a statement, so
    Django cuts one ``bulk_create`` into as many INSERTs as its rows need (one query elsewhere)."""
    count, last_insert = 0, None
    for query in queries:
        sql = query["sql"]
        insert = sql.split(" (", 1)[0] if sql.startswith("INSERT INTO") else None
        if insert is None or insert != last_insert:
            count += 1
        last_insert = insert
    return count


@pytest.fixture
def usd() -> None:
    create_tree()
    ExchangeRate.objects.create(currency="USD", valid_from=dt.date(2026, 11, 1), rate=Decimal("7.1"))


def test_a_batch_of_400_orders_costs_the_queries_of_a_batch_of_200(usd):
    # SQLite takes no gate row lock (ledger.books_open): one query fewer.
    queries = QUERIES - (connection.vendor == "sqlite")
    assert (_second_batch_queries(200, "S"), _second_batch_queries(400, "L")) == (queries, queries)
    # S-0: CNY 10000 to A1a (level 3: 2%), refunded 1000 -> 2% of 9000 = 180, split 80/15/5% -> 144/27/9
    assert ledger_of("S-0") == {"A1a": 144, "A1": 27, "A": 9}
    assert OrderEvent.objects.filter(order__order_id__startswith="L-").count() == 800 + 400
    assert HeldRefund.objects.filter(order_id__startswith="L-late-", applied_at=None).count() == 100
    assert LedgerEntry.objects.filter(order__order_id="L-399").count() == 6
