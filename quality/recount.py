"""The exact recount of a day's signals from the raw-event archive, run by ``reconcile`` after the counters'.

Every signal is recomputed from the archived ``pv`` events of the day (each event id once): repeats exactly,
over all the partitions and in time order, where the live count is an estimate. Orders are read as recorded
(``conversions`` recounts its own). The listed networks are the
list of now. The rows become final (``reconciled_at``): the flush leaves them alone and deletes the day's keys.
"""

import datetime as dt
import math
from dataclasses import dataclass

import orjson
from django.db import transaction

from cpsproject.common.locks import job_lock
from cpsproject.common.timeutil import BatchClock
from cpsproject.common.upsert import upsert_rows
from partners.models import Partner
from quality.conf import quality_setting
from quality.flush import LOCK, day_row, with_orders, written_days
from quality.models import QualityDay
from quality.networks import listed_ranges
from quality.rules import judge_days
from quality.tally import DayTally, count_repeats, quarter_of
from stats.plugins import archived_events

# How long the recount waits for a running quality flush (which takes seconds).
FLUSH_WAIT_SECONDS = 120.0


@dataclass
class QualityRecount:
    day: dt.date
    partner_days: int = 0
    drifting: int = 0
    broken: int = 0

    def summary(self) -> str:
        return (
            f"traffic quality of {self.day}: {self.partner_days} partner-days recounted, {self.drifting} differ "
            f"from the live figures, {self.broken} rules broken"
        )


def _text(payload: dict, name: str) -> str:
    value = payload.get(name)
    return value if isinstance(value, str) else ""


def day_tallies(day: dt.date) -> dict[str, DayTally]:
    """Return each partner's tally of ``day`` from the archive (own page views, automated ones included)."""
    listed = listed_ranges()
    clock = BatchClock()
    tallies: dict[str, DayTally] = {}
    for event in archived_events(day):
        if event.type != "pv" or not event.path:
            continue
        payload = orjson.loads(event.payload)
        tally = tallies.get(event.partner)
        if tally is None:
            tally = tallies[event.partner] = DayTally()
        seconds = math.floor(event.ts.timestamp())
        tally.add(
            seconds=seconds,
            quarter=quarter_of(seconds, clock.offset(seconds)),
            openid=event.openid,
            ua=_text(payload, "ua"),
            ip=_text(payload, "ip"),
            bot=event.is_bot,
            listed=listed,
        )
    return tallies


def recount(*, day: dt.date, now: dt.datetime) -> str:
    """Recount ``day``'s signals from the archive, store them as final, judge the rules; return one line."""
    window = quality_setting("REPEAT_SECONDS")
    tallies = day_tallies(day)
    ids = dict(Partner.objects.filter(code__in=tallies).values_list("code", "id"))
    result = QualityRecount(day)
    with job_lock(LOCK, wait_seconds=FLUSH_WAIT_SECONDS) as lock:
        existing = {row.partner_id: row for row in QualityDay.objects.filter(date=day)}
        rows = []
        for code, tally in tallies.items():
            if code in ids:
                rows.append(
                    {
                        "partner_id": ids[code],
                        "date": day,
                        **day_row(tally, repeats=count_repeats(tally.views, window)),
                    }
                )
        counted = {row["partner_id"] for row in rows}
        # A day the live count had and the archive has not: its views were taken back.
        rows += [
            {"partner_id": pid, "date": day, **day_row(DayTally(), repeats=0)}
            for pid in existing
            if pid not in counted
        ]
        rows = with_orders(rows, {day}, skip=set())
        for row in rows:
            row["reconciled_at"] = now
            live = existing.get(row["partner_id"])
            if live is None or any(
                getattr(live, name) != row[name]
                for name in ("pv", "automated_pv", "repeat_pv", "distinct_ips", "listed_pv")
            ):
                result.drifting += 1
        lock.ensure_held()
        with transaction.atomic():
            upsert_rows(QualityDay, rows, key_fields=["partner_id", "date"])
            result.broken = judge_days(written_days(rows))
    result.partner_days = len(rows)
    return result.summary()
