"""A finding confirmed while its month closes, on real MariaDB connections in two threads (as test_close_race).

B's order of Nov 5 (300 fen) has an open finding. Whichever side reaches the ledger gate first, the 300 is
never paid: held by the close and reversed by the confirmation, or reversed before the close reads it.
"""

import datetime as dt
import threading

import pytest
from django.db.models import Sum

from conversions import holds
from conversions.models import CommissionHold, LedgerEntry, Statement
from conversions.public import settle_review
from conversions.statements import close_month
from quality.models import Finding
from tests.conversions.builders import ledger, make_order
from tests.conversions.test_close_race import Side, paused, race
from tests.factories import at, create_tree

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.real_clock]

NOV = dt.date(2026, 11, 1)
DAY = dt.date(2026, 11, 5)
CLOSING = at("2026-12-20 09:00")


@pytest.fixture
def flagged() -> Finding:
    tree = create_tree()
    order = make_order("SO-3", partner=tree["B"], paid_at=at("2026-11-05 11:00"), amount=6_000)
    ledger(order, tree["B"], 300, ts=at("2026-11-05 11:00"))
    return Finding.objects.create(partner=tree["B"], date=DAY, rule="automated", value=0.9, threshold=0.2)


def confirm(finding: Finding) -> None:
    Finding.objects.filter(pk=finding.pk).update(status="confirmed", reason="bot farm")
    settle_review(partner_id=finding.partner_id, day=DAY, now=CLOSING)


def assert_never_paid() -> None:
    rows = LedgerEntry.objects.filter(order__order_id="SO-3")
    assert sorted(rows.values_list("amount", "reason")) == [(-300, "quality_reversal"), (300, "commission")]
    assert Statement.objects.aggregate(paid=Sum("amount"))["paid"] in (0, None)
    assert CommissionHold.objects.get().reversal is not None


def test_confirmed_while_the_close_holds_the_entry_reverses_it_after_the_close(flagged, monkeypatch):
    reached, go_on = threading.Event(), threading.Event()
    # The close stops after holding the entry and writing the statements, before it commits.
    manager = Statement.objects
    monkeypatch.setattr(manager, "bulk_create", paused(manager.bulk_create, reached, go_on))
    race(Side(lambda: close_month(month=NOV, now=CLOSING)), reached, go_on, Side(lambda: confirm(flagged)))
    statement = Statement.objects.get()
    assert (statement.amount, statement.held_amount, statement.held_rows) == (0, 300, 1)
    assert_never_paid()
    # Reversed after the close committed: booked in December, the first open month.
    assert LedgerEntry.objects.get(reason="quality_reversal").booked_date == dt.date(2026, 12, 20)


def test_a_close_starting_while_a_confirmation_reverses_sees_the_reversal(flagged, monkeypatch):
    reached, go_on = threading.Event(), threading.Event()
    # The confirmation stops after appending the reversal, before it commits.
    monkeypatch.setattr(holds, "reverse_confirmed", paused(holds.reverse_confirmed, reached, go_on))
    race(Side(lambda: confirm(flagged)), reached, go_on, Side(lambda: close_month(month=NOV, now=CLOSING)))
    statement = Statement.objects.get()
    assert (statement.amount, statement.held_amount, statement.reversed_amount, statement.reversed_rows) == (
        0,
        0,
        300,
        1,
    )
    assert_never_paid()
