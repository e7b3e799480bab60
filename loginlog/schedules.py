"""The django-q2 job of ``loginlog`` (registered by ``manage.py setup_schedules``)."""

import datetime as dt

from django_q.models import Schedule

from cpsproject.common.schedules import Job

JOBS = [
    Job("loginlog.sync", "loginlog.tasks.sync_logins_task", Schedule.WEEKLY, at=dt.time(3, 0), weekday=0),
]
