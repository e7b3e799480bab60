"""Raw events and dead letters past their retention are purged, in chunks; reconciled days keep their numbers."""

import datetime as dt
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from cpsproject.common import jobruns
from cpsproject.common.timeutil import local_day
from stats.jobs import retention
from stats.jobs.reconcile import ReconcileRefused, reconcile
from stats.models import DailyStat, DeadLetter
from stats.pipeline.archive import MongoArchive, SqlArchive
from tests.conftest import ROOT, subprocess_env
from tests.factories import at, create_tree, daily, feed, pv_event

pytestmark = pytest.mark.django_db

OLD_DAY = dt.date(2026, 10, 1)
KEPT_DAY = dt.date(2026, 11, 1)
NOW = at("2026-11-21 12:00")  # 35 days back is 2026-10-17: October 1 is past retention, November 1 is not


def test_purge_drops_raw_events_past_retention_in_chunks_and_keeps_reconciled_days(monkeypatch):
    create_tree()
    old = [pv_event(at("2026-10-01 10:00"), "A1", f"u{n}") for n in range(7)]
    kept = [pv_event(at("2026-11-01 10:00"), "A1", f"u{n}") for n in range(3)]
    feed(old, now=at("2026-10-01 12:00"))
    feed(kept, now=at("2026-11-01 12:00"))
    reconcile(day=OLD_DAY, now=at("2026-10-02 01:00"))
    monkeypatch.setattr(retention, "CHUNK", 2)  # several chunks for 7 events
    result = retention.purge_expired(now=NOW)
    assert result.raw_events == 7
    assert [len(list(SqlArchive().events(day))) for day in (OLD_DAY, KEPT_DAY)] == [0, 3]
    assert DailyStat.objects.get(partner__code="A", date=OLD_DAY).pv == 7  # the reconciled day stays


@pytest.mark.time_machine("2026-11-21T12:00:00+08:00", tick=False)  # dead letters are received at NOW
def test_purge_drops_dead_letters_past_their_retention():
    feed([b"{bad json", b"[1]"], now=NOW)
    DeadLetter.objects.filter(reason="not_json").update(received_at=NOW - dt.timedelta(days=91))
    assert jobruns.last_success("purge") is None
    assert retention.purge_expired(now=NOW).dead_letters == 1
    assert jobruns.last_success("purge") is not None  # the metrics and the dashboard show the last purge
    assert list(DeadLetter.objects.values_list("reason", flat=True)) == ["not_object"]


def test_mongodb_archive_purges_by_day_and_has_a_ttl_index():
    # mongomock applies TTL indexes against the real clock, so this test's events are relative to it.
    from django.utils import timezone

    from cpsproject.common.timeutil import local_day
    from partners.selectors import partner_lineages
    from stats.pipeline.events import parse_event

    create_tree()
    now = timezone.now()
    archive = MongoArchive("mongomock://localhost", "cps_retention")
    lineages = partner_lineages()
    old, new = now - dt.timedelta(days=50), now - dt.timedelta(days=1)
    archive.store(
        [
            parse_event(pv_event(old, "A1", event_id="old"), lineages=lineages, now=old),
            parse_event(pv_event(new, "A1", event_id="new"), lineages=lineages, now=new),
        ]
    )
    archive.purge_before(retention.archive_cutoff(local_day(now)))
    assert [d["_id"] for d in archive.collection.find({}, {"_id": 1})] == ["new"]
    ttl = [i for i in archive.collection.index_information().values() if "expireAfterSeconds" in i]
    assert [i["expireAfterSeconds"] for i in ttl] == [35 * 86400]


@pytest.mark.time_machine("2026-11-21T12:00:00+08:00", tick=False)
def test_a_purged_reconciled_day_keeps_its_numbers_and_refuses_a_new_reconcile():
    create_tree()
    feed([pv_event(at("2026-10-01 10:00"), "A1", f"u{n % 3}") for n in range(7)], now=at("2026-10-01 12:00"))
    feed([pv_event(at("2026-10-01 11:00"), "A2", "u9")], now=at("2026-10-01 12:00"))
    reconcile(day=OLD_DAY, now=at("2026-10-02 01:00"))
    assert retention.purge_expired(now=NOW).raw_events == 8
    with pytest.raises(CommandError) as refused:
        call_command("reconcile", "--date", "2026-10-01")
    assert str(refused.value) == (
        "cannot reconcile 2026-10-01: its raw events are past the archive retention "
        "(ARCHIVE_RETENTION_DAYS keeps 2026-10-17 on), so its numbers stay as they are"
    )
    row = daily("A", OLD_DAY)
    assert (row.pv, row.uv, row.pv_self, row.reconciled_at) == (8, 4, 0, at("2026-10-02 01:00"))
    assert (daily("A1", OLD_DAY).pv, daily("A1", OLD_DAY).uv) == (7, 3)


@pytest.mark.parametrize(
    ("day", "refused"),
    [(dt.date(2026, 10, 16), True), (dt.date(2026, 10, 17), False), (dt.date(2026, 11, 20), False)],
)
def test_reconcile_refuses_exactly_the_days_past_retention(day, refused):
    if refused:
        with pytest.raises(ReconcileRefused):
            reconcile(day=day, now=NOW)
    else:
        assert reconcile(day=day, now=NOW).day == day


@pytest.mark.django_db(transaction=True)
@pytest.mark.real_clock
def test_the_reconcile_command_refuses_an_expired_day_with_one_line(settings):
    day = local_day(timezone.now()) - dt.timedelta(days=36)
    run = subprocess.run(
        [sys.executable, "manage.py", "reconcile", "--date", day.isoformat()],
        cwd=ROOT,
        env=subprocess_env(settings),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1
    assert run.stderr.startswith(f"CommandError: cannot reconcile {day}: its raw events are past")
    assert len(run.stderr.strip().splitlines()) == 1
