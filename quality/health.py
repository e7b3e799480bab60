"""The ``manage.py health`` lines of ``quality`` (registered through ``stats.plugins.register_health_check``).

Two problems an operator acts on: the quality flush falling behind what the consumers counted (restart
qcluster, read the ``quality.flush`` task's error), and findings nobody reviews (their commissions stay held
from every statement: tell the reviewers).
"""

import datetime as dt

from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django_redis import get_redis_connection

from cpsproject.common import jobruns
from cpsproject.common.timeutil import parse_stamp_day, to_local
from quality import keys
from quality.conf import quality_setting
from quality.flush import LOCK
from quality.models import Finding, QualityDay


def quality_health(now: dt.datetime) -> list[str]:
    """Return one line per problem of traffic quality; none when it is healthy."""
    return [*_flush_behind(now), *_unreviewed(now)]


def _counted_days() -> set[tuple[str, dt.date]]:
    """The (code, day) of every partner-day the consumers counted into Redis and the flush has not deleted."""
    client = get_redis_connection("default")
    counted = set()
    for member in client.sscan_iter(keys.index(), count=1000):
        day, _tag, code = keys.parse_index_member(member.decode() if isinstance(member, bytes) else member)
        counted.add((code, parse_stamp_day(day)))
    return counted


def _behind_days(counted: set[tuple[str, dt.date]], *, since: dt.datetime, last: dt.datetime | None) -> int:
    """How many counted partner-days the flush has not written since ``since``.

    Every flush rewrites each counted day not reconciled yet (its ``updated_at``), so an older row is behind;
    a day without a row is behind only when the last successful flush, ``last``, is older (else it was
    counted after that flush).
    """
    rows = {
        (code, date): (updated_at, reconciled_at)
        for code, date, updated_at, reconciled_at in QualityDay.objects.filter(
            date__in={date for _, date in counted}
        ).values_list("partner__code", "date", "updated_at", "reconciled_at")
    }
    flushed_since = last is not None and last >= since
    behind = 0
    for key in counted:
        if key not in rows:
            behind += not flushed_since
        elif rows[key][1] is None and rows[key][0] < since:
            behind += 1
    return behind


def _flush_behind(now: dt.datetime) -> list[str]:
    counted = _counted_days()
    if not counted:
        return []
    limit = quality_setting("HEALTH_MAX_FLUSH_DELAY_MINUTES")
    last = jobruns.last_success(LOCK)
    behind = _behind_days(counted, since=now - dt.timedelta(minutes=limit), last=last)
    if not behind:
        return []
    return [
        ngettext(
            "traffic quality: %(count)d partner-day counted in Redis is not written by the quality flush for "
            "more than %(limit)d minutes (last successful quality flush: %(last)s)",
            "traffic quality: %(count)d partner-days counted in Redis are not written by the quality flush "
            "for more than %(limit)d minutes (last successful quality flush: %(last)s)",
            behind,
        )
        % {
            "count": behind,
            "limit": limit,
            "last": f"{to_local(last):%Y-%m-%d %H:%M}" if last else _("none on record"),
        }
    ]


def _unreviewed(now: dt.datetime) -> list[str]:
    days = quality_setting("HEALTH_MAX_OPEN_FINDING_DAYS")
    waiting = Finding.objects.filter(
        status=Finding.Status.OPEN, found_at__lt=now - dt.timedelta(days=days)
    ).order_by("date")
    count = waiting.count()
    if not count:
        return []
    oldest = waiting.values_list("date", flat=True).first()
    return [
        ngettext(
            "traffic quality: %(count)d finding has waited more than %(days)d days for review (the oldest of "
            "%(oldest)s); its partner-day's commissions stay held",
            "traffic quality: %(count)d findings have waited more than %(days)d days for review (the oldest "
            "of %(oldest)s); their partner-days' commissions stay held",
            count,
        )
        % {"count": count, "days": days, "oldest": oldest.isoformat() if oldest else "-"}
    ]
