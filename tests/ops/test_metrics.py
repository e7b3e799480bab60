"""``/metrics``: Prometheus text parsed back, numbers written from the inputs; staff or the token only."""

import datetime as dt
import logging
import time

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from stats.jobs.flush import flush
from stats.jobs.tasks import probe_kafka_task
from stats.pipeline import metrics
from stats.pipeline.ingest import Message, process_batch
from tests.conftest import free_port
from tests.conversions.orders import order_event
from tests.factories import at, create_staff, create_tree, feed, pv_event
from tests.ops.conftest import produce

pytestmark = pytest.mark.django_db

NOON = at("2026-11-21 12:00")
LATER = at("2026-11-21 13:00")
TOKEN = "m3trics-t0ken"


def scrape(client: Client, **headers: str) -> dict[tuple[str, tuple], float]:
    """GET /metrics and return every sample by (name, sorted labels)."""
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


@pytest.fixture
def staff() -> Client:
    client = Client()
    client.force_login(create_staff())
    return client


def test_a_scrape_shows_events_counted_and_dead_letters_from_the_consumer(staff, kafka_down):
    create_tree()
    good = [pv_event(NOON, "A1a", f"u{n}") for n in range(4)] + [pv_event(NOON, None, "u5")] * 2
    good.append(pv_event(NOON, "B", "u6"))
    bad = [b"{not json", b"[1]", pv_event(NOON, "NOPE", "u7")]
    feed(good + bad, now=NOON)
    samples = scrape(staff)
    assert samples[("cps_events_counted_total", ())] == 7
    assert samples[("cps_events_counted_by_source_total", (("source", "test-topic"), ("type", "pv")))] == 7
    dead = {labels[0][1]: v for (name, labels), v in samples.items() if name == "cps_dead_letters_total"}
    assert dead == {"not_json": 1, "not_object": 1, "unknown_partner": 1}
    assert samples[("cps_batch_duration_seconds_count", ())] == 1
    assert samples[("cps_batch_duration_seconds_bucket", (("le", "+Inf"),))] == 1
    # Buckets A1a, A1, A, ~site, B; UV keys A1a self, A1 below, A below, ~site self, B self.
    assert samples[("cps_pending_flush_keys", ())] == 5 + 5
    assert ("cps_kafka_up", ()) not in samples  # no lag probe has run yet
    assert not [key for key in samples if key[0] == "cps_consumer_lag"]


def test_counts_add_up_over_batches_and_sources(staff, kafka_down):
    create_tree()
    feed([pv_event(NOON, "A1", "u1")] * 2, now=NOON)
    feed([pv_event(NOON, "B", "u1"), b"{"], now=NOON, source="other-topic", partition=1)
    samples = scrape(staff)
    assert samples[("cps_events_counted_total", ())] == 3
    by_source = {
        labels: v for (name, labels), v in samples.items() if name == "cps_events_counted_by_source_total"
    }
    assert by_source == {
        (("source", "other-topic"), ("type", "pv")): 1,
        (("source", "test-topic"), ("type", "pv")): 2,
    }
    assert samples[("cps_dead_letters_total", (("reason", "not_json"),))] == 1
    assert samples[("cps_batch_duration_seconds_count", ())] == 2


def test_an_order_a_recorder_refuses_is_not_counted(staff, kafka_down):
    create_tree()
    feed(
        [
            pv_event(NOON, "A1", "u1"),
            pv_event(NOON, "B", "u2"),
            order_event(NOON, "SO-1", partner="A1"),
            order_event(NOON, "SO-2", currency="JPY"),  # no rate imported: refused by the orders' recorder
        ],
        now=NOON,
    )
    samples = scrape(staff)
    assert samples[("cps_events_counted_total", ())] == 3
    by_type = {
        dict(labels)["type"]: v
        for (name, labels), v in samples.items()
        if name == "cps_events_counted_by_source_total"
    }
    assert by_type == {"pv": 2, "order": 1}
    dead = {labels[0][1]: v for (name, labels), v in samples.items() if name == "cps_dead_letters_total"}
    assert dead == {"bad_field": 1}


def test_the_batch_duration_histogram_is_cumulative(staff, kafka_down):
    for seconds in (0.004, 0.03, 0.03, 0.7, 75.0):
        metrics.record_batch_duration(seconds)
    samples = scrape(staff)
    bucket = {
        labels[0][1]: v
        for (name, labels), v in samples.items()
        if name == "cps_batch_duration_seconds_bucket"
    }
    assert (bucket["0.01"], bucket["0.025"], bucket["0.05"], bucket["0.5"], bucket["1.0"]) == (1, 1, 3, 3, 4)
    assert (bucket["60.0"], bucket["+Inf"]) == (4, 5)
    assert samples[("cps_batch_duration_seconds_count", ())] == 5
    assert samples[("cps_batch_duration_seconds_sum", ())] == pytest.approx(75.764)


def test_job_durations_and_last_successes_are_scraped(staff, kafka_down):
    create_tree()
    feed([pv_event(NOON, "A1", "u1")], now=NOON)
    assert not [k for k in scrape(staff) if k[0] == "cps_job_last_success_timestamp_seconds"]
    before = timezone.now().timestamp()
    flush(now=LATER)
    samples = scrape(staff)
    assert (
        int(before)
        <= samples[("cps_job_last_success_timestamp_seconds", (("job", "flush"),))]
        <= (timezone.now().timestamp())
    )
    assert 0 <= samples[("cps_job_last_duration_seconds", (("job", "flush"),))] < 30


