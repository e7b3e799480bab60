"""Is the pipeline healthy? The problems ``manage.py health`` reports, judged from ``pipeline_status``.

Each check compares one figure with a threshold from ``CPS_STATS`` (``HEALTH_*``, defaults in
``stats/conf.py``) and says in one line what is wrong, so a monitoring system can page with it as it is.
"""

import datetime as dt
from collections.abc import Callable
from functools import partial
from urllib.parse import urlsplit

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone
from django.utils.translation import gettext as _
from redis.exceptions import RedisError

from cpsproject.common.timeutil import local_day, to_local
from stats.conf import stats_setting
from stats.models import DailyStat
from stats.read import pipeline_status

# Checks other apps add (``stats.plugins.register_health_check``): check(now) -> one line per problem.
_app_checks: dict[str, Callable[[dt.datetime], list[str]]] = {}


def register_health_check(name: str, check: Callable[[dt.datetime], list[str]]) -> None:
    """Register (or replace) an app's check, run by ``health_problems`` after the pipeline's own."""
    _app_checks[name] = check


def health_problems(*, now: dt.datetime | None = None) -> list[str]:
    """Return one line per problem of the pipeline; an empty list when it is healthy.

    A service out of reach is one problem, named once, however many checks needed it.
    """
    now = now or timezone.now()
    checks: list[Callable[[], list[str]]] = [
        _lag,
        lambda: _flush(now),
        lambda: _reconcile(now),
        lambda: _dead_letters(now),
        _unassigned,
        *(partial(check, now) for check in _app_checks.values()),
    ]
    problems: list[str] = []
    for check in checks:
        try:
            found = check()
        except RedisError as exc:
            found = [
                _("Redis at %(url)s did not answer (%(error)s)") % {"url": _redis_address(), "error": exc}
            ]
        except DatabaseError as exc:
            # mysqlclient's errors are (code, message): the message says it.
            found = [
                _("the database did not answer (%(error)s)")
                % {"error": _one_line(exc.args[-1] if exc.args else exc)}
            ]
        problems.extend(line for line in found if line not in problems)
    return problems


def _redis_address() -> str:
    # Never the password a redis:// URL may carry.
    url = urlsplit(settings.REDIS_URL)
    return f"{url.hostname}:{url.port or 6379}"


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def kafka_in_use() -> bool:
    """Whether this installation counts from Kafka: an empty ``KAFKA_BOOTSTRAP_SERVERS`` says it does not.

    The demo counts its own trickle and replayed files, and says so this way: a health check that asked a broker
    nobody runs would fail on every run.
    """
    return bool(settings.KAFKA_BOOTSTRAP_SERVERS.strip())


def _lag() -> list[str]:
    if not kafka_in_use():
        return []
    try:
        lags = pipeline_status.probe_consumer_lag()
    except pipeline_status.KafkaUnavailable as exc:
        return [_("consumer lag unknown: %(error)s") % {"error": exc}]
    limit = stats_setting("HEALTH_MAX_LAG")
    return [
        _("consumer lag of %(topic)s[%(partition)d] is %(lag)d messages (threshold %(limit)d)")
        % {"topic": settings.KAFKA_TOPIC, "partition": row.partition, "lag": row.lag, "limit": limit}
        for row in lags
        if row.lag > limit
    ]


def _flush(now: dt.datetime) -> list[str]:
    limit = stats_setting("HEALTH_MAX_FLUSH_AGE_MINUTES")
    last = pipeline_status.last_job_success("flush")
    if last is None:
        return [_("no successful flush on record (threshold %(limit)d minutes)") % {"limit": limit}]
    minutes = int((now - last).total_seconds() // 60)
    if minutes <= limit:
        return []
    return [
        _("no successful flush for %(minutes)d minutes, since %(last)s (threshold %(limit)d minutes)")
        % {"minutes": minutes, "last": f"{to_local(last):%Y-%m-%d %H:%M}", "limit": limit}
    ]


def _reconcile(now: dt.datetime) -> list[str]:
    due_hour = stats_setting("HEALTH_RECONCILE_DUE_HOUR")
    if to_local(now).hour < due_hour:
        return []
    today = local_day(now)
    yesterday = today - dt.timedelta(days=1)
    rows = DailyStat.objects.filter(date=yesterday)
    if rows.filter(reconciled_at__isnull=False).exists():
        return []
    # A day without traffic has no rows to mark: a reconcile that ran today is all there is to see.
    last = pipeline_status.last_job_success("reconcile")
    if not rows.exists() and last is not None and local_day(last) == today:
        return []
    return [
        _("yesterday (%(day)s) is not reconciled, due by %(hour)02d:00")
        % {"day": yesterday, "hour": due_hour}
    ]


def _dead_letters(now: dt.datetime) -> list[str]:
    limit = stats_setting("HEALTH_MAX_DEAD_LETTERS_TODAY")
    by_reason = pipeline_status.dead_letters_by_reason(day=local_day(now))
    total = sum(by_reason.values())
    if total <= limit:
        return []
    reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(by_reason.items(), key=lambda kv: -kv[1]))
    return [
        _("%(total)d dead letters today (threshold %(limit)d): %(reasons)s")
        % {"total": total, "limit": limit, "reasons": reasons}
    ]


def _unassigned() -> list[str]:
    limit = stats_setting("HEALTH_MAX_UNASSIGNED_SECONDS")
    return [
        _("consumer %(member)s has held no partition of %(topic)s for %(seconds)d s (threshold %(limit)d s)")
        % {"member": member, "topic": settings.KAFKA_TOPIC, "seconds": seconds, "limit": limit}
        for member, seconds in sorted(pipeline_status.consumers_without_partitions().items())
        if seconds > limit
    ]
