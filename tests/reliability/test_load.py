"""Load: a producer at a steady rate (issue 11: 10 x the design documents' peak, 3,600 events/s, for 10 minutes
with ``--long-faults``; 60 s by default) and one consumer. The lag,
sampled every second, stays bounded; afterwards every event is counted exactly once."""

import datetime as dt
import logging
import random
import threading
import time
from collections import Counter

import pytest
from django.utils import timezone
from kafka import KafkaProducer

from cpsproject.common.timeutil import local_day
from stats.jobs.flush import flush
from stats.keys import NO_PARTNER
from stats.models import DailyStat
from tests.factories import create_tree, pv_event
from tests.reliability.flow import counted_in_redis
from tests.reliability.procs import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.real_clock]
log = logging.getLogger("reliability")

# partner code -> the codes its PV counts for (itself and its ancestors), as tests.factories.create_tree builds
LINEAGE = {
    "A": ["A"],
    "A1": ["A1", "A"],
    "A1a": ["A1a", "A1", "A"],
    "A2": ["A2", "A"],
    "B": ["B"],
    None: [NO_PARTNER],
}
TICK = 0.1
WARM_UP_SECONDS = 5
# The lag may reach this many seconds of traffic (a batch in hand, a poll, a flush of the producer) and no more.
LAG_SECONDS = 5


class SteadyProducer(threading.Thread):
    """Send ``rate`` events per second for ``seconds``, in ticks of 0.1 s, keeping the exact truth."""

    def __init__(self, settings, *, rate: int, seconds: int):
        super().__init__(daemon=True)
        self.settings, self.rate, self.seconds = settings, rate, seconds
        self.sent = 0
        self.truth: Counter[str] = Counter()
        self.days: set[dt.date] = set()
        self.behind = 0.0  # the most the producer itself fell behind its schedule, in seconds
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._produce()
        except BaseException as exc:  # reported by the test thread
            self.error = exc

    def _produce(self) -> None:
        rng = random.Random(81)
        producer = KafkaProducer(bootstrap_servers=self.settings.KAFKA_BOOTSTRAP_SERVERS, linger_ms=10)
        per_tick = max(1, round(self.rate * TICK))
        began = time.monotonic()
        ticks = round(self.seconds / TICK)
        for tick in range(ticks):
            now = timezone.now()
            self.days.add(local_day(now))
            for _ in range(per_tick):
                code = rng.choice(list(LINEAGE))
                producer.send(self.settings.KAFKA_TOPIC, value=pv_event(now, code, f"u{rng.randrange(5000)}"))
                self.truth.update(LINEAGE[code])
            self.sent += per_tick
            producer.flush()
            wait = began + (tick + 1) * TICK - time.monotonic()
            self.behind = max(self.behind, -wait)
            if wait > 0:
                time.sleep(wait)
        producer.close()


# A minute of steady load is CPU for both cores: once a run. SQLite's pass, since the exactly-once tests beside it
# run on MariaDB as well and the MariaDB pass carries the browser tests.
@pytest.mark.one_pass("sqlite")
def test_one_consumer_keeps_up_with_a_steady_producer_and_loses_nothing(kafka_settings, children, sizes):
    create_tree()
    rate, seconds = sizes.load_rate, sizes.load_seconds
    consumer = children.start("consume")
    wait_until(
        lambda: "partitions assigned: [0" in consumer.stderr(), seconds=120, what="the consumer to join"
    )
    producer = SteadyProducer(kafka_settings, rate=rate, seconds=seconds)
    began = time.monotonic()
    producer.start()
    samples: list[tuple[float, int]] = []
    while producer.is_alive():
        time.sleep(1)
        elapsed = time.monotonic() - began
        samples.append((elapsed, producer.sent - counted_in_redis(kafka_settings)))
        assert consumer.alive(), consumer.stderr()[-3000:]
    producer.join()
    assert producer.error is None, producer.error
    drained = wait_until(
        lambda: counted_in_redis(kafka_settings) >= producer.sent, seconds=120, what="the consumer to drain"
    )
    total = time.monotonic() - began
    consumer.process.send_signal(15)
    assert consumer.wait(30) == 0, consumer.stderr()[-3000:]

    steady = [lag for elapsed, lag in samples if elapsed > WARM_UP_SECONDS]
    worst = max(steady, default=0)
    log.info(
        "load: %d events/s for %d s (%d sent; the producer fell behind its schedule by at most %.1f s); "
        "lag sampled %d times: max %d events (%.1f s of traffic), mean %.0f; drained %.1f s after the last "
        "send; overall %.0f events/s",
        rate,
        seconds,
        producer.sent,
        producer.behind,
        len(samples),
        worst,
        worst / rate,
        sum(steady) / max(1, len(steady)),
        drained,
        producer.sent / total,
    )
    assert worst <= rate * LAG_SECONDS, f"lag reached {worst} events ({worst / rate:.1f} s of traffic)"
    assert counted_in_redis(kafka_settings) == producer.sent

    flush(include_open=True)
    pv: Counter[str] = Counter()
    for row in DailyStat.objects.filter(date__in=producer.days).select_related("partner"):
        pv[row.partner.code if row.partner else NO_PARTNER] += row.pv
    assert dict(pv) == dict(producer.truth)
    log.info("load: verified PV exact for %d partners, %d events sent, 0 lost", len(pv), producer.sent)
