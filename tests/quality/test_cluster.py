"""Traffic quality on a Redis Cluster (REDIS_CLUSTER=1): a partner-day counted from three partitions on three
masters, flushed, its keys deleted once reconciled. Every command and script stays within one slot."""

import datetime as dt
from collections.abc import Iterator

import pytest

from cpsproject.common.redis_cluster import ClusterConnectionFactory
from quality.flush import flush_quality
from quality.models import QualityDay
from stats.devtools.redis_cluster import LocalCluster
from stats.jobs.reconcile import reconcile
from tests.factories import at, create_tree, feed, pv_event

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 21)
NOON = at("2026-11-21 12:00")


@pytest.fixture
def on_a_cluster(tmp_path, settings) -> Iterator[None]:
    cluster = LocalCluster.on_free_ports(tmp_path / "redis-cluster")
    try:
        cluster.start()
        url = f"redis://127.0.0.1:{cluster.master_ports()[1]}/0"
        single = settings.CACHES["default"]
        options = {
            **single["OPTIONS"],
            "CONNECTION_FACTORY": "cpsproject.common.redis_cluster.ClusterConnectionFactory",
        }
        saved = (settings.REDIS_URL, settings.REDIS_CLUSTER, settings.CACHES)
        settings.REDIS_URL, settings.REDIS_CLUSTER = url, True
        settings.CACHES = {**settings.CACHES, "default": {**single, "LOCATION": url, "OPTIONS": options}}
        try:
            yield
        finally:
            # The suite's Redis back before the autouse prefix clean-up scans it.
            settings.REDIS_URL, settings.REDIS_CLUSTER, settings.CACHES = saved
            client = ClusterConnectionFactory._clusters.pop(url, None)
            if client is not None:
                client.close()
    finally:
        cluster.stop()


def test_signals_from_three_partitions_add_up_on_a_cluster(on_a_cluster):
    create_tree()
    for partition, seconds in enumerate((0, 10, 20)):
        feed(
            [pv_event(at(f"2026-11-21 10:00:{seconds:02d}"), "A1", "o-1", ip=f"203.0.113.{partition + 1}")],
            now=NOON,
            partition=partition,
        )
    flush_quality(now=NOON)
    row = QualityDay.objects.get(partner__code="A1", date=DAY)
    # Repeats across partitions are for the recount: live 0.
    assert (row.pv, row.distinct_ips, row.distinct_networks, row.repeat_pv) == (3, 3, 1, 0)
    reconcile(day=DAY, now=at("2026-11-22 01:00"))
    row.refresh_from_db()
    assert (row.pv, row.repeat_pv, row.reconciled_at is not None) == (3, 2, True)
    result = flush_quality(now=at("2026-11-22 01:00"))
    assert result.deleted_days == 1
