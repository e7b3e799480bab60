"""The demo's data: a seeded week of logins and the live trickle ``scripts/demo`` keeps flowing."""

import datetime as dt
import re

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
        rate=50,
        logins_per_minute=600,
        orders_per_minute=0,
        bot_share=0,
        stop=StopFlag(),
        ticks=3,
        tick_seconds=0.2,
    )
    assert (result.counted, dict(result.dead)) == (3 * (10 + 2), {})
    assert human_views_last_minutes() - before == 30
    assert archived_event_count() == 36
    today = local_day(timezone.now())
    assert 1 <= logins_on(today) + logins_on(today - dt.timedelta(days=1)) <= 6
    # A second run reads on from the offset stored with the counters: nothing is refused as already counted.
    again = live_traffic(
        rate=50,
        logins_per_minute=0,
        orders_per_minute=0,
        bot_share=0,
        stop=StopFlag(),
        ticks=1,
        tick_seconds=0.2,
    )
    assert (again.counted, again.stale) == (10, {})


def test_the_demo_seed_leaves_a_week_of_logins(settings, tmp_path):
    settings.RUN_DIR = tmp_path  # the replay files: not shared with a test running beside this one
    seed_demo(events=600)
    today = local_day(timezone.now())
    assert all(logins_on(today - dt.timedelta(days=back)) > 0 for back in range(1, LOGIN_DAYS))


def test_the_demo_start_up_lines_say_what_was_loaded_and_what_was_kept(settings, tmp_path):
    first = seed_demo(events=600, files=tmp_path)
    today = local_day(timezone.now())
    loaded = next(line for line in first if line.startswith("today "))
    assert loaded.startswith(f"today {today}: loaded now (counted "), loaded
    assert first[0] == "partners: 17 (17 loaded now)"
    pv_uv = loaded.rsplit("): ", 1)[1]  # "PV n, UV m", as measured after loading
    again = seed_demo(events=600, files=tmp_path)
    assert again[:2] == ["partners: 17 (0 loaded now)", "superuser demo/demo: kept"]
    assert f"today {today}: kept: {pv_uv}" in again
    # 600 page views a day (a few are bad on purpose) and 12 logins a day over the week: all of them in Redis.
    redis_line = next(line for line in again if line.startswith("Redis "))
    assert re.search(
        r"; kept the [\d,]+ events counted before this start \([\d,]+ login, [\d,]+ order, [\d,]+ pv\)$",
        redis_line,
    )


def test_a_demo_whose_redis_came_back_empty_says_what_is_gone(settings, tmp_path):
    first = seed_demo(events=600, files=tmp_path)
    pv = re.search(r"PV ([\d,]+),", first[-1]).group(1)
    settings.CPS_REDIS_PREFIX += "-empty"  # the same database, and a Redis that kept nothing
    again = seed_demo(events=600, files=tmp_path)
    today = local_day(timezone.now())
    assert next(line for line in again if line.startswith("Redis ")).endswith(
        "; nothing counted in it before this start"
    )
    gone = next(line for line in again if line.startswith("today "))
    assert re.fullmatch(
        rf"today {today}: PV {pv}, UV [\d,]+ kept in the database only; Redis came back empty, so what it had "
        r"not flushed, the rankings, the last hour and the logins are gone \(to start the demo afresh, delete "
        r"its database .+\)",
        gone,
    ), gone
