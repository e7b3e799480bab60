"""A simulated week with known honest and bad partners (quality.simulation): exactly the bad ones are flagged,
with the values their traffic was made with, live and after reconcile; the spike and the drop show."""

import datetime as dt
from zlib import crc32

import pytest
from django.core.management import call_command

from quality.flush import flush_quality
from quality.models import Finding, QualityDay
from quality.networks import import_networks
from quality.simulation import (
    EXPECTED_CHANGES,
    EXPECTED_FINDINGS,
    LISTED_NETWORKS,
    PARTNERS,
    looked_at,
    simulated_week,
)
from quality.spikes import traffic_changes
from stats.jobs.reconcile import reconcile
from stats.pipeline.ingest import Message, process_batch
from tests.factories import at, create_partner

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 21)
PARTITIONS = 3


def consume_week() -> None:
    """Every day's events through the real pipeline, keyed by buyer over three partitions, in batches."""
    offsets = dict.fromkeys(range(PARTITIONS), 0)
    for day, events in simulated_week(DAY).items():
        now = looked_at(DAY) if day == DAY else at(f"{day} 23:30")
        for start in range(0, len(events), 1500):
            messages = []
            for event in events[start : start + 1500]:
                partition = crc32(event.key.encode()) % PARTITIONS
                messages.append(Message("sim-topic", partition, offsets[partition], event.value))
                offsets[partition] += 1
            result = process_batch(messages, group="sim", now=now)
            assert (result.counted, dict(result.dead)) == (len(messages), {})


def findings() -> dict[tuple[str, str], float]:
    return {(f.partner.code, f.rule): f.value for f in Finding.objects.select_related("partner")}


def test_a_simulated_week_flags_exactly_the_bad_partners_live_and_after_reconcile():
    for code in PARTNERS:
        create_partner(code)
    import_networks(LISTED_NETWORKS)
    consume_week()

    flush_quality(now=looked_at(DAY))
    assert findings() == EXPECTED_FINDINGS
    assert set(Finding.objects.values_list("status", flat=True)) == {"open"}
    changes = {c.partner: (c.direction, c.views, c.median) for c in traffic_changes(now=looked_at(DAY))}
    assert changes == EXPECTED_CHANGES
    rows = {row.partner.code: row for row in QualityDay.objects.filter(date=DAY).select_related("partner")}
    assert (rows["RELOADER"].repeat_pv, rows["RELOADER"].top_addresses) == (199, [["198.18.0.7", 200]])
    assert (rows["ROTATOR"].distinct_ips, rows["ROTATOR"].distinct_networks, rows["ROTATOR"].listed_pv) == (
        256,
        1,
        256,
    )
    assert (rows["H1"].pv, rows["H1"].automated_pv, rows["H1"].repeat_pv, rows["H1"].orders) == (400, 8, 0, 8)

    result = reconcile(day=DAY, now=at("2026-11-22 01:00"))
    assert (
        "traffic quality of 2026-11-21: 9 partner-days recounted, 0 differ from the live figures, 6 rules"
        in (result.summary())
    )
    assert findings() == EXPECTED_FINDINGS
    assert not QualityDay.objects.filter(date=DAY, reconciled_at__isnull=True).exists()


def test_the_command_writes_the_week_and_prints_what_it_must_raise(tmp_path, capsys):
    call_command(
        "simulate_quality",
        "--date",
        "2026-11-21",
        "--to",
        f"file:{tmp_path / 'week.jsonl'}",
        "--networks",
        str(tmp_path / "networks.csv"),
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"wrote {sum(len(e) for e in simulated_week(DAY).values())} events of 8 days")
    assert "finding RELOADER repeats 0.995" in out
    assert "spike SPIKER: 600 views in the last hour against a median of 120" in out
    assert (tmp_path / "networks.csv").read_text() == LISTED_NETWORKS
    assert len((tmp_path / "week.jsonl").read_bytes().splitlines()) == sum(
        len(e) for e in simulated_week(DAY).values()
    )
