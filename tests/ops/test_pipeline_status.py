"""The shared read module of pipeline figures (stats.read.pipeline_status) on real Redis, SQL and Kafka."""

import datetime as dt
import logging
import subprocess
import sys
import time

import pytest
from django.core.management import call_command
from django.utils import timezone

from cpsproject.common.locks import job_lock
from loginlog.services import sync_logins
from stats.jobs.flush import flush
from stats.jobs.reconcile import reconcile
from stats.jobs.retention import purge_task
from stats.jobs.tasks import flush_task, maintain_windows_task, probe_kafka_task
from stats.models import DeadLetter, ReconcileDrift
from stats.pipeline.ingest import Message, process_batch
from stats.read import pipeline_status
from stats.read.pipeline_status import Drift, PartitionLag
from tests.conftest import ROOT, free_port, subprocess_env
from tests.factories import at, create_tree, feed, pv_event
from tests.ops.conftest import produce

pytestmark = pytest.mark.django_db


@pytest.fixture
def kafka_down_address() -> str:
    return f"127.0.0.1:{free_port()}"


DAY = dt.date(2026, 11, 21)
NOON = at("2026-11-21 12:00")
LATER = at("2026-11-21 13:00")


@pytest.mark.time_machine("2026-11-21T13:00:00+08:00", tick=False)
def test_jobs_record_their_last_success_from_commands_and_tasks():
    create_tree()
    feed([pv_event(NOON, "A1", "u1")], now=NOON)
    assert pipeline_status.last_job_success("flush") is None
    assert pipeline_status.last_job_duration("flush") is None
    call_command("flush")
    assert pipeline_status.last_job_success("flush") == LATER
    assert 0 <= pipeline_status.last_job_duration("flush") < 30
    reconcile(day=DAY)  # writes under the flush lock too: that is no flush run
    sync_logins()
    maintain_windows_task()
    purge_task()
    for job in ("reconcile", "sync_logins", "maintain_windows", "purge"):
        assert pipeline_status.last_job_success(job) == LATER, job


def test_a_task_records_its_success_and_a_skipped_or_failed_run_records_nothing(redis_client):
    with job_lock("flush"):  # another flush is running
        assert flush_task().startswith("skipped")
        assert pipeline_status.last_job_success("flush") is None
    with pytest.raises(RuntimeError), job_lock("reconcile"):
        raise RuntimeError("the job failed half-way")
    assert pipeline_status.last_job_success("reconcile") is None
    before = timezone.now().replace(microsecond=0)
    flush_task()
    assert before <= pipeline_status.last_job_success("flush") <= timezone.now()


def test_dead_letters_by_reason_counts_the_business_day():
    feed([b"{x", b"{y", b"[1]", b""], now=NOON)
    letters = DeadLetter.objects.order_by("offset")
    moments = [
        at("2026-11-21 00:00"),
        at("2026-11-21 23:59:59"),
        at("2026-11-21 23:59"),
        at("2026-11-22 00:00"),
    ]
    for letter, moment in zip(letters, moments, strict=True):
        DeadLetter.objects.filter(pk=letter.pk).update(received_at=moment)
    assert pipeline_status.dead_letters_by_reason(day=DAY) == {"not_json": 2, "not_object": 1}
    assert pipeline_status.dead_letters_by_reason(day=DAY + dt.timedelta(days=1)) == {"empty": 1}
    assert pipeline_status.dead_letters_by_reason(day=DAY - dt.timedelta(days=1)) == {}
    # The Redis counts the consumer wrote with the counters: every dead letter, whenever received.
    assert pipeline_status.dead_letters_counted() == {"empty": 1, "not_json": 2, "not_object": 1}


def test_last_reconcile_drift_sums_the_latest_day():
    tree = create_tree()
    assert pipeline_status.last_reconcile_drift() is None
    rows = [
        (tree["A"], DAY - dt.timedelta(days=1), 100, 50, 100, 1),  # an older day: not summed
        (tree["A"], DAY, 10, 8, 5, 6),
        (tree["B"], DAY, 3, 4, 2, 2),
        (None, DAY, 7, 7, 0, 4),
    ]
    for partner, day, realtime_pv, exact_pv, realtime_uv, exact_uv in rows:
        ReconcileDrift.objects.create(
            partner=partner,
            date=day,
            realtime_pv=realtime_pv,
            exact_pv=exact_pv,
            realtime_uv=realtime_uv,
            exact_uv=exact_uv,
            reconciled_at=LATER,
        )
    assert pipeline_status.last_reconcile_drift() == Drift(date=DAY, pv_drift=-2 + 1 + 0, uv_drift=1 + 0 + 4)


def test_a_reconcile_records_the_drift_of_events_counted_twice():
    create_tree()
    feed([pv_event(NOON, "B", "u1", event_id="dup"), pv_event(NOON, "B", "u2")], now=NOON)
    feed([pv_event(NOON, "B", "u1", event_id="dup")], now=NOON)  # sent twice: realtime counts it twice
    flush(now=LATER)
    reconcile(day=DAY, now=LATER)
    # Only B's row has traffic: realtime PV 3 against 2 exact; UV 2 both ways.
    assert pipeline_status.last_reconcile_drift() == Drift(date=DAY, pv_drift=-1, uv_drift=0)


