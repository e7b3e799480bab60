"""``manage.py health``: "ok" and exit 0 when healthy, else one line per problem and exit 1."""

import datetime as dt
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.utils import timezone

from cpsproject.common import jobruns
from cpsproject.common.timeutil import local_day
from stats.models import DailyStat
from tests.conftest import ROOT, free_port, subprocess_env
from tests.factories import at, create_tree, feed, pv_event
from tests.ops.conftest import produce

pytestmark = pytest.mark.django_db

NOW = at("2026-11-22 03:00")
YESTERDAY = dt.date(2026, 11, 21)


def health(capsys) -> tuple[int, list[str]]:
    """Run the command in this process; return its exit code and output lines."""
    try:
        call_command("health")
        code = 0
    except SystemExit as exit:
        code = exit.code
    return code, capsys.readouterr().out.splitlines()


def without_kafka(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.startswith("consumer lag unknown: ")]


@pytest.mark.time_machine("2026-11-22T03:00:00+08:00", tick=False)
def test_every_problem_is_one_line_and_the_exit_code_is_one(settings, capsys, kafka_down):
    settings.CPS_STATS = {**settings.CPS_STATS, "HEALTH_MAX_DEAD_LETTERS_TODAY": 2}
    create_tree()
    feed([pv_event(at("2026-11-21 12:00"), "A1", "u1")], now=at("2026-11-21 12:00"))
    jobruns.record_success("flush", duration=1.0, now=NOW - dt.timedelta(minutes=20))
    DailyStat.objects.create(partner=None, date=YESTERDAY, pv=1)  # flushed, never reconciled
    feed([b"{", b"{x", b"[]"], now=NOW)  # received now: today's dead letters
    code, lines = health(capsys)
    assert code == 1
    assert lines[0] == (
        f"consumer lag unknown: Kafka at {kafka_down} did not answer "
        f"(KafkaTimeoutError: Unable to bootstrap from {kafka_down})"
    )
    assert lines[1:] == [
        "no successful flush for 20 minutes, since 2026-11-22 02:40 (threshold 10 minutes)",
        "yesterday (2026-11-21) is not reconciled, due by 02:00",
        "3 dead letters today (threshold 2): not_json 2, not_object 1",
        # an app's line (quality), after the pipeline's: A1's view was counted, never flushed to its row
        "traffic quality: 1 partner-day counted in Redis is not written by the quality flush for more than "
        "10 minutes (last successful quality flush: none on record)",
    ]


@pytest.mark.parametrize(
    ("moment", "flushed", "problems"),
    [
        ("2026-11-22T01:59:00+08:00", "2026-11-22T01:49:00+08:00", []),  # reconcile not due yet; 10 min ok
        ("2026-11-22T02:00:00+08:00", "2026-11-22T01:49:00+08:00", ["flush", "reconcile"]),
    ],
)
def test_thresholds_are_inclusive_limits(moment, flushed, problems, capsys, kafka_down, time_machine):
    time_machine.move_to(dt.datetime.fromisoformat(moment), tick=False)
    jobruns.record_success("flush", duration=1.0, now=dt.datetime.fromisoformat(flushed))
    code, lines = health(capsys)
    found = [("flush" if "flush" in line else "reconcile") for line in without_kafka(lines)]
    assert (code, found) == (1, problems)


@pytest.mark.time_machine("2026-11-22T03:00:00+08:00", tick=False)
def test_a_day_without_traffic_is_reconciled_by_a_run_today(capsys, kafka_down):
    jobruns.record_success("flush", duration=1.0, now=NOW)
    assert without_kafka(health(capsys)[1]) == ["yesterday (2026-11-21) is not reconciled, due by 02:00"]
    jobruns.record_success("reconcile", duration=1.0, now=at("2026-11-22 00:31"))
    assert without_kafka(health(capsys)[1]) == []


def test_no_flush_on_record_is_a_problem(capsys, kafka_down):
    assert "no successful flush on record (threshold 10 minutes)" in health(capsys)[1]


