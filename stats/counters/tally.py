"""A batch's page views counted once per partner and second: what every page-view counter fans out from.

The PV buckets, the rankings and the series each count a partition's views per partner and second, then fan
out to ancestors, buckets, slots and samples. Counting the batch once for all three, instead of once each,
makes one pass over the events where each would make its own.
"""

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from cpsproject.common.timeutil import BatchClock
from partners.selectors import Lineage
from stats.pipeline.events import PageView

# (lineage, epoch second); lineage None is traffic with no partner
PartnerSecond = tuple[Lineage | None, int]


@dataclass(frozen=True, slots=True)
class PageViewTally:
    humans: dict[PartnerSecond, int]  # page views by people
    bots: dict[PartnerSecond, int]  # page views by bots (counted apart, never in UV, rankings or series)
    visitors: dict[tuple[Lineage | None, str], set[str]]  # (lineage, yyyyMMdd business day) -> human openids
    clock: BatchClock  # the batch's business-time arithmetic, its caches shared by the counters

    @classmethod
    def of(cls, views: Iterable[PageView]) -> "PageViewTally":
        views = views if isinstance(views, list) else list(views)
        clock = BatchClock()
        per_second = Counter([(view.lineage, view.seconds, view.is_bot) for view in views])
        humans: dict[PartnerSecond, int] = {}
        bots: dict[PartnerSecond, int] = {}
        for (lineage, seconds, is_bot), n in per_second.items():
            (bots if is_bot else humans)[(lineage, seconds)] = n
        day_of = {seconds: clock.day_stamp(seconds) for seconds in {seconds for _, seconds, _ in per_second}}
        visitors: defaultdict[tuple[Lineage | None, str], set[str]] = defaultdict(set)
        for view in views:
            if view.openid and not view.is_bot:
                visitors[(view.lineage, day_of[view.seconds])].add(view.openid)
        return cls(humans, bots, dict(visitors), clock)

    def seconds(self) -> set[int]:
        """The distinct seconds the batch's views fall in: a batch of live traffic spans a few of them."""
        return {seconds for _, seconds in self.humans} | {seconds for _, seconds in self.bots}
