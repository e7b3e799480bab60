"""The exact recount of one business day from the raw-event archive.

Counting a busy day takes minutes, longer than the lock's TTL: the ``reconcile`` job lock is renewed while it
counts, and its write transaction opens and commits only while the lock is still ours.

The write also holds the ``flush`` job lock: a flush reads which days are reconciled and then writes the others
(at 00:30 it still flushes yesterday's late buckets), so a reconcile committing in between would have its exact
numbers overwritten by realtime ones. Counting does not need it; a flush in progress is waited for (a flush takes
seconds), up to ``FLUSH_LOCK_WAIT_SECONDS``.
"""

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from django.utils import timezone

from cpsproject.common.locks import job_lock
from cpsproject.common.timeutil import business_tz, local_day
from cpsproject.common.upsert import upsert_rows
from partners.models import Partner
from stats.jobs import final_days
from stats.jobs.retention import archive_cutoff
from stats.keys import NO_PARTNER
from stats.models import DailyStat, ReconcileDrift
from stats.pipeline.archive import DayCounts, get_archive

logger = logging.getLogger(__name__)

# How long the write waits for a running flush to finish before the reconcile gives up (LockBusy).
FLUSH_LOCK_WAIT_SECONDS = 120.0


# A feature's own recount of a day (conversions: orders; quality: signals), run by ``reconcile`` after the
# counters' commit, under its lock: ``recount(day=, now=)`` returns one line for the command's output.
DayRecount = Callable[..., str]
_day_recounts: dict[str, DayRecount] = {}


def register_day_recount(name: str, recount: DayRecount) -> None:
    _day_recounts[name] = recount


@dataclass
class ReconcileResult:
    day: dt.date
    partner_days: int
    drifting: int
    features: list[str] = field(default_factory=list)  # one line per registered day recount

    def summary(self) -> str:
        return "; ".join(
            [
                f"reconciled {self.day}: {self.partner_days} partner-days, {self.drifting} with drift",
                *self.features,
            ]
        )


def default_reconcile_day(now: dt.datetime | None = None) -> dt.date:
    """Yesterday in the business time zone."""
    return local_day(now or timezone.now()) - dt.timedelta(days=1)


class ReconcileRefused(Exception):
    """The day cannot be recounted: its raw events are gone, or it has not ended yet."""


def reconcile_closed_day(*, day: dt.date, now: dt.datetime | None = None) -> ReconcileResult:
    """Recount ``day`` as ``reconcile`` does, refusing a day that has not ended in the business time zone.

    A reconciled day is final: flush stops writing it. Today's (or a future day's) later events would then stay
    in Redis buckets the pages no longer read, so its numbers would freeze while traffic goes on.
    """
    now = now or timezone.now()
    if day >= (today := local_day(now)):
        raise ReconcileRefused(
            f"cannot reconcile {day}: the day has not ended yet (today is {today} in "
            f"{business_tz().key}); reconcile it from 00:00 tomorrow"
        )
    return reconcile(day=day, now=now)


def _recounted_rows(
    counts: DayCounts,
    *,
    ids: dict[str, int | None],
    existing: dict[int | None, DailyStat],
    day: dt.date,
    now: dt.datetime,
) -> tuple[list[dict], list[dict]]:
    """The day's ``DailyStat`` rows from the exact counts, and its ``ReconcileDrift`` rows against the realtime
    numbers the rows held, for every partner that had traffic or a row."""
    partner_ids = {ids[code] for code in counts.codes() if code in ids} | set(existing)
    code_by_id = {pid: code for code, pid in ids.items()}
    daily, drift = [], []
    for partner_id in partner_ids:
        code = code_by_id.get(partner_id)
        if code is None:
            continue
        own_pv, own_uv = counts.pv_self.get(code, 0), counts.uv_self.get(code, 0)
        # Traffic with no partner has no subtree: its totals are its own numbers.
        pv = counts.pv_tree.get(code, 0) if partner_id else own_pv
        uv = counts.uv_tree.get(code, 0) if partner_id else own_uv
        daily.append(
            {
                "partner_id": partner_id,
                "date": day,
                "pv": pv,
                "pv_self": own_pv,
                "uv": uv,
                "uv_self": own_uv,
                "bot_pv": counts.bot_pv.get(code, 0),
                "reconciled_at": now,
            }
        )
        realtime = existing.get(partner_id)
        drift.append(
            {
                "partner_id": partner_id,
                "date": day,
                "realtime_pv": realtime.realtime_pv if realtime else 0,
                "exact_pv": pv,
                "realtime_uv": realtime.realtime_uv if realtime else 0,
                "exact_uv": uv,
                "reconciled_at": now,
            }
        )
    return daily, drift


def reconcile(*, day: dt.date, now: dt.datetime | None = None) -> ReconcileResult:
    """Recount ``day`` exactly, write it as final, and record the realtime-versus-exact drift.

    Raise ``ReconcileRefused`` for a day past the archive retention: its raw events were purged, and a recount
    of nothing would overwrite its exact numbers with zeros.
    """
    now = now or timezone.now()
    if day < (kept_from := archive_cutoff(local_day(now))):
        raise ReconcileRefused(
            f"cannot reconcile {day}: its raw events are past the archive retention "
            f"(ARCHIVE_RETENTION_DAYS keeps {kept_from} on), so its numbers stay as they are"
        )
    with job_lock("reconcile") as lock:
        counts = get_archive().count_day(day)
        ids: dict[str, int | None] = dict(Partner.objects.values_list("code", "id"))
        ids[NO_PARTNER] = None
        existing = {row.partner_id: row for row in DailyStat.objects.filter(date=day)}
        daily, drift = _recounted_rows(counts, ids=ids, existing=existing, day=day, now=now)
        with (
            job_lock("flush", wait_seconds=FLUSH_LOCK_WAIT_SECONDS) as flush_lock,
            flush_lock.atomic(),  # opens and commits only while both locks are ours
        ):
            lock.ensure_held()
            upsert_rows(DailyStat, daily, key_fields=["partner_id", "date"])
            upsert_rows(ReconcileDrift, drift, key_fields=["partner_id", "date"])
            lock.ensure_held()
        # After the commit: the API's cache of final days was filled from the rows this run replaced.
        final_days.forget_all()
        features = []
        for recount in _day_recounts.values():
            lock.ensure_held()
            features.append(recount(day=day, now=now))
    drifting = sum(1 for d in drift if d["exact_pv"] != d["realtime_pv"] or d["exact_uv"] != d["realtime_uv"])
    result = ReconcileResult(day=day, partner_days=len(daily), drifting=drifting, features=features)
    logger.info(result.summary())
    return result
