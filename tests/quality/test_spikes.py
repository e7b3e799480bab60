"""Spikes and drops: the last hour of a partner against the median of the same hour on the 7 days before, on
the dashboard and in /metrics."""

import datetime as dt

import pytest
from django.test import Client

from quality.models import QualityDay
from quality.spikes import traffic_changes
from tests.factories import at, create_staff, create_tree

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine("2026-11-21T10:07:00+08:00", tick=False)]

NOW = at("2026-11-21 10:07")
TODAY = dt.date(2026, 11, 21)


def hour_of_views(partner, day: dt.date, per_quarter: int, *, quarters=(36, 37, 38, 39)) -> None:
    """``per_quarter`` views in each of 09:00-10:00's quarters (36-39) of ``day``."""
    counts = [0] * 96
    for quarter in quarters:
        counts[quarter] = per_quarter
    QualityDay.objects.update_or_create(partner=partner, date=day, defaults={"quarters": counts})


@pytest.fixture
def week(settings):
    tree = create_tree()
    for back in range(1, 8):
        day = TODAY - dt.timedelta(days=back)
        hour_of_views(tree["A1"], day, 50 + back)  # 204..228 an hour: median 4 x 54 = 216
        hour_of_views(tree["A2"], day, 100)  # 400 an hour
        hour_of_views(tree["B"], day, 10)  # 40 an hour
        hour_of_views(tree["A"], day, 20)  # 80 an hour
    hour_of_views(tree["A1"], TODAY, 200)  # 800: 3.7x the median, a spike
    hour_of_views(tree["A2"], TODAY, 30)  # 120: under a third of 400, a drop
    hour_of_views(tree["B"], TODAY, 40)  # 160 against 40: 4x, a spike
    hour_of_views(tree["A"], TODAY, 5)  # 20 against 80: a quarter, but neither reaches 100 views
    return tree


def test_spikes_and_drops_are_measured_against_the_same_hour_of_the_week_before(week):
    changes = [(c.partner, c.direction, c.views, c.median) for c in traffic_changes(now=NOW)]
    assert changes == [("A1", "spike", 800, 216), ("A2", "drop", 120, 400), ("B", "spike", 160, 40)]


def test_the_hour_is_the_last_four_complete_quarters(week):
    # At 10:14 the quarter 10:00-10:15 is still open: the same hour. At 10:15 the hour is 09:15-10:15.
    assert len(traffic_changes(now=at("2026-11-21 10:14:59"))) == 3
    later = {c.partner: (c.views, c.median) for c in traffic_changes(now=at("2026-11-21 10:15"))}
    assert later["A1"] == (600, 162)


def test_the_dashboard_and_metrics_show_them(week):
    client = Client()
    client.force_login(create_staff())
    panel = client.get("/admin/").content.decode()
    assert 'id="quality-changes"' in panel
    assert 'data-partner="A1" class="spike"' in panel and 'data-partner="A2" class="drop"' in panel
    metrics = client.get("/metrics").content.decode()
    assert (
        'cps_quality_traffic_change_views{direction="spike",partner="A1",series="last_hour"} 800.0' in metrics
    )
    assert (
        'cps_quality_traffic_change_views{direction="drop",partner="A2",series="baseline"} 400.0' in metrics
    )
    assert 'cps_quality_open_findings{rule="automated"} 0.0' in metrics
