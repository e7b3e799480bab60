"""The django-q2 jobs of ``quality`` (registered by ``manage.py setup_schedules``)."""

from django_q.models import Schedule

from cpsproject.common.schedules import Job

JOBS = [
    # As often as the counters' flush: a partner's day of signals is at most a minute or two old in the admin.
    Job("quality.flush", "quality.tasks.flush_quality_task", Schedule.MINUTES, minutes=1),
]