def healthy_now(settings) -> None:
    """A flush that just succeeded and yesterday reconciled (a row for traffic with no partner)."""
    now = timezone.now()
    jobruns.record_success("flush", duration=0.5, now=now)
    DailyStat.objects.create(partner=None, date=local_day(now) - dt.timedelta(days=1), reconciled_at=now)


@pytest.mark.django_db(transaction=True)
@pytest.mark.kafka
def test_healthy_prints_ok_and_lag_over_the_threshold_is_a_problem(kafka_settings, capsys):
    settings = kafka_settings
    healthy_now(settings)
    assert health(capsys) == (0, ["ok"])
    settings.CPS_STATS = {**settings.CPS_STATS, "HEALTH_MAX_LAG": 2}
    produce(settings, {1: [b"m1", b"m2"]})
    assert health(capsys) == (0, ["ok"])
    produce(settings, {1: [b"m3"]})
    assert health(capsys) == (1, [f"consumer lag of {settings.KAFKA_TOPIC}[1] is 3 messages (threshold 2)"])


@pytest.mark.django_db(transaction=True)
@pytest.mark.kafka
def test_the_command_exit_code_as_a_monitoring_system_sees_it(kafka_settings):
    settings = kafka_settings

    def run() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", "health"],
            cwd=ROOT,
            env=subprocess_env(settings),
            capture_output=True,
            text=True,
            timeout=120,
        )

    failing = run()
    # In English, as every command speaks, whatever the product's language (zh-hans by default).
    assert (failing.returncode, failing.stdout.splitlines()[0]) == (
        1,
        "no successful flush on record (threshold 10 minutes)",
    )
    healthy_now(settings)
    healthy = run()
    assert (healthy.returncode, healthy.stdout, healthy.stderr) == (0, "ok\n", "")


def run_health(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "health"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("service", ["redis", "database", "kafka"])
def test_a_service_out_of_reach_is_one_line_and_exit_one_without_a_traceback(service, settings, kafka_down):
    port = free_port()
    broken = {
        "redis": {"REDIS_URL": f"redis://127.0.0.1:{port}/0"},
        "database": {"DATABASE_URL": f"mysql://root@127.0.0.1:{port}/cps"},
        "kafka": {},  # kafka_down: nothing listens on the product's Kafka address
    }[service]
    ran = run_health(subprocess_env(settings, CPS_LANGUAGE_CODE="en", **broken))
    lines = ran.stdout.splitlines()
    expected = {
        "redis": f"Redis at 127.0.0.1:{port} did not answer (Error 111 connecting to 127.0.0.1:{port}. "
        "Connection refused.)",
        "database": "the database did not answer (Can't connect to server on '127.0.0.1' (",
        "kafka": f"consumer lag unknown: Kafka at {kafka_down} did not answer "
        f"(KafkaTimeoutError: Unable to bootstrap from {kafka_down})",
    }[service]
    assert ran.returncode == 1
    # Nothing on stderr: no traceback, and none of kafka-python's per-attempt connection errors.
    assert ran.stderr == ""
    # One line for the service, however many checks needed it (mysqlclient's errno varies: 111 or 115).
    assert len([line for line in lines if line.startswith(expected)]) == 1
    assert service == "database" or expected in lines


@pytest.mark.time_machine("2026-11-22T03:00:00+08:00", tick=False)
def test_a_consumer_that_held_no_partition_too_long_is_a_problem(settings, capsys, kafka_down):
    import time

    from stats.pipeline import metrics

    settings.CPS_STATS = {**settings.CPS_STATS, "HEALTH_MAX_UNASSIGNED_SECONDS": 60}
    now = time.time()
    for member, since in [("host-a:11", now - 61.5), ("host-b:12", now - 59), ("host-c:13", None)]:
        metrics.record_membership(
            group=settings.KAFKA_GROUP_ID, member=member, held_none_since=since, now=now
        )
    code, lines = health(capsys)
    assert code == 1
    assert [line for line in lines if line.startswith("consumer host")] == [
        f"consumer host-a:11 has held no partition of {settings.KAFKA_TOPIC} for 61 s (threshold 60 s)"
    ]
