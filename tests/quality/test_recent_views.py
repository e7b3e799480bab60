"""The consumer's memory of a partition's recent views (``quality.counting.RecentViews``): repeats of views in
time order stay exact from batch to batch while what it holds stays about two windows of the partition's
buyers, whatever a client's clock says."""

from quality.counting import RecentViews
from quality.tally import DayTally

START = 1795226400  # 2026-11-21 10:00:00 +08:00
MIDNIGHT = START - 10 * 3600


def held(recent: RecentViews) -> int:
    return sum(len(buyers) for generation in (recent.newer, recent.older) for buyers in generation.values())


def test_twenty_batches_keep_their_repeats_exact_and_memory_to_about_two_windows():
    recent = RecentViews()
    repeats = []
    for n in range(20):  # one batch every 20 s of event time, 100 new buyers each
        moment = START + 20 * n
        tally = DayTally()
        tally.views = [(moment, f"new-{n}-{i}") for i in range(100)]
        tally.views.append((moment + 10, "b"))  # every 20 s: a repeat from its second view on
        if n % 2 == 0:
            tally.views.append((moment + 5, "c"))  # every 40 s: never a repeat
        if n == 0:
            tally.views.append((moment + 500, "clock-ahead"))  # a client's clock 8 minutes fast
        recent.count_repeats({("A1", "20261121"): tally}, window=30, until=moment + 15)
        repeats.append(tally.repeats)
    assert repeats == [0] + [1] * 19
    # The last three batches' new buyers and b's and c's latest views: 2,000 buyers were seen.
    assert 300 <= held(recent) <= 303


def test_views_of_two_days_of_one_partner_are_not_compared():
    recent = RecentViews()
    before, after = DayTally(), DayTally()
    before.views, after.views = [(MIDNIGHT - 10, "b")], [(MIDNIGHT + 5, "b")]  # 23:59:50 and 00:00:05
    recent.count_repeats({("A1", "20261120"): before, ("A1", "20261121"): after}, window=30, until=START)
    assert (before.repeats, after.repeats) == (0, 0)
