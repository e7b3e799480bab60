"""A month closing while the consumer books into it, on real MariaDB connections in two threads.

Each test stops one side inside its transaction at the moment that matters and lets the other side run as far
as it can for a while, then lets the first go on. Whatever the order, an entry is in the month's statement or
booked into the first open month: each statement is the sum of its partner's entries booked in the month.

Without the ledger gate (``conversions.ledger.books_open`` / ``books_closed``) both tests fail: the close
reads the month's sum while a batch's entries are uncommitted (first test), or a batch reads the month open
while the close is uncommitted (second test); either way the entry lands in a closed month, in no statement.
"""

import datetime as dt
import threading
from collections.abc import Callable

import pytest
from django.db import connection
from django.db.models import Sum

from conversions import ledger
from conversions.models import LedgerEntry, Statement
from conversions.statements import close_month
from tests.conversions.orders import order_event
from tests.factories import at, create_tree, feed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.real_clock]

NOV = dt.date(2026, 11, 1)
DEC = dt.date(2026, 12, 1)
CLOSING = at("2026-12-20 09:00")
# How long the other side is given to run while one side waits inside its transaction.
OTHER_SIDE_SECONDS = 1.5


@pytest.fixture(autouse=True)
def november_order() -> None:
    """SO-1: 10000 fen to A1 (level 2, 300 bp = 300 fen: A1 255, A 45), committed before anything races."""
    create_tree()
    feed(
        [order_event(at("2026-11-10 10:00"), "SO-1", amount=10_000, partner="A1")], now=at("2026-11-10 10:05")
    )


class Side(threading.Thread):
    """One side of the race in its own thread and database connection; ``error`` is what it raised."""

    def __init__(self, work: Callable[[], object]) -> None:
        super().__init__(daemon=True)
        self.work, self.error = work, None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # reported by the test's thread
            self.error = exc
        finally:
            connection.close()


def book_late_order() -> None:
    """SO-2: 20000 fen to A1 on the month's last evening (600 fen: A1 510, A 90)."""
    feed(
        [order_event(at("2026-11-30 23:00"), "SO-2", amount=20_000, partner="A1", openid="o-2")],
        now=at("2026-11-30 23:05"),
    )


def paused(inner: Callable, reached: threading.Event, go_on: threading.Event) -> Callable:
    def wrapper(*args, **kwargs):
        result = inner(*args, **kwargs)
        reached.set()
        assert go_on.wait(30), "never let go on"
        return result

    return wrapper


def assert_statements_are_the_ledger_of_the_month() -> None:
    for statement in Statement.objects.filter(month=NOV).select_related("partner"):
        booked = LedgerEntry.objects.filter(
            partner=statement.partner, booked_date__gte=NOV, booked_date__lt=DEC
        )
        assert (statement.amount, statement.rows) == (
            booked.aggregate(total=Sum("amount"))["total"],
            booked.count(),
        ), statement.partner.code


def race(first: Side, reached: threading.Event, go_on: threading.Event, second: Side) -> None:
    """Start ``first``, stop it where it set ``reached``, give ``second`` its time, let both finish."""
    first.start()
    assert reached.wait(30), first.error
    second.start()
    second.join(OTHER_SIDE_SECONDS)
    go_on.set()
    for side in (first, second):
        side.join(30)
        assert not side.is_alive() and side.error is None, side.error


def test_a_batch_booking_when_the_close_starts_is_in_the_statement(monkeypatch):
    reached, go_on = threading.Event(), threading.Event()
    # The batch stops after writing SO-2's entries, before its transaction commits.
    monkeypatch.setattr(ledger, "append_entries", paused(ledger.append_entries, reached, go_on))
    race(Side(book_late_order), reached, go_on, Side(lambda: close_month(month=NOV, now=CLOSING)))
    assert_statements_are_the_ledger_of_the_month()
    # 255 + 510 for A1, 45 + 90 for A: SO-2 is November's, in the statement
    assert {s.partner.code: s.amount for s in Statement.objects.filter(month=NOV)} == {"A1": 765, "A": 135}


def test_a_batch_booking_while_the_month_closes_goes_to_the_next_month(monkeypatch):
    reached, go_on = threading.Event(), threading.Event()
    # The close stops after reading the sums and writing the statements, before its transaction commits.
    manager = Statement.objects
    monkeypatch.setattr(manager, "bulk_create", paused(manager.bulk_create, reached, go_on))
    race(Side(lambda: close_month(month=NOV, now=CLOSING)), reached, go_on, Side(book_late_order))
    assert_statements_are_the_ledger_of_the_month()
    assert {s.partner.code: s.amount for s in Statement.objects.filter(month=NOV)} == {"A1": 255, "A": 45}
    # SO-2's entries say November 30 happened, and are booked on the first open day, for December's statement
    assert sorted(
        LedgerEntry.objects.filter(order__order_id="SO-2").values_list("event_date", "booked_date", "amount")
    ) == [(dt.date(2026, 11, 30), DEC, 90), (dt.date(2026, 11, 30), DEC, 510)]
