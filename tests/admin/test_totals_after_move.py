"""The statistics list's PV total over several days after a partner moved under another."""

import pytest

from partners.services import partner_move
from stats.jobs.flush import flush
from tests.admin.conftest import CLOCK
from tests.admin.test_lists import DAILY, totals
from tests.factories import at, create_tree, feed, pv_event

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine(CLOCK, tick=False)]


def test_a_root_moved_under_another_keeps_its_earlier_days_in_the_total(boss):
    tree = create_tree()
    day_1, day_2 = at("2026-11-20 12:00"), at("2026-11-21 12:00")
    feed([pv_event(day_1, "B", f"u{n}") for n in range(5)], now=day_1)
    flush(now=at("2026-11-20 13:00"))
    feed([pv_event(day_2, "A2", f"u{n}") for n in range(3)], now=day_2)
    flush(now=at("2026-11-21 13:00"))
    partner_move(partner=tree["B"], new_parent=tree["A2"])
    html = boss.get(DAILY, {"date__gte": "2026-11-20", "date__lte": "2026-11-21"}).content.decode()
    # Day 1: B was a root, its 5 PV are no ancestor's row of that day. Day 2: A's 3 hold A2's 3.
    assert totals(html)["pv"] == "8"
