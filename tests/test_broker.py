"""The Kafka-protocol broker the suite starts really speaks Kafka: produce, then consume in a group."""

import pytest
from kafka import KafkaConsumer, KafkaProducer

from tests.conftest import KAFKA_SESSION_TIMEOUT_MS


@pytest.mark.kafka
@pytest.mark.one_pass("sqlite")  # the broker alone: no database, no Redis
def test_produce_and_consume_through_a_consumer_group(kafka_bootstrap, kafka_topic):
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for i in range(30):
        producer.send(kafka_topic, key=str(i).encode(), value=f"m{i}".encode())
    producer.flush()
    producer.close()

    consumer = KafkaConsumer(
        kafka_topic,
        bootstrap_servers=kafka_bootstrap,
        group_id="smoke",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=KAFKA_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=1000,
    )
    seen: list[bytes] = []
    for _ in range(30):
        for records in consumer.poll(timeout_ms=1000).values():
            seen.extend(r.value for r in records)
        if len(seen) == 30:
            break
    consumer.commit()
    consumer.close()
    assert sorted(seen) == sorted(f"m{i}".encode() for i in range(30))
