"""When an idle consumer may exit (``consume --exit-when-idle``): idle long enough, and the topic drained.

Drained means every partition of the topic is counted to its end offset, whoever holds it: a consumer that
holds no partition, or only some, does not exit while another member or a rebalance still has work.
"""

import logging
import time
from typing import NamedTuple

from django.conf import settings
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError, KafkaTimeoutError

from stats.pipeline.group import CLOSE_TIMEOUT_MS, REQUEST_TIMEOUT_MS
from stats.pipeline.offsets import stored_offsets
from stats.pipeline.record_decoding import decode_records_compiled

logger = logging.getLogger("stats.pipeline.consumer")  # the consumer's lines keep one logger name

# How often an idle consumer compares the offsets counted with the topic's end offsets.
DRAIN_CHECK_SECONDS = 1.0


class IdleClock:
    """Seconds spent polling nothing since the last message.

    Only a message resets it: not a rebalance, and not holding no partitions, so that a consumer whose group
    keeps rebalancing (a starved process losing its session, a sibling crash-looping) or that is stuck in a
    join still reaches its limit. Reaching the limit is not enough to exit: the whole topic must be counted to
    its end offsets (``undrained_partitions``), whoever holds it.
    """

    def __init__(self, limit: float | None):
        self.limit = limit
        self.seconds = 0.0

    def busy(self) -> None:
        self.seconds = 0.0

    def empty_poll(self, *, began: float) -> bool:
        """Count an empty poll that began at ``began``; return True once idle for ``limit`` seconds."""
        self.seconds += time.monotonic() - began
        return self.limit is not None and self.seconds >= self.limit


class Behind(NamedTuple):
    """A partition not counted to its end."""

    counted: int  # the next offset stored with the counters (or the partition's first offset)
    end: int  # the broker's end offset


def undrained_partitions(consumer: KafkaConsumer, *, group: str, topic: str) -> dict[int, Behind]:
    """Return each partition of ``topic`` not counted to its end, by partition number.

    The offsets counted are the ones stored in Redis with the counters, whichever member stored them; the end
    offsets are the broker's (the last stable offset: the consumer reads committed records only).
    """
    partitions = consumer.partitions_for_topic(topic) or set()
    tps = [TopicPartition(topic, partition) for partition in sorted(partitions)]
    if not tps:
        return {-1: Behind(0, 0)}  # no metadata yet: nothing is known to be drained
    ends = consumer.end_offsets(tps, timeout_ms=REQUEST_TIMEOUT_MS)
    starts = consumer.beginning_offsets(tps, timeout_ms=REQUEST_TIMEOUT_MS)
    stored = stored_offsets(group=group, source=topic)
    counted = {tp: max(stored.get(tp.partition, 0), starts[tp]) for tp in tps}
    # tansu (the tests' broker) answers a ListOffsets for the end with the last record batch's base offset + 1,
    # short of the true end: the high watermark of a fetch is the true end, this consumer's own where it holds
    # the partition. The partitions it does not hold are fetched by a probe, and only once all else looks
    # drained: probing every second (0.6 s a probe, before fetch_max_wait_ms was cut) while the consumer waited
    # for a dead member's partitions held its join up for over a minute in the crash tests.
    assigned = consumer.assignment()
    ends = {tp: max(end, consumer.highwater(tp) or 0) if tp in assigned else end for tp, end in ends.items()}
    behind = {tp.partition: Behind(counted[tp], ends[tp]) for tp in tps if counted[tp] < ends[tp]}
    unheld = {tp: counted[tp] for tp in tps if tp not in assigned}
    if behind or not unheld:
        return behind
    fetched = fetched_ends(unheld)
    return {tp.partition: Behind(counted[tp], fetched[tp]) for tp in unheld if counted[tp] < fetched[tp]}


def fetched_ends(positions: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The high watermark a fetch from ``positions`` reports for each partition, read by a consumer outside
    any group (it joins nothing and commits nothing); raises ``KafkaTimeoutError`` if a fetch does not answer."""
    probe = KafkaConsumer(
        bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS,
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        fetch_max_wait_ms=100,  # an empty fetch answers after this long: the end is all it asks for
        isolation_level="read_committed",
        allow_auto_create_topics=False,
    )
    try:
        decode_records_compiled(probe)  # the records a fetch brings back may use any codec a producer chose
        probe.assign(list(positions))
        for tp, offset in positions.items():
            probe.seek(tp, offset)
        deadline = time.monotonic() + REQUEST_TIMEOUT_MS / 1000
        while time.monotonic() < deadline:
            probe.poll(timeout_ms=200, max_records=1)
            highwaters = {tp: probe.highwater(tp) for tp in positions}
            if None not in highwaters.values():
                return highwaters
        raise KafkaTimeoutError(f"no fetch of {sorted(tp.partition for tp in positions)} answered")
    finally:
        probe.close(timeout_ms=CLOSE_TIMEOUT_MS)


class DrainWatch:
    """Decides, after each empty poll, whether the consumer may exit; says once which partitions it waits for."""

    def __init__(self, *, group: str, topic: str, exit_when_idle: float | None) -> None:
        self.group, self.topic = group, topic
        self.idle = IdleClock(exit_when_idle)
        self.checked = float("-inf")
        self.waiting_for: set[int] | None = None  # the partitions last logged as behind

    def drained(self, consumer: KafkaConsumer, *, began: float) -> bool:
        """Count an empty poll that began at ``began``; return True once idle long enough and drained."""
        if not self.idle.empty_poll(began=began) or time.monotonic() - self.checked < DRAIN_CHECK_SECONDS:
            return False
        self.checked = time.monotonic()
        try:
            behind = undrained_partitions(consumer, group=self.group, topic=self.topic)
        except KafkaError as exc:
            logger.warning("could not read the topic's end offsets (%s); checking again", exc)
            return False
        if not behind:
            logger.info(
                "idle for %.1f s and topic %s is drained: every partition counted to its end offset; exiting",
                self.idle.seconds,
                self.topic,
            )
            return True
        if set(behind) != self.waiting_for:
            self.waiting_for = set(behind)
            held = {tp.partition for tp in consumer.assignment()}
            logger.info(
                "idle for %.1f s, but topic %s is not drained: %s behind their end offsets (counted/end); "
                "%s; waiting for them",
                self.idle.seconds,
                self.topic,
                ", ".join(f"partition {p} {b.counted}/{b.end}" for p, b in sorted(behind.items())),
                "this consumer holds none of them, another member or a rebalance does"
                if not held & set(behind)
                else f"this consumer holds partitions {sorted(held)}",
            )
        return False
