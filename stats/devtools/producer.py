"""Writing message values to Kafka or to a JSON-lines file (simulate, tests, benchmarks)."""

from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from kafka import KafkaProducer


def send_to_kafka(values: list[bytes], *, progress: Callable[[int], None] | None = None) -> None:
    producer = KafkaProducer(
        bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS, linger_ms=20, batch_size=256 * 1024, acks=1
    )
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
