"""Helpers of the operations tests: messages on given partitions of the test broker, a Kafka out of reach."""

import pytest
from kafka import KafkaProducer

from tests.conftest import free_port


def produce(settings, values_by_partition: dict[int, list[bytes]]) -> None:
    """Send each partition its values, one record batch per message.

    tansu (memory storage) answers a partition's end offset with the base offset of its last record batch
    + 1, where Kafka answers the last offset + 1: one message per batch makes both the same.
    """
    producer = KafkaProducer(bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS)
    for partition, values in values_by_partition.items():
        for value in values:
            producer.send(settings.KAFKA_TOPIC, value=value, partition=partition)
            producer.flush()
    producer.close()


@pytest.fixture
def kafka_down(settings) -> str:
    """Point the product at a loopback port nothing listens on; return that address."""
    settings.KAFKA_BOOTSTRAP_SERVERS = f"127.0.0.1:{free_port()}"
    return settings.KAFKA_BOOTSTRAP_SERVERS
