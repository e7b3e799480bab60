"""Spikes and drops: each partner's views of the last hour against the median of the same hour on the 7 days
before, from the views per quarter hour the flush keeps (``QualityDay.quarters``).

"The last hour" is the last four complete quarter hours before ``now``, in business time, so a broken link of
a large partner shows within 15 minutes of the quarter it started in (plus the minute of the flush).
"""

import datetime as dt
import statistics
from dataclasses import dataclass

from cpsproject.common.timeutil import business_tz
from quality.conf import quality_setting
from quality.models import QualityDay

QUARTER = dt.timedelta(minutes=15)
BASELINE_DAYS = 7


@dataclass(frozen=True)
class TrafficChange:
    partner: str
    direction: str  # "spike" or "drop"
    views: int  # the last hour's
    median: float  # the median of the same hour on the 7 days before

    @property
    def factor(self) -> float | None:
        """How many times the median (a spike) or how many times under it (a drop); None over a zero median."""
        if self.direction == "spike":
            return self.views / self.median if self.median else None
        return self.median / self.views if self.views else None


def _slots(now: dt.datetime, days_back: int) -> list[tuple[dt.date, int]]:
    """The (business day, quarter index) of the last hour's four quarters, ``days_back`` days earlier."""
    local = now.astimezone(business_tz())
    current = local.replace(minute=local.minute - local.minute % 15, second=0, microsecond=0)
    slots = []
    for n in range(1, 5):
        start = (current - n * QUARTER) - dt.timedelta(days=days_back)  # wall-clock arithmetic
        slots.append((start.date(), (start.hour * 60 + start.minute) // 15))
    return slots


def traffic_changes(*, now: dt.datetime) -> list[TrafficChange]:
    """Return the partners whose last hour is beyond ``SPIKE_FACTOR`` of its median, biggest first."""
    slots = {back: _slots(now, back) for back in range(BASELINE_DAYS + 1)}
    dates = {date for day_slots in slots.values() for date, _ in day_slots}
    quarters: dict[str, dict[dt.date, list[int]]] = {}
    for code, date, counts in QualityDay.objects.filter(date__in=dates).values_list(
        "partner__code", "date", "quarters"
    ):
        quarters.setdefault(code, {})[date] = counts

    def hour(code: str, back: int) -> int:
        days = quarters[code]
        return sum(days[d][q] if len(days.get(d) or []) > q else 0 for d, q in slots[back])

    factor, least = quality_setting("SPIKE_FACTOR"), quality_setting("SPIKE_MIN_VIEWS")
    changes = []
    for code in quarters:
        views = hour(code, 0)
        median = statistics.median(hour(code, back) for back in range(1, BASELINE_DAYS + 1))
        if max(views, median) < least:
            continue
        if views > factor * median:
            changes.append(TrafficChange(code, "spike", views, median))
        elif views * factor < median:
            changes.append(TrafficChange(code, "drop", views, median))
    return sorted(changes, key=lambda c: (-abs(c.views - c.median), c.partner))
