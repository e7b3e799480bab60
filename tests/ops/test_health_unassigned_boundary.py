"""``manage.py health``: a consumer is a problem once it has held no partition for MORE than the threshold."""

import time

import pytest

from stats.pipeline import metrics
from tests.ops.test_health import health

pytestmark = pytest.mark.django_db


@pytest.mark.time_machine("2026-11-22T03:00:00+08:00", tick=False)
def test_exactly_the_threshold_is_not_a_problem_and_half_a_second_more_is(settings, capsys, kafka_down):
    settings.CPS_STATS = {**settings.CPS_STATS, "HEALTH_MAX_UNASSIGNED_SECONDS": 60}
    now = time.time()  # a whole second (the clock stands still): now - 60 is exact
    for member, since in [("host-a:11", now - 60), ("host-b:12", now - 60.5), ("host-c:13", now - 59.5)]:
        metrics.record_membership(
            group=settings.KAFKA_GROUP_ID, member=member, held_none_since=since, now=now
        )
    code, lines = health(capsys)
    assert code == 1
    assert [line for line in lines if line.startswith("consumer host")] == [
        f"consumer host-b:12 has held no partition of {settings.KAFKA_TOPIC} for 60 s (threshold 60 s)"
    ]
