"""``manage.py health`` on traffic quality: the flush behind what was counted, findings nobody reviews."""

import contextlib
import datetime as dt
import io

import pytest
from django.core.management import call_command

from quality.flush import flush_quality
from quality.health import quality_health
from quality.models import Finding, QualityDay
from tests.factories import at, create_tree, feed, pv_event

pytestmark = [pytest.mark.django_db, pytest.mark.time_machine("2026-11-21T12:40:00+08:00", tick=False)]

DAY = "2026-11-21"


def count_views(code: str, when: str) -> None:
    feed([pv_event(at(f"{DAY} {when}"), code, f"{code}-buyer", ip="203.0.113.7")], now=at(f"{DAY} {when}"))


def test_partner_days_counted_but_never_flushed_are_reported(settings):
    create_tree()
    count_views("A1", "12:00")
    assert quality_health(at(f"{DAY} 12:51")) == [
        "traffic quality: 1 partner-day counted in Redis is not written by the quality flush for more than "
        "10 minutes (last successful quality flush: none on record)"
    ]


def test_the_flush_is_behind_once_a_counted_day_waits_longer_than_the_limit(time_machine):
    create_tree()
    count_views("A1", "12:30")
    flush_quality()  # at 12:40: A1's row written, the success recorded
    assert quality_health(at(f"{DAY} 12:49")) == []
    time_machine.move_to(at(f"{DAY} 12:45"))
    count_views("A2", "12:45")  # counted after the last flush: not written yet, and not late
    assert quality_health(at(f"{DAY} 12:49")) == []
    # No flush since 12:40: at 12:51 A1's row is 11 minutes old and A2 has none.
    assert quality_health(at(f"{DAY} 12:51")) == [
        "traffic quality: 2 partner-days counted in Redis are not written by the quality flush for more than "
        "10 minutes (last successful quality flush: 2026-11-21 12:40)"
    ]
    time_machine.move_to(at(f"{DAY} 12:51"))
    flush_quality()
    assert quality_health(at(f"{DAY} 12:52")) == []


def test_a_reconciled_day_is_not_waiting_for_the_flush(settings):
    settings.CPS_QUALITY = {**settings.CPS_QUALITY, "HEALTH_MAX_FLUSH_DELAY_MINUTES": 30}
    create_tree()
    count_views("A1", "12:30")
    flush_quality()
    assert len(quality_health(at(f"{DAY} 13:11"))) == 1  # 31 minutes
    assert quality_health(at(f"{DAY} 13:09")) == []  # 29 minutes: within the limit set
    QualityDay.objects.update(reconciled_at=at("2026-11-22 00:30"))  # its keys wait for the next flush to go
    assert quality_health(at(f"{DAY} 13:11")) == []


def finding(code_date: tuple[str, str], found: str, status: str = Finding.Status.OPEN) -> None:
    from partners.models import Partner

    code, date = code_date
    made = Finding.objects.create(
        partner=Partner.objects.get(code=code), date=dt.date.fromisoformat(date), rule="repeats", value=0.9,
        threshold=0.3, status=status,
    )  # fmt: skip
    Finding.objects.filter(pk=made.pk).update(found_at=at(found))


def test_open_findings_older_than_the_limit_are_reported(settings):
    create_tree()
    now = at(f"{DAY} 12:40")
    finding(("A1", "2026-11-12"), "2026-11-13 00:10")  # found 8 days ago, open
    finding(("A2", "2026-11-14"), "2026-11-15 00:10")  # 6 days: within the limit of 7
    finding(("B", "2026-11-10"), "2026-11-11 00:10", Finding.Status.CLEARED)  # decided
    assert quality_health(now) == [
        "traffic quality: 1 finding has waited more than 7 days for review (the oldest of 2026-11-12); its "
        "partner-day's commissions stay held"
    ]
    settings.CPS_QUALITY = {**settings.CPS_QUALITY, "HEALTH_MAX_OPEN_FINDING_DAYS": 5}
    assert quality_health(now) == [
        "traffic quality: 2 findings have waited more than 5 days for review (the oldest of 2026-11-12); their "
        "partner-days' commissions stay held"
    ]
    Finding.objects.filter(status=Finding.Status.OPEN).update(status=Finding.Status.CONFIRMED)
    assert quality_health(now) == []


def test_manage_py_health_prints_the_quality_lines():
    create_tree()
    count_views("A1", "12:00")  # 40 minutes ago, never flushed
    out = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("health", stdout=out)
    assert "traffic quality: 1 partner-day counted in Redis is not written" in out.getvalue()
    flush_quality()
    out = io.StringIO()
    with contextlib.suppress(SystemExit):  # other checks (the counters' flush, never run here) may still fail
        call_command("health", stdout=out)
    assert "traffic quality" not in out.getvalue()
