"""Management commands speak English, whatever language the product's pages speak (issue 31, items 6 and 9).

Their lines go to operators' terminals, logs and monitoring beside exception texts and library messages that
are English: a command that translated its own words around them printed half Chinese, half English. Each
failing path runs as an operator runs it (a process of its own), with the product in Chinese, its default.
"""

import datetime as dt
import re
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from cpsproject.common import jobruns
from stats.jobs.tasks import probe_kafka_task
from stats.pipeline.lag import last_probe
from tests.conftest import ROOT, free_port, subprocess_env
from tests.ops.test_health import healthy_now

pytestmark = pytest.mark.django_db(transaction=True)

CJK = re.compile(r"[\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]")


def run(settings, *args: str, **env: str) -> tuple[int, list[str]]:
    """Run ``manage.py args`` with the product in Chinese; return its exit code and every line it printed."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=subprocess_env(settings, CPS_LANGUAGE_CODE="zh-hans", **env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, (done.stdout + done.stderr).splitlines()


def assert_english(lines: list[str]) -> None:
    assert lines, "the command printed nothing"
    assert [line for line in lines if CJK.search(line)] == [], lines


def test_health_with_kafka_out_of_reach_speaks_english(settings):
    kafka = f"127.0.0.1:{free_port()}"
    code, lines = run(settings, "health", KAFKA_BOOTSTRAP_SERVERS=kafka)
    assert code == 1
    assert_english(lines)
    assert lines[0] == (
        f"consumer lag unknown: Kafka at {kafka} did not answer "
        f"(KafkaTimeoutError: Unable to bootstrap from {kafka})"
    )
    assert "no successful flush on record (threshold 10 minutes)" in lines


def test_health_with_redis_out_of_reach_speaks_english(settings):
    port = free_port()
    code, lines = run(settings, "health", REDIS_URL=f"redis://127.0.0.1:{port}/0", KAFKA_BOOTSTRAP_SERVERS="")
    assert code == 1
    assert_english(lines)
    assert lines == [
        f"Redis at 127.0.0.1:{port} did not answer (Error 111 connecting to 127.0.0.1:{port}. Connection refused.)"
    ]


def test_flush_with_redis_down_is_one_english_line(settings):
    port = free_port()
    code, lines = run(settings, "flush", REDIS_URL=f"redis://127.0.0.1:{port}/0")
    assert code == 1
    assert_english(lines)
    assert lines == [
        f"CommandError: flush failed, Redis is unavailable: ConnectionError: Error 111 connecting to "
        f"127.0.0.1:{port}. Connection refused."
    ]


def test_a_bad_import_speaks_english_and_names_its_lines(settings, tmp_path):
    path = tmp_path / "partners.csv"
    path.write_text("code,name,parent\nA,Alpha,MISSING\nB,,\n", encoding="utf-8")
    code, lines = run(settings, "import_partners", str(path))
    assert code == 1
    assert_english(lines)
    assert lines == [
        "line 2: parent MISSING is neither in the file nor an existing partner",
        "line 3: name is empty",
        f"CommandError: {path}: 2 bad row(s); nothing was imported",
    ]


def test_simulate_to_kafka_without_a_broker_is_one_line_and_exit_one(settings):
    code, lines = run(
        settings, "simulate", "--events", "10", KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{free_port()}"
    )
    assert code == 1
    assert len(lines) == 1 and lines[0].startswith("CommandError: no Kafka broker answered at "), lines
    assert lines[0].endswith("within 5 s; nothing was sent")


def test_reconcile_refused_and_a_bad_date_speak_english(settings):
    for args in (["reconcile", "--date", "2026-13-01"], ["reconcile", "--date", "2999-01-01"]):
        code, lines = run(settings, *args)
        assert code == 1
        assert_english(lines)
        assert len(lines) == 1 and lines[0].startswith("CommandError: "), lines


def test_health_of_an_installation_without_kafka_passes_and_says_so(settings, capsys):
    # The demo: KAFKA_BOOTSTRAP_SERVERS empty, its trickle and replays counted without a broker.
    settings.KAFKA_BOOTSTRAP_SERVERS = ""
    healthy_now(settings)
    call_command("health")
    assert capsys.readouterr().out.splitlines() == [
        "ok (no Kafka: KAFKA_BOOTSTRAP_SERVERS is empty; consumer lag not checked)"
    ]
    jobruns.record_success("flush", duration=0.5, now=timezone.now() - dt.timedelta(hours=1))
    with pytest.raises(SystemExit) as exit:
        call_command("health")
    assert exit.value.code == 1
    assert capsys.readouterr().out.splitlines()[0].startswith("no successful flush for 60 minutes")


def test_consume_from_kafka_in_an_installation_without_kafka_says_what_to_do(settings):
    code, lines = run(settings, "consume", KAFKA_BOOTSTRAP_SERVERS="")
    assert (code, lines) == (
        1,
        [
            "CommandError: KAFKA_BOOTSTRAP_SERVERS is empty: this installation uses no Kafka; use --source file:PATH"
        ],
    )


def test_consume_refuses_processes_it_cannot_run_in_one_line(settings):
    assert run(settings, "consume", "--processes", "0") == (
        1,
        ["CommandError: --processes must be at least 1"],
    )
    with pytest.raises(CommandError) as refused:  # the same kind of line, without starting another process
        call_command("consume", "--processes", "2", "--source", "file:events.jsonl")
    assert str(refused.value) == (
        "--processes runs members of a Kafka consumer group; a file is replayed by one process"
    )


def test_the_kafka_probe_job_of_an_installation_without_kafka_skips_quietly(settings):
    settings.KAFKA_BOOTSTRAP_SERVERS = ""
    assert probe_kafka_task() == (
        "Kafka probe skipped: KAFKA_BOOTSTRAP_SERVERS is empty (this installation uses no Kafka)"
    )
    assert last_probe() is None  # nothing recorded: no "Kafka down" on the dashboard or in /metrics
