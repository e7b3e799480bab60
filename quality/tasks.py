"""Functions django-q2 runs on schedule (see ``quality.schedules``); each returns a one-line summary."""

from cpsproject.common.locks import run_as_task
from quality.flush import flush_quality


@run_as_task
def flush_quality_task() -> str:
    """Write the partner-days' signals Redis holds to their rows and judge the rules."""
    return flush_quality().summary()
