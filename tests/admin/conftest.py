"""A two-day scenario for the admin pages: yesterday flushed and reconciled, this morning still in Redis.

The clock is fixed at 2026-11-22 09:00 (Shanghai). Yesterday noon: A1 viewed by u1 u2 u3 u1, A1a by u4 twice,
B by u1, traffic with no partner by u9 twice. This morning 08:30: A1 by u1 and u5, no partner by u1.
"""

import datetime as dt

import pytest
from django.contrib.auth import get_user_model

from stats.jobs.flush import flush
from stats.jobs.reconcile import reconcile
from tests.factories import at, create_tree, feed, pv_event

CLOCK = "2026-11-22T09:00:00+08:00"
YESTERDAY = dt.date(2026, 11, 21)
TODAY = dt.date(2026, 11, 22)
NOON = at("2026-11-21 12:00")
MORNING = at("2026-11-22 08:30")


@pytest.fixture
def two_days():
    tree = create_tree()
    feed(
        [
            pv_event(NOON, "A1", "u1"),
            pv_event(NOON, "A1", "u2"),
            pv_event(NOON, "A1", "u3"),
            pv_event(NOON + dt.timedelta(minutes=7), "A1", "u1"),
            pv_event(NOON, "A1a", "u4"),
            pv_event(NOON, "A1a", "u4"),
            pv_event(NOON, "B", "u1"),
            pv_event(NOON, None, "u9"),
            pv_event(NOON, None, "u9"),
        ],
        now=NOON,
    )
    flush(now=at("2026-11-21 13:00"))
    reconcile(day=YESTERDAY, now=at("2026-11-22 00:40"))
    feed(
        [pv_event(MORNING, "A1", "u1"), pv_event(MORNING, "A1", "u5"), pv_event(MORNING, None, "u1")],
        now=MORNING,
    )
    return tree


@pytest.fixture
def boss(client):
    get_user_model().objects.create_superuser("boss", "boss@example.com", "pw")
    client.login(username="boss", password="pw")
    return client
