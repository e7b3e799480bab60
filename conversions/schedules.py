"""The django-q2 jobs of ``conversions`` (registered by ``manage.py setup_schedules``)."""

import datetime as dt

from django_q.models import Schedule

from cpsproject.common.schedules import Job

JOBS = [
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
