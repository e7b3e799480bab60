"""Every django-q2 schedule of the product, registered idempotently by ``manage.py setup_schedules``.

Daily and weekly jobs use django-q2's DAILY/WEEKLY types anchored at a business-time ``next_run``, so no cron
parser is needed and the run time follows ``CPS_TIME_ZONE``.
"""

import datetime as dt
from dataclasses import dataclass

from django.utils import timezone
from django_q.models import Schedule

from stats.timeutil import business_tz


@dataclass(frozen=True)
class Job:
    name: str
    func: str
    schedule_type: str
    minutes: int | None = None
    at: dt.time | None = None  # business time of day for DAILY and WEEKLY
    weekday: int | None = None  # 0 = Monday, for WEEKLY


JOBS = [
    Job("stats.flush", "stats.tasks.flush_task", Schedule.MINUTES, minutes=1),
    Job("stats.maintain_windows", "stats.tasks.maintain_windows_task", Schedule.MINUTES, minutes=1),
    Job(
        "stats.reconcile_yesterday", "stats.tasks.reconcile_yesterday_task", Schedule.DAILY, at=dt.time(0, 30)
    ),
    Job("loginlog.sync", "loginlog.tasks.sync_logins_task", Schedule.WEEKLY, at=dt.time(3, 0), weekday=0),
]


def next_run(job: Job, now: dt.datetime) -> dt.datetime:
    """Return the next business-time moment ``job`` is due (now for minute jobs)."""
    if job.at is None:
        return now
    local = now.astimezone(business_tz())
    candidate = local.replace(hour=job.at.hour, minute=job.at.minute, second=0, microsecond=0)
    if job.weekday is not None:
        candidate += dt.timedelta(days=(job.weekday - candidate.weekday()) % 7)
    step = dt.timedelta(days=7 if job.weekday is not None else 1)
    while candidate <= local:
        candidate += step
    return candidate


def setup_schedules(*, now: dt.datetime | None = None) -> list[str]:
    """Create or update every job's schedule by name; return the names."""
    now = now or timezone.now()
    for job in JOBS:
        Schedule.objects.update_or_create(
            name=job.name,
            defaults={
                "func": job.func,
                "schedule_type": job.schedule_type,
                "minutes": job.minutes,
                "next_run": next_run(job, now),
                "repeats": -1,
            },
        )
    return [job.name for job in JOBS]
