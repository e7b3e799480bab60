"""The django-q2 jobs of ``stats`` (registered by ``manage.py setup_schedules``)."""

import datetime as dt

from django_q.models import Schedule

from cpsproject.common.schedules import Job

JOBS = [
    Job("stats.flush", "stats.jobs.tasks.flush_task", Schedule.MINUTES, minutes=1),
    Job("stats.maintain_windows", "stats.jobs.tasks.maintain_windows_task", Schedule.MINUTES, minutes=1),
    # Keeps the recorded end offsets (consumer lag) fresh while no consumer runs; bounded, off every request.
    Job("stats.probe_kafka", "stats.jobs.tasks.probe_kafka_task", Schedule.MINUTES, minutes=1),
    Job(
        "stats.reconcile_yesterday",
        "stats.jobs.tasks.reconcile_yesterday_task",
        Schedule.DAILY,
        at=dt.time(0, 30),
    ),
    Job("stats.purge_expired", "stats.jobs.retention.purge_task", Schedule.DAILY, at=dt.time(4, 0)),
]
