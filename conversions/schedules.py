"""The django-q2 jobs of ``conversions`` (registered by ``manage.py setup_schedules``)."""

import datetime as dt

from django_q.models import Schedule

from cpsproject.common.schedules import Job

JOBS = [
    # A refund that came before its order waits in HeldRefund: the consumer applies it when the order comes;
    # this catches one whose order another consumer recorded meanwhile and gives up on those held too long.
    Job(
        "conversions.settle_held_refunds",
        "conversions.tasks.settle_held_refunds_task",
        Schedule.HOURLY,
    ),
    # Daily, and a no-op on most days: a month closes on the first day its lateness window allows (the 8th
    # with the default 7 days), whatever STATEMENT_LATENESS_DAYS says, and a day the cluster was down is
    # caught up the next day.
    Job(
        "conversions.close_due_months",
        "conversions.tasks.close_due_months_task",
        Schedule.DAILY,
        at=dt.time(1, 0),
    ),
]
