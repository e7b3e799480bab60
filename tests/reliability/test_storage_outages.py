"""MySQL down during a flush, Redis restarted without persistence: what is kept, what is lost, how it comes back."""

import datetime as dt
import logging

import pytest
from django.utils import timezone
from django_redis import get_redis_connection

from cpsproject.common.timeutil import local_day
from stats.devtools.simulate import GroundTruth, simulate_events
from stats.models import DailyStat
from tests.factories import create_tree, feed
from tests.reliability.flow import flushed, produce
from tests.reliability.procs import Children, PrivateRedis, dead_port

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.real_clock]
log = logging.getLogger("reliability")


def prefixed_keys(client, prefix: str) -> dict[bytes, bytes]:
    """Every key under the test's prefix with its serialized value (DUMP)."""
    return {key: client.dump(key) for key in client.scan_iter(match=f"{{{prefix}}}:*", count=1000)}


def test_flush_with_mysql_unreachable_fails_in_one_line_keeps_redis_and_the_next_flush_is_exact(
    settings, redis_prefix, tmp_path
):
    create_tree()
    now = timezone.now()
    day = local_day(now)
    values, truth = simulate_events(events=3000, day=day, users=400, until=now, seed=31, bad_share=0)
    feed(values, now=now)
    client = get_redis_connection("default")
    before = prefixed_keys(client, redis_prefix)
    children = Children(settings, tmp_path)
    try:
        port = dead_port()
        failed = children.run(
            "flush",
            "--include-open",
            seconds=120,
            DATABASE_URL=f"mysql://root@127.0.0.1:{port}/cps_gone",
            CPS_LANGUAGE_CODE="en",  # the product speaks zh-hans by default; the test reads English
        )
        assert failed.process.returncode == 1
        lines = [line for line in failed.stderr().splitlines() if line.strip()]
        assert len(lines) == 1, failed.stderr()
        assert lines[0].startswith("CommandError: flush failed, the database is unavailable"), lines[0]
        assert "OperationalError" in lines[0]
        log.info("mysql down: flush exited 1 with: %s", lines[0])

        after = prefixed_keys(client, redis_prefix)
        assert {key: after.get(key) for key in before} == before
        assert DailyStat.objects.count() == 0
        log.info("mysql down: all %d Redis keys kept byte for byte, nothing written", len(before))

        recovered = children.run("flush", "--include-open", seconds=120)
        assert recovered.process.returncode == 0, recovered.stderr()[-2000:]
    finally:
        children.close()
    rows = flushed({day})
    assert {code: (rows[code].pv, rows[code].pv_self) for code in truth.pv} == {
        code: (truth.pv[code], truth.pv_self[code]) for code in truth.pv
    }
    log.info(
        "mysql back: the next flush wrote exact PV for %d partners (%d events)", len(truth.pv), len(values)
    )


def merged(*truths: GroundTruth) -> GroundTruth:
    total = GroundTruth()
    for truth in truths:
        total.pv.update(truth.pv)
        total.pv_self.update(truth.pv_self)
        total.bot_pv.update(truth.bot_pv)
        for code, users in truth.users.items():
            total.users[code] |= users
        for code, users in truth.users_self.items():
            total.users_self[code] |= users
        total.bad += truth.bad
    return total


def exact_rows(day) -> dict[str, tuple[int, int, int, int]]:
    return {code: (r.pv, r.pv_self, r.uv, r.uv_self) for code, r in flushed({day}).items()}


def expected_rows(truth: GroundTruth) -> dict[str, tuple[int, int, int, int]]:
    return {
        code: (truth.pv[code], truth.pv_self[code], len(truth.users[code]), len(truth.users_self[code]))
        for code in truth.pv
    }


@pytest.mark.kafka
def test_redis_restarted_without_persistence_loses_unflushed_counts_and_reconcile_restores_the_day(
    kafka_settings, tmp_path
):
    create_tree()
    # Yesterday: reconcile refuses a day that has not ended.
    day = local_day(timezone.now()) - dt.timedelta(days=1)
    first, first_truth = simulate_events(events=3000, day=day, users=300, seed=41, bad_share=0)
    second, second_truth = simulate_events(events=2000, day=day, users=300, seed=42, bad_share=0)
    redis = PrivateRedis(tmp_path)
    children = Children(kafka_settings, tmp_path)
    env = {
        "REDIS_URL": redis.url,
        "REDIS_CLUSTER": "0",
    }  # a single private server, whatever the suite runs on
    bootstrap, topic = kafka_settings.KAFKA_BOOTSTRAP_SERVERS, kafka_settings.KAFKA_TOPIC
    try:
        redis.start()
        produce(bootstrap, topic, first)
        ran = children.run("consume", "--exit-when-idle", "3", seconds=180, **env)
        assert ran.process.returncode == 0, ran.stderr()[-2000:]
        assert children.run("flush", "--include-open", seconds=120, **env).process.returncode == 0
        assert {c: r[:2] for c, r in exact_rows(day).items()} == {
            c: r[:2] for c, r in expected_rows(first_truth).items()
        }
        log.info("redis restart: %d events counted and flushed", len(first))

        produce(bootstrap, topic, second)
        ran = children.run("consume", "--exit-when-idle", "3", seconds=180, **env)
        assert ran.process.returncode == 0, ran.stderr()[-2000:]
        redis.stop()
        redis.start()
        log.info(
            "redis restart: %d more events counted, then redis-server killed and started empty", len(second)
        )

        assert children.run("flush", "--include-open", seconds=120, **env).process.returncode == 0
        # The realtime counts since the last flush were in Redis only: they are gone until a reconcile.
        assert {c: r[:2] for c, r in exact_rows(day).items()} == {
            c: r[:2] for c, r in expected_rows(first_truth).items()
        }
        log.info("redis restart: as documented, the unflushed counts of %d events are lost", len(second))

        reconciled = children.run("reconcile", "--date", day.isoformat(), seconds=180, **env)
        assert reconciled.process.returncode == 0, reconciled.stderr()[-2000:]
    finally:
        children.close()
        redis.stop()
    assert exact_rows(day) == expected_rows(merged(first_truth, second_truth))
    log.info("redis restart: reconcile --date %s restored PV and UV exactly from the archive", day)
