"""``consume`` on a real Redis Cluster (``REDIS_CLUSTER=1``), through a resharding and two failovers.

Each test starts a cluster of its own (three masters with a replica each, on free loopback ports, in its tmp
dir) and points the ``manage.py`` children and its own reads at one node of it: a node that does not serve
slot 0, since any node must do. While ``consume`` counts, the fault test

1. moves every slot that holds the test's keys to another master, the way ``redis-cli --cluster reshard``
   does (IMPORTING, MIGRATING, MIGRATE in batches, SETSLOT NODE): the consumer meets ASK and MOVED replies;
2. hands the master now serving them to its replica (``CLUSTER FAILOVER``, coordinated: nothing is lost);
3. SIGKILLs the master after that, and its replica takes over after the node timeout (1.5 s). Replication is
   asynchronous, so a write the dying master acknowledged may never reach the replica: Redis' own limit, not
   the product's. The consumer is frozen (SIGSTOP) until the replica has everything, and woken just before
   the kill: it then meets a dead master until the replica is promoted.

Afterwards the numbers a user sees are exact: the live PV per partner the read side combines from Redis, the
flushed day rows, UV as Redis estimates the true users, every good event archived once, every bad one dead.
Nothing here names a Redis key: the tests hold for whatever slots the key layout uses.
"""

import logging
import signal
import time
from collections.abc import Iterator

import pytest
import redis
from django.utils import timezone

from cpsproject.common.redis_cluster import ClusterConnectionFactory
from partners.models import Partner
from stats.devtools.redis_cluster import LocalCluster
from stats.read.selectors import partner_days
from tests.factories import create_tree
from tests.reliability.flow import assert_counted_exactly, counted_in_redis, produce, todays_traffic
from tests.reliability.procs import Child, patience, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.real_clock]
log = logging.getLogger("reliability")

CLUSTER_FACTORY = "cpsproject.common.redis_cluster.ClusterConnectionFactory"


@pytest.fixture
def redis_cluster(tmp_path) -> Iterator[LocalCluster]:
    """Three masters with a replica each, on free loopback ports; stopped (every node killed) afterwards."""
    cluster = LocalCluster.on_free_ports(tmp_path / "redis-cluster")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def on_cluster(settings, redis_cluster) -> Iterator[str]:
    """Point this process's Redis at the cluster, through a node that does not serve slot 0; yield its URL.

    The product's settings do it the same way for ``REDIS_CLUSTER=1``. Changing ``CACHES`` makes Django drop
    its cache connections, so the next ``get_redis_connection`` builds a cluster client. The suite's Redis
    comes back before the autouse ``redis_prefix`` clean-up runs (it scans the single Redis: this test's keys
    die with the cluster).
    """
    first_owner = redis_cluster.owner(0)
    node = next(port for port in redis_cluster.master_ports() if port != first_owner)
    url = f"redis://127.0.0.1:{node}/0"
    single = settings.CACHES["default"]
    options = {**single["OPTIONS"], "CONNECTION_FACTORY": CLUSTER_FACTORY}
    saved = (settings.REDIS_URL, settings.REDIS_CLUSTER, settings.CACHES)
    settings.REDIS_URL, settings.REDIS_CLUSTER = url, True
    settings.CACHES = {**settings.CACHES, "default": {**single, "LOCATION": url, "OPTIONS": options}}
    log.info("cluster: masters %s, the product names %s", redis_cluster.master_ports(), url)
    try:
        yield url
    finally:
        settings.REDIS_URL, settings.REDIS_CLUSTER, settings.CACHES = saved
        client = ClusterConnectionFactory._clusters.pop(url, None)
        if client is not None:
            client.close()


def cluster_env(url: str) -> dict[str, str]:
    """The environment a ``manage.py`` child needs to count on the cluster."""
    return {"REDIS_URL": url, "REDIS_CLUSTER": "1"}


def counted(settings) -> int:
    """Messages counted so far, or -1 while the cluster cannot answer (a master down, a slot moving)."""
    try:
        return counted_in_redis(settings)
    except redis.RedisError:
        return -1


def assert_live_pv_exact(truth, *, day) -> None:
    """The PV per partner the read side shows before any flush (Redis only, every partition combined)."""
    shown = {}
    for partner in Partner.objects.filter(code__in=truth.pv):
        (numbers,) = partner_days(partner=partner, start=day, end=day, now=timezone.now())
        shown[partner.code] = (numbers.pv, numbers.pv_self)
    expected = {code: (truth.pv[code], truth.pv_self[code]) for code in shown}
    assert shown == expected, f"live (pv, pv_self) per partner: shown {shown}, expected {expected}"


