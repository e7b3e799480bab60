"""Writing message values to Kafka or to a JSON-lines file (simulate, tests, benchmarks)."""

from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from kafka import KafkaProducer
from kafka.errors import KafkaError

from stats.pipeline.lag import quiet_kafka_logs

# kafka-python keeps trying to bootstrap for 30 s by default: a mistyped address should fail while one waits.
BOOTSTRAP_TIMEOUT_SECONDS = 5


class BrokerUnavailable(Exception):
    """No broker of ``KAFKA_BOOTSTRAP_SERVERS`` answered."""


def kafka_producer() -> KafkaProducer:
    """Return a producer connected to ``KAFKA_BOOTSTRAP_SERVERS``; raise ``BrokerUnavailable`` within seconds."""
    servers = settings.KAFKA_BOOTSTRAP_SERVERS
    if not servers.strip():
        raise BrokerUnavailable(
            "KAFKA_BOOTSTRAP_SERVERS is empty: this installation uses no Kafka; nothing was sent"
        )
    try:
        # kafka-python logs an ERROR or a WARNING for each bootstrap attempt: the outcome is one line of ours.
        with quiet_kafka_logs():
            return KafkaProducer(
                bootstrap_servers=servers,
                linger_ms=20,
                batch_size=256 * 1024,
                acks=1,
                bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_SECONDS * 1000,
            )
    except KafkaError as exc:
        raise BrokerUnavailable(
            f"no Kafka broker answered at {servers} (KAFKA_BOOTSTRAP_SERVERS) within "
            f"{BOOTSTRAP_TIMEOUT_SECONDS} s; nothing was sent"
        ) from exc


def send_to_kafka(
    values: list[bytes],
    *,
    producer: KafkaProducer | None = None,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Send ``values`` to ``KAFKA_TOPIC`` and wait until the broker has them; close the producer."""
    producer = producer or kafka_producer()
    for n, value in enumerate(values, 1):
        producer.send(settings.KAFKA_TOPIC, value=value)
        if progress and n % 100_000 == 0:
            progress(n)
    producer.flush()
    producer.close()


def write_to_file(path: Path, values: list[bytes]) -> None:
    with path.open("wb") as out:
        for value in values:
            # One message per line: a value that holds a raw newline cannot be replayed, so escape it.
            out.write(value.replace(b"\n", b"\\n") + b"\n")
