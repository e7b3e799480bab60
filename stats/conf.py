"""One accessor for the ``CPS_STATS`` settings dict, read at call time so tests can override it."""

from typing import Any

from django.conf import settings


def stats_setting(name: str) -> Any:
    return settings.CPS_STATS[name]
