"""When an idle consumer may exit (``consume --exit-when-idle``): idle long enough, and the topic drained.

Drained means every partition of the topic is counted to its end offset, whoever holds it: a consumer that
holds no partition, or only some, does not exit while another member or a rebalance still has work.
"""

import logging
import time
from typing import NamedTuple

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from stats.pipeline.group import REQUEST_TIMEOUT_MS
from stats.pipeline.offsets import stored_offsets

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
    # tansu (the tests' broker) answers a ListOffsets for the end with the last record batch's base offset + 1:
    # where this consumer fetched, the fetch's high watermark is the true end.
    assigned = consumer.assignment()
    ends = {tp: max(end, consumer.highwater(tp) or 0) if tp in assigned else end for tp, end in ends.items()}
    stored = stored_offsets(group=group, source=topic)
    counted = {tp.partition: max(stored.get(tp.partition, 0), starts[tp]) for tp in tps}
    return {
        tp.partition: Behind(counted[tp.partition], ends[tp])
        for tp in tps
        if counted[tp.partition] < ends[tp]
    }


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
