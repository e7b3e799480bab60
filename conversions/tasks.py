"""Functions django-q2 runs on schedule (see ``conversions.schedules``); each returns a one-line summary."""

from django.utils import timezone

from conversions.held import settle_held_refunds
from conversions.statements import close_month, due_months
from cpsproject.common.locks import run_as_task


@run_as_task
def close_due_months_task() -> str:
    """Close every month whose lateness window has passed and that is not closed yet (usually none)."""
    now = timezone.now()
    closed = [close_month(month=month, now=now).summary() for month in due_months(now=now)]
    return "; ".join(closed) or "no month to close"


@run_as_task
def settle_held_refunds_task() -> str:
    """Apply held refunds whose order has been recorded since; give up on those held too long."""
    applied, given_up = settle_held_refunds()
    return f"held refunds: {applied} applied, {given_up} given up as dead letters"
