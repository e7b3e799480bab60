"""Functions django-q2 runs on schedule (see ``stats.schedules``); each returns a one-line summary."""

from stats.jobs.flush import flush
from stats.jobs.reconcile import default_reconcile_day, reconcile


def flush_task() -> str:
    return flush().summary()


def reconcile_yesterday_task() -> str:
    # Flush first so the drift compares the exact recount with every realtime count of the day.
    flush()
    return reconcile(day=default_reconcile_day()).summary()


def maintain_windows_task() -> str:
    from stats.counters.rankings import rotate_all
    from stats.counters.series import clean_series

    return f"{rotate_all()}; {clean_series()}"
