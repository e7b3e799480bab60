"""django-q2 schedules: each app declares its jobs in its own ``schedules.py`` (a ``JOBS`` list, as an app
declares its admin in ``admin.py``); ``manage.py setup_schedules`` registers every app's jobs idempotently.

Daily and weekly jobs use django-q2's DAILY/WEEKLY types anchored at a business-time ``next_run``, so no cron
parser is needed and the run time follows ``CPS_TIME_ZONE``.
"""

import datetime as dt
import importlib
import importlib.util
from dataclasses import dataclass

from django.apps import apps
from django.utils import timezone
from django_q.models import Schedule

from cpsproject.common.timeutil import business_tz


@dataclass(frozen=True)
class Job:
    name: str
    func: str
    schedule_type: str
    minutes: int | None = None
    at: dt.time | None = None  # business time of day for DAILY and WEEKLY
    weekday: int | None = None  # 0 = Monday, for WEEKLY


def app_jobs() -> list[Job]:
    """Every installed app's ``schedules.JOBS``, in app order."""
    jobs: list[Job] = []
    for app in apps.get_app_configs():
        if importlib.util.find_spec(f"{app.name}.schedules") is not None:
            jobs.extend(importlib.import_module(f"{app.name}.schedules").JOBS)
    return jobs


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
    jobs = app_jobs()
    for job in jobs:
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
    return [job.name for job in jobs]