def test_drift_of_a_hierarchy_counts_each_event_once_not_once_per_level():
    create_tree()
    dup = pv_event(NOON, "A1a", "u1", event_id="dup")
    feed([dup, pv_event(NOON, "A1a", "u2"), pv_event(NOON, "B", "u3")], now=NOON)
    feed([dup], now=NOON)  # counted twice in realtime by A1a, A1 and A alike
    flush(now=LATER)
    reconcile(day=DAY, now=LATER)
    # One view too many: the roots A and B and the no-partner traffic hold it once; every level would say -3.
    assert pipeline_status.last_reconcile_drift() == Drift(date=DAY, pv_drift=-1, uv_drift=0)


def test_pending_flush_keys_counts_bucket_and_uv_keys():
    create_tree()
    assert pipeline_status.pending_flush_keys() == 0
    # A1a's view is a bucket for A1a, A1 and A, and UV keys for A1a (self), A1 (below), A (below); the view
    # with no partner is one bucket and one UV key (self) under "~site".
    feed([pv_event(NOON, "A1a", "u1"), pv_event(NOON, "A1a", "u2"), pv_event(NOON, None, "u3")], now=NOON)
    assert pipeline_status.pending_flush_keys() == (3 + 1) + (3 + 1)
    # Another day's view: one more bucket per partner of the chain and a second day of UV keys.
    feed([pv_event(NOON + dt.timedelta(days=1), "B", "u1")], now=NOON + dt.timedelta(days=1))
    assert pipeline_status.pending_flush_keys() == (3 + 1 + 1) + (3 + 1 + 1)


@pytest.mark.django_db(transaction=True)
@pytest.mark.kafka
def test_consumer_lag_is_end_offsets_minus_stored_offsets(kafka_settings, kafka_down_address):
    settings = kafka_settings
    create_tree()
    now = timezone.now()
    values = [pv_event(now, "A1", f"u{n}") for n in range(8)]
    produce(settings, {0: values[:5], 1: values[5:]})
    assert pipeline_status.consumer_lag() == []  # nothing seen yet: a page asks Redis, never Kafka
    probed = pipeline_status.probe_consumer_lag()
    seen = probed[0].seen_at
    assert abs((seen - timezone.now()).total_seconds()) < 5
    assert probed == [
        PartitionLag(partition=0, stored_offset=None, end_offset=5, lag=5, seen_at=seen),
        PartitionLag(partition=1, stored_offset=None, end_offset=3, lag=3, seen_at=seen),
        PartitionLag(partition=2, stored_offset=None, end_offset=0, lag=0, seen_at=seen),
    ]
    # The consumer counts the first two messages of partition 0 and stores offset 2 with the counters.
    messages = [Message(settings.KAFKA_TOPIC, 0, offset, values[offset]) for offset in (0, 1)]
    process_batch(messages, group=settings.KAFKA_GROUP_ID, now=now)
    # Read from what the probe recorded, with Kafka gone: the stored offset moved, the end offsets are as seen.
    settings.KAFKA_BOOTSTRAP_SERVERS = kafka_down_address
    assert pipeline_status.consumer_lag()[0] == PartitionLag(
        partition=0, stored_offset=2, end_offset=5, lag=3, seen_at=seen.replace(microsecond=0)
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.kafka
@pytest.mark.real_clock
def test_the_consumer_records_the_end_offsets_its_fetches_saw(kafka_settings, kafka_down_address):
    settings = kafka_settings
    produce(settings, {0: [b"m0", b"m1", b"m2"], 2: [b"m3"]})
    before = timezone.now().replace(microsecond=0)
    ran = subprocess.run(
        [sys.executable, "manage.py", "consume", "--exit-when-idle", "2"],
        cwd=ROOT,
        env=subprocess_env(settings),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    settings.KAFKA_BOOTSTRAP_SERVERS = kafka_down_address  # the figures come from Redis alone
    lags = {row.partition: row for row in pipeline_status.consumer_lag()}
    assert {p: (row.stored_offset, row.end_offset, row.lag) for p, row in lags.items()} == {
        0: (3, 3, 0),
        1: (None, 0, 0),
        2: (1, 1, 0),
    }
    assert all(before <= row.seen_at <= timezone.now() for row in lags.values())


def test_the_lag_probe_gives_up_within_two_seconds_in_one_line_of_log_when_kafka_is_out_of_reach(
    kafka_down, caplog
):
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(pipeline_status.KafkaUnavailable):
            pipeline_status.probe_consumer_lag()
        assert probe_kafka_task().startswith(f"Kafka probe failed: Kafka at {kafka_down} did not answer")
    assert time.monotonic() - started < 5  # two probes
    # kafka-python logs an ERROR per connection attempt; a probe keeps them out of the log.
    assert [r.getMessage() for r in caplog.records if r.name.startswith("kafka")] == []
    assert [r.getMessage().split(":")[0] for r in caplog.records if r.levelno >= logging.WARNING] == [
        "Kafka probe"
    ]
    probe = pipeline_status.last_kafka_probe()
    assert probe.error.startswith(f"Kafka at {kafka_down} did not answer")
    assert pipeline_status.consumer_lag() == []


@pytest.mark.time_machine("2026-11-21T13:00:00+08:00", tick=False)
def test_the_flush_lock_reconcile_writes_under_is_no_flush_run():
    create_tree()
    feed([pv_event(NOON, "A1", "u1")], now=NOON)
    reconcile(day=DAY)
    assert pipeline_status.last_job_success("reconcile") == LATER
    assert pipeline_status.last_job_success("flush") is None