def test_consume_and_flush_on_a_cluster_through_any_node_count_exactly(kafka_settings, children, on_cluster):
    create_tree()
    values, truth, day = todays_traffic(events=3000, users=800, seed=27)
    produce(kafka_settings.KAFKA_BOOTSTRAP_SERVERS, kafka_settings.KAFKA_TOPIC, values)

    consumer = children.run(
        "consume",
        "--batch-size",
        "500",
        "--exit-when-idle",
        "3",
        seconds=patience(len(values), batch=500, more=3),
        **cluster_env(on_cluster),
    )
    assert consumer.process.returncode == 0, consumer.stderr()[-3000:]
    assert counted_in_redis(kafka_settings) == len(values)
    assert_live_pv_exact(truth, day=day)
    flushed = children.run("flush", "--include-open", seconds=120, **cluster_env(on_cluster))
    assert flushed.process.returncode == 0, flushed.stderr()[-3000:]
    assert_counted_exactly(truth, day=day, produced=len(values), do_flush=False)


BATCH, SLEEP = 300, 0.3


def _wait_for_progress(settings, consumer: Child, *, past: int, what: str) -> int:
    """Wait for the consumer to count past ``past`` (a fault's recovery and a batch, or up to ``past`` at first)."""
    wait_until(
        lambda: counted(settings) > past or not consumer.alive(),
        seconds=patience(max(past - counted(settings), BATCH), batch=BATCH, sleep=SLEEP),
        what=f"the consumer to {what}",
    )
    assert consumer.alive(), consumer.stderr()[-3000:]
    return counted(settings)


def test_consume_survives_a_resharding_a_failover_and_a_killed_master_and_counts_exactly(
    kafka_settings, children, redis_cluster, on_cluster, sizes
):
    create_tree()
    values, truth, day = todays_traffic(events=sizes.crash_events, users=2000, seed=127)
    produce(kafka_settings.KAFKA_BOOTSTRAP_SERVERS, kafka_settings.KAFKA_TOPIC, values)
    prefix = kafka_settings.CPS_REDIS_PREFIX
    # Slow batches, so the stream outlasts the three faults.
    consumer = children.start(
        "consume",
        "--batch-size",
        str(BATCH),
        CPS_FAULT_SLEEP=f"after_archive:{SLEEP}",
        **cluster_env(on_cluster),
    )
    at = _wait_for_progress(kafka_settings, consumer, past=len(values) // 10, what="count a tenth")

    # 1. A resharding: every slot holding this test's counters goes to one other master, keys and all: the
    # shared tag and the partitions' tags. The buyers' attribution views live in 64 hashes per generation, each a
    # tag of its own ({prefix:views:<generation>:<shard>}): slots apart from the counters', left where they are.
    used = {
        **redis_cluster.used_slots(match=f"{{{prefix}}}*"),
        **redis_cluster.used_slots(match=f"{{{prefix}:p[0-9]*"),
    }
    busiest = max(used, key=used.get)
    target = next(port for port in redis_cluster.master_ports() if port != redis_cluster.owner(busiest))
    began = time.monotonic()
    # Stretched over a second or more, so that the consumer writes while the keys live on both nodes.
    moved = redis_cluster.move_slots(sorted(used), target, pause=0.01)
    log.info(
        "cluster: %d slots in use (%s keys); moved to %d with %d keys in %.1f s, after %d of %d counted",
        len(used),
        sum(used.values()),
        target,
        moved,
        time.monotonic() - began,
        at,
        len(values),
    )
    assert moved > 0 and at < len(values), "the stream ended before the resharding: make it longer"
    at = _wait_for_progress(kafka_settings, consumer, past=at, what="count on after the resharding")

    # 2. A coordinated failover of the master now serving them.
    promoted = redis_cluster.failover(target)
    log.info("cluster: %d failed over to %d after %d counted", target, promoted, at)
    assert at < len(values), "the stream ended before the failover: make it longer"
    at = _wait_for_progress(kafka_settings, consumer, past=at, what="count on after the failover")

    # 3. That master killed; the consumer frozen until the replica holds everything, woken before the kill.
    consumer.process.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: redis_cluster.in_sync(promoted), seconds=10, what="the replica to catch up")
    finally:
        consumer.process.send_signal(signal.SIGCONT)
    at = counted(kafka_settings)
    began = time.monotonic()
    survivor = redis_cluster.kill_master(promoted)
    log.info(
        "cluster: %d killed after %d counted; %d took over in %.1f s",
        promoted,
        at,
        survivor,
        time.monotonic() - began,
    )
    assert at < len(values), "the stream ended before the kill: make it longer"

    wait_until(
        lambda: counted(kafka_settings) >= len(values) or not consumer.alive(),
        seconds=patience(len(values) - max(at, 0), batch=BATCH, sleep=SLEEP),
        what=f"the consumer to count the rest ({len(values) - at} events)",
    )
    assert consumer.alive(), consumer.stderr()[-3000:]
    assert consumer.terminate() == 0, consumer.stderr()[-3000:]
    assert counted_in_redis(kafka_settings) == len(values)
    retried = [line for line in consumer.stderr().splitlines() if "unavailable" in line]
    log.info("cluster: the consumer waited out %d Redis errors: %s", len(retried), retried[:3])
    assert_live_pv_exact(truth, day=day)
    assert_counted_exactly(truth, day=day, produced=len(values))
