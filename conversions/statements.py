"""Monthly statements: what each partner is owed for a month, closed once and never changed.

``close_month`` writes, for one month, a ``Statement`` per partner with ledger entries booked in it (their sum
and count, less what a traffic review holds or reversed, plus what it released: ``conversions.holds``) and the
``MonthClose`` row that keeps any later entry out of it (a late refund is booked on the
first open day instead, so it lands on the next statement). A month may be closed once it has ended and
``STATEMENT_LATENESS_DAYS`` more have passed, so late events of the month still book into it.
"""

import datetime as dt
import logging
from dataclasses import dataclass

from django.db.models import Count, Min, Q, QuerySet, Sum

from conversions.conf import conversion_setting
from conversions.holds import REVERSAL, review_month
from conversions.ledger import books_closed
from conversions.models import LedgerEntry, MonthClose, Statement
from cpsproject.common.locks import job_lock
from cpsproject.common.timeutil import business_tz, local_day

logger = logging.getLogger(__name__)

LOCK_NAME = "close_month"


class MonthNotOver(Exception):
    """The month (with its lateness window) has not ended yet: it cannot be closed."""


@dataclass(frozen=True)
class ClosedMonth:
    """A closed month: its statements, and whether this call closed it or found it closed already."""

    month: dt.date
    statements: int
    amount: int
    rows: int
    newly_closed: bool
    held: int = 0  # kept back for a traffic review (Statement.held_amount), in ``held_rows`` entries
    held_rows: int = 0

    def summary(self) -> str:
        what = "closed" if self.newly_closed else "was already closed"
        held = f", held {self.held} in {self.held_rows} ledger entries" if self.held_rows else ""
        return (
            f"{self.month:%Y-%m} {what}: {self.statements} statements, {self.rows} ledger entries, "
            f"amount {self.amount} (minor units of {conversion_setting('REPORTING_CURRENCY')}){held}"
        )


def next_month(month: dt.date) -> dt.date:
    """The first day of the month after ``month``."""
    return (month.replace(day=1) + dt.timedelta(days=32)).replace(day=1)


def closable_from(month: dt.date) -> dt.datetime:
    """The first moment (business time) ``month`` may be closed: its end plus the lateness window."""
    opens = next_month(month) + dt.timedelta(days=conversion_setting("STATEMENT_LATENESS_DAYS"))
    return dt.datetime.combine(opens, dt.time(), tzinfo=business_tz())


def _existing(month: dt.date) -> ClosedMonth:
    totals = Statement.objects.filter(month=month).aggregate(
        statements=Count("id"),
        amount=Sum("amount"),
        rows=Sum("rows"),
        held=Sum("held_amount"),
        held_rows=Sum("held_rows"),
    )
    return ClosedMonth(
        month,
        totals["statements"],
        totals["amount"] or 0,
        totals["rows"] or 0,
        newly_closed=False,
        held=totals["held"] or 0,
        held_rows=totals["held_rows"] or 0,
    )


def _per_partner(entries: "QuerySet[LedgerEntry]") -> dict[int, tuple[int, int]]:
    rows = entries.values("partner_id").annotate(amount=Sum("amount"), rows=Count("id")).order_by()
    return {row["partner_id"]: (row["amount"], row["rows"]) for row in rows}


def month_figures(month: dt.date) -> dict[int, dict[str, int]]:
    """Per partner, the statement's figures of ``month`` once its reviews are applied: paid (``amount``,
    ``rows``, released ones included), held, released, reversed."""
    booked = LedgerEntry.objects.filter(booked_date__gte=month, booked_date__lt=next_month(month))
    paid = _per_partner(booked.filter(hold__isnull=True).exclude(reason=REVERSAL))
    held = _per_partner(booked.filter(hold__held_from=month))
    released = _per_partner(LedgerEntry.objects.filter(hold__released_in=month))
    # Reversal entries, and the month's entries reversed before it closed (never held from a statement).
    reversed_ = _per_partner(
        booked.filter(Q(reason=REVERSAL) | Q(hold__isnull=False, hold__held_from__isnull=True))
    )
    figures = {}
    for partner_id in paid.keys() | held.keys() | released.keys() | reversed_.keys():
        paid_amount, paid_rows = paid.get(partner_id, (0, 0))
        released_amount, released_rows = released.get(partner_id, (0, 0))
        held_amount, held_rows = held.get(partner_id, (0, 0))
        reversed_amount, reversed_rows = reversed_.get(partner_id, (0, 0))
        figures[partner_id] = {
            "amount": paid_amount + released_amount,
            "rows": paid_rows + released_rows,
            "held_amount": held_amount,
            "held_rows": held_rows,
            "released_amount": released_amount,
            "released_rows": released_rows,
            "reversed_amount": reversed_amount,
            "reversed_rows": reversed_rows,
        }
    return figures


def close_month(*, month: dt.date, now: dt.datetime) -> ClosedMonth:
    """Write ``month``'s statements and close it; closing a closed month changes nothing.

    1. refuse (``MonthNotOver``) before ``closable_from(month)``;
    2. under the job lock, in one transaction holding the ledger gate (no booking in flight, none starting): a
       closed month is returned as it is;
    3. the reviews of partner-days (``conversions.holds.review_month``): entries of an open review held,
       entries held earlier and cleared since released, entries of a confirmed review reversed;
    4. one statement per partner: the sum and count of its entries booked in the month and paid now, plus the
       released ones; beside them what was held and reversed;
    5. the ``MonthClose`` row, committed with them.
    """
    month = month.replace(day=1)
    opens = closable_from(month)
    if now < opens:  # step 1
        raise MonthNotOver(
            f"{month:%Y-%m} cannot be closed before {opens:%Y-%m-%d %H:%M} ({opens.tzinfo}): the month plus "
            f"STATEMENT_LATENESS_DAYS={conversion_setting('STATEMENT_LATENESS_DAYS')} days has not ended"
        )
    with job_lock(LOCK_NAME) as lock, lock.atomic():
        books_closed()  # before any read: the sum below sees every booking that read the month open
        if MonthClose.objects.filter(month=month).exists():  # step 2
            return _existing(month)
        review_month(month, next_month(month), now=now)  # step 3
        statements = Statement.objects.bulk_create(  # step 4
            Statement(partner_id=partner_id, month=month, **figures)
            for partner_id, figures in sorted(month_figures(month).items())
        )
        MonthClose.objects.create(month=month)  # step 5
    closed = ClosedMonth(
        month,
        len(statements),
        sum(s.amount for s in statements),
        sum(s.rows for s in statements),
        newly_closed=True,
        held=sum(s.held_amount for s in statements),
        held_rows=sum(s.held_rows for s in statements),
    )
    logger.info("%s", closed.summary())
    return closed


def due_months(*, now: dt.datetime) -> list[dt.date]:
    """The months that may be closed at ``now`` and are not: the last one due, and any earlier with entries."""
    latest = local_day(now).replace(day=1)
    while closable_from(latest) > now:
        latest = (latest - dt.timedelta(days=1)).replace(day=1)
    first_booked = LedgerEntry.objects.aggregate(first=Min("booked_date"))["first"]
    month = min(latest, first_booked.replace(day=1)) if first_booked else latest
    closed = set(MonthClose.objects.filter(month__gte=month).values_list("month", flat=True))
    due = []
    while month <= latest:
        if month not in closed:
            due.append(month)
        month = next_month(month)
    return due
