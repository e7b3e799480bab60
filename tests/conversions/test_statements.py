import datetime as dt

import pytest
import time_machine
from django.core.management import CommandError, call_command

from conversions.models import MonthClose, Statement
from conversions.statements import MonthNotOver, close_month, due_months
from conversions.tasks import close_due_months_task
from cpsproject.common.locks import job_lock
from cpsproject.common.schedules import setup_schedules
from tests.conversions.builders import ledger, make_order
from tests.factories import at, create_tree

pytestmark = pytest.mark.django_db

NOV = dt.date(2026, 11, 1)
DEC = dt.date(2026, 12, 1)


def statements(month: dt.date) -> dict[str, tuple[int, int]]:
    return {s.partner.code: (s.amount, s.rows) for s in Statement.objects.filter(month=month)}


@pytest.fixture
def november():
    """Entries of A1 and A booked around November; one order each, amounts stated here."""
    tree = create_tree()
    order = make_order("SO-1", partner=tree["A1"], paid_at=at("2026-10-31 23:59"), amount=10_000)
    ledger(order, tree["A1"], 400, ts=at("2026-10-31 23:59"))  # booked in October: not November's
    ledger(order, tree["A1"], 350, ts=at("2026-11-01 00:00"))
    ledger(order, tree["A1"], -120, ts=at("2026-11-30 23:59"), reason="refund")
    ledger(order, tree["A"], 75, ts=at("2026-11-15 12:00"))
    ledger(order, tree["A"], 9, ts=at("2026-12-01 00:00"))  # December's
    # A late refund of October, booked on the first open day of November: November's.
    ledger(order, tree["A"], -5, ts=at("2026-10-20 10:00"), booked=NOV, reason="refund")
    return tree


def test_close_month_writes_one_statement_per_partner_with_entries(november):
    closed = close_month(month=NOV, now=at("2026-12-08 00:00"))
    assert statements(NOV) == {"A1": (230, 2), "A": (70, 2)}
    assert (closed.statements, closed.amount, closed.rows, closed.newly_closed) == (2, 300, 4, True)
    assert list(MonthClose.objects.values_list("month", flat=True)) == [NOV]


def test_closing_twice_changes_nothing(november):
    close_month(month=NOV, now=at("2026-12-08 00:00"))
    before = list(Statement.objects.values_list("id", "partner__code", "amount", "rows", "closed_at"))
    ledger(_any_order(), november["A2"], 1, ts=at("2026-11-02 00:00"))  # cannot happen; would change nothing
    again = close_month(month=NOV, now=at("2026-12-20 00:00"))
    assert list(Statement.objects.values_list("id", "partner__code", "amount", "rows", "closed_at")) == before
    assert (again.statements, again.amount, again.rows, again.newly_closed) == (2, 300, 4, False)
    assert MonthClose.objects.count() == 1


def _any_order():
    from conversions.models import Order

    return Order.objects.first()


def test_a_month_is_refused_until_its_lateness_window_ends(november):
    with pytest.raises(MonthNotOver, match="2026-11 cannot be closed before 2026-12-08 00:00"):
        close_month(month=NOV, now=at("2026-12-07 23:59:59"))
    assert not Statement.objects.exists() and not MonthClose.objects.exists()
    close_month(month=NOV, now=at("2026-12-08 00:00"))
    assert MonthClose.objects.count() == 1


def test_new_years_eve_closes_november_not_december(november):
    eve = at("2026-12-31 23:58")
    with pytest.raises(MonthNotOver, match="2026-12 cannot be closed before 2027-01-08 00:00"):
        close_month(month=DEC, now=eve)
    assert close_month(month=NOV, now=eve).newly_closed
    order = _any_order()
    ledger(order, november["B"], 11, ts=at("2026-12-31 23:58"))  # December's last minute
    ledger(order, november["B"], 13, ts=at("2027-01-01 00:00"))  # January's
    close_month(month=DEC, now=at("2027-01-08 00:00"))
    assert statements(DEC) == {"A": (9, 1), "B": (11, 1)}


def test_due_months_are_the_unclosed_ones_with_entries_up_to_the_last_due(november):
    assert due_months(now=at("2026-12-07 23:59")) == [dt.date(2026, 10, 1)]
    assert due_months(now=at("2026-12-08 00:00")) == [dt.date(2026, 10, 1), NOV]
    close_month(month=dt.date(2026, 10, 1), now=at("2026-12-08 00:00"))
    assert due_months(now=at("2026-12-31 23:58")) == [NOV]


def test_the_daily_task_closes_what_is_due(november):
    with time_machine.travel(at("2026-12-08 01:00"), tick=False):
        assert close_due_months_task() == (
            "2026-10 closed: 1 statements, 1 ledger entries, amount 400 (minor units of CNY); "
            "2026-11 closed: 2 statements, 4 ledger entries, amount 300 (minor units of CNY)"
        )
        assert close_due_months_task() == "no month to close"


def test_setup_schedules_registers_the_close(db):
    names = setup_schedules(now=at("2026-11-21 10:00"))
    assert "conversions.close_due_months" in names and "conversions.settle_held_refunds" in names


def test_command_closes_a_past_month_and_refuses_one_not_over(november, capsys):
    call_command("close_month", "2026-10")  # over (with its window) at every clock the suite runs at
    assert capsys.readouterr().out == (
        "2026-10 closed: 1 statements, 1 ledger entries, amount 400 (minor units of CNY)\n"
    )
    call_command("close_month", "2026-10")
    assert "2026-10 was already closed: 1 statements" in capsys.readouterr().out
    with pytest.raises(CommandError, match="^2099-01 cannot be closed before 2099-02-08 00:00"):
        call_command("close_month", "2099-01")
    with pytest.raises(CommandError, match="month must be YYYY-MM, not '2026-13'"):
        call_command("close_month", "2026-13")


def test_command_refuses_while_another_close_runs(november):
    with job_lock("close_month"), pytest.raises(CommandError, match="another close_month is running"):
        call_command("close_month", "2026-10")
    assert not MonthClose.objects.exists()
