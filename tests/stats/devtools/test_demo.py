"""The demo's data: a seeded week of logins and the live trickle ``scripts/demo`` keeps flowing."""

import datetime as dt

import pytest
from django.utils import timezone

from cpsproject.common.timeutil import local_day
from loginlog.selectors import active_user_count
from stats.counters.series import ALL_TRAFFIC, read_series
from stats.devtools.demo import LOGIN_DAYS, live_traffic, seed_demo
from stats.pipeline.consumer import StopFlag
from tests.factories import archived_event_count, create_tree

pytestmark = pytest.mark.django_db


def logins_on(day: dt.date) -> int:
    return sum(active_user_count(user_type=kind, start=day, end=day) for kind in ("client", "office"))


def human_views_last_minutes(minutes: int = 5) -> int:
    now = timezone.now()
    samples = read_series(
        counter=ALL_TRAFFIC, precision=60, start=now - dt.timedelta(minutes=minutes), end=now
    )
    return sum(count for _moment, count in samples)


def test_live_traffic_counts_views_and_logins_tick_by_tick_and_resumes_its_offsets():
    create_tree()
    before = human_views_last_minutes()
    # 50 views/s over ticks of 0.2 s: 10 views a tick; 600 logins/min: 2 a tick.
    result = live_traffic(
        rate=50, logins_per_minute=600, bot_share=0, stop=StopFlag(), ticks=3, tick_seconds=0.2
    )
    assert (result.counted, dict(result.dead)) == (3 * (10 + 2), {})
    assert human_views_last_minutes() - before == 30
    assert archived_event_count() == 36
    today = local_day(timezone.now())
    assert 1 <= logins_on(today) + logins_on(today - dt.timedelta(days=1)) <= 6
    # A second run reads on from the offset stored with the counters: nothing is refused as already counted.
    again = live_traffic(
        rate=50, logins_per_minute=0, bot_share=0, stop=StopFlag(), ticks=1, tick_seconds=0.2
    )
    assert (again.counted, again.stale) == (10, {})


def test_the_demo_seed_leaves_a_week_of_logins(settings, tmp_path):
    settings.RUN_DIR = tmp_path  # the replay files: not shared with a test running beside this one
    seed_demo(events=600)
    today = local_day(timezone.now())
    assert all(logins_on(today - dt.timedelta(days=back)) > 0 for back in range(1, LOGIN_DAYS))