@pytest.mark.django_db(transaction=True)
@pytest.mark.kafka
def test_consumer_lag_per_partition_through_the_broker(kafka_settings, staff):
    settings = kafka_settings
    create_tree()
    now = timezone.now()
    values = [pv_event(now - dt.timedelta(seconds=1), "A1", f"u{n}") for n in range(6)]
    produce(settings, {0: values[:4], 2: values[4:]})
    process_batch(
        [Message(settings.KAFKA_TOPIC, 0, offset, values[offset]) for offset in range(3)],
        group=settings.KAFKA_GROUP_ID,
        now=now,
    )
    probe_kafka_task()  # the minute job: a scrape reads what it recorded
    settings.KAFKA_BOOTSTRAP_SERVERS = f"127.0.0.1:{free_port()}"  # the scrape does not ask Kafka
    samples = scrape(staff)
    lag = {
        dict(labels)["partition"]: v for (name, labels), v in samples.items() if name == "cps_consumer_lag"
    }
    assert lag == {"0": 1, "1": 0, "2": 2}
    seen = {
        dict(labels)["partition"]: v
        for (name, labels), v in samples.items()
        if name == "cps_kafka_end_offset_seen_timestamp_seconds"
    }
    assert set(seen) == {"0", "1", "2"}
    assert all(abs(v - now.timestamp()) < 60 for v in seen.values())
    assert samples[("cps_kafka_up", ())] == 1
    assert samples[("cps_events_counted_total", ())] == 3


def test_a_scrape_with_kafka_out_of_reach_is_fast_and_logs_nothing_of_kafka(staff, kafka_down, caplog):
    probe_kafka_task()  # the job found Kafka gone
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG):
        samples = scrape(staff)
    assert time.monotonic() - started < 0.5  # was 1.5 s or more: the scrape asked Kafka itself
    assert samples[("cps_kafka_up", ())] == 0
    assert [r.getMessage() for r in caplog.records if r.name.startswith("kafka")] == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.kafka
def test_each_partitions_counted_and_end_offsets_are_scraped(kafka_settings, staff):
    settings = kafka_settings
    create_tree()
    now = timezone.now()
    values = [pv_event(now - dt.timedelta(seconds=1), "A1", f"u{n}") for n in range(5)]
    produce(settings, {0: values[:4], 1: values[4:]})
    process_batch(
        [Message(settings.KAFKA_TOPIC, 0, offset, values[offset]) for offset in range(3)],
        group=settings.KAFKA_GROUP_ID,
        now=now,
    )
    probe_kafka_task()  # the minute job records the end offsets the scrape reads
    samples = scrape(staff)
    offsets = {
        (dict(labels)["partition"], dict(labels)["offset"]): v
        for (name, labels), v in samples.items()
        if name == "cps_consumer_offset"
    }
    assert offsets == {
        ("0", "counted"): 3,
        ("0", "end"): 4,
        ("1", "counted"): 0,
        ("1", "end"): 1,
        ("2", "counted"): 0,
        ("2", "end"): 0,
    }


def test_consumers_holding_no_partition_are_scraped_with_how_long(staff, kafka_down):
    now = time.time()
    metrics.record_membership(group=settings_group(), member="host-a:11", held_none_since=now - 42, now=now)
    metrics.record_membership(group=settings_group(), member="host-b:12", held_none_since=None, now=now)
    # Killed without a word: its last report is older than a minute, so it is not shown.
    metrics.record_membership(
        group=settings_group(), member="host-c:13", held_none_since=now - 900, now=now - 61
    )
    samples = scrape(staff)
    unassigned = {
        dict(labels)["member"]: v
        for (name, labels), v in samples.items()
        if name == "cps_consumer_unassigned_seconds"
    }
    assert unassigned.keys() == {"host-a:11", "host-b:12"}
    assert 42 <= unassigned["host-a:11"] < 60
    assert unassigned["host-b:12"] == 0


def settings_group() -> str:
    from django.conf import settings

    return settings.KAFKA_GROUP_ID


def test_metrics_need_staff_or_the_token(settings, kafka_down):
    settings.CPS_METRICS_TOKEN = TOKEN
    assert Client().get("/metrics").status_code == 403
    assert Client().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}x"}).status_code == 403
    assert Client().get("/metrics", headers={"Authorization": f"Token {TOKEN}"}).status_code == 403
    user = get_user_model().objects.create_user(username="clerk", password="pw")  # active, not staff
    clerk = Client()
    clerk.force_login(user)
    response = clerk.get("/metrics")
    assert response.status_code == 403
    assert response.content.decode() == (
        "Metrics need a staff login or the metrics token (Authorization: Bearer …)."
    )
    assert scrape(Client(), Authorization=f"Bearer {TOKEN}")[("cps_events_counted_total", ())] == 0


def test_no_token_configured_opens_nothing(settings, kafka_down):
    settings.CPS_METRICS_TOKEN = ""
    assert Client().get("/metrics", headers={"Authorization": "Bearer "}).status_code == 403
    assert Client().get("/metrics", headers={"Authorization": "Bearer"}).status_code == 403
