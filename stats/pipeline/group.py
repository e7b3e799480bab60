"""The consumer's wiring to Kafka and its health in the group: the ``KafkaConsumer`` it opens, where each
partition is read from on assignment, the commits for lag monitoring, and what it reports of its membership.

Everything here touches the ``KafkaConsumer`` (not thread-safe): the main thread alone calls it.
"""

import logging
import os
import socket
import time
from collections.abc import Callable

from django.conf import settings
from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.errors import KafkaError

from cpsproject.common import faults
from stats.conf import stats_setting
from stats.pipeline import metrics
from stats.pipeline.batch import Message, Partition, new_message
from stats.pipeline.ingest import BatchResult
from stats.pipeline.lag import record_end_offsets
from stats.pipeline.offsets import stored_offsets
from stats.pipeline.record_decoding import decode_records_compiled, forget_held_transactions

# The consumer's lines keep one logger name, whichever of its modules writes them: operators and the
# reliability tests follow a consumer's log by it.
logger = logging.getLogger("stats.pipeline.consumer")

# How long closing the consumer (leaving the group) may take before the process exits anyway.
CLOSE_TIMEOUT_MS = 5000
# A request to the broker (a fetch, end offsets, a commit) gives up after this long; the loop then goes on.
REQUEST_TIMEOUT_MS = 15_000
# This member's rebalance timeout (see ``open_consumer``): longer than any batch takes to count.
MAX_POLL_INTERVAL_MS = 60_000
# How often a consumer records the end offsets its fetches saw (for lag on the dashboard and /metrics).
END_OFFSETS_EVERY_SECONDS = 1.0


class SeekToStoredOffsets(ConsumerRebalanceListener):
    """On every assignment, continue each partition from the offset stored in Redis with the counters.

    Before partitions go, the batch being counted is let finish (``before_revoke``), so that the offsets the
    next owner starts from include it, for ``revoke_wait_seconds`` at most: kafka-python calls this listener on
    its network loop, heartbeats included, so a longer wait (a batch slowed by a loaded machine or waiting out
    an outage) would cost this member its session in the middle of the rebalance. A batch that finishes later
    is harmless: of its apply and the next owner's, whichever comes second finds the stored offset moved on
    and is dropped as stale.
    """

    def __init__(
        self,
        consumer: KafkaConsumer,
        *,
        group: str,
        topic: str,
        before_revoke: Callable[[float], bool] = lambda _seconds: True,
        revoke_wait_seconds: float = 5.0,
    ):
        self.consumer, self.group, self.topic = consumer, group, topic
        self.before_revoke, self.revoke_wait_seconds = before_revoke, revoke_wait_seconds

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        partitions = sorted(tp.partition for tp in revoked)
        if not self.before_revoke(self.revoke_wait_seconds):
            logger.warning(
                "partitions %s revoked while a batch is still being counted: waited %.1f s (half the session "
                "timeout; longer would stop the heartbeats); if the next owner counts it too, the second apply "
                "is dropped as stale",
                partitions,
                self.revoke_wait_seconds,
            )
        forget_held_transactions(self.consumer)
        logger.info("partitions revoked: %s", partitions)

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        stored = stored_offsets(group=self.group, source=self.topic)
        forget_held_transactions(self.consumer)
        for tp in assigned:
            if tp.partition in stored:
                self.consumer.seek(tp, stored[tp.partition])
        logger.info(
            "partitions assigned: %s (stored offsets %s)",
            sorted(tp.partition for tp in assigned),
            {p: o for p, o in stored.items() if TopicPartition(self.topic, p) in assigned},
        )


def open_consumer(
    *, group: str, topic: str, batch_size: int, before_revoke: Callable[[float], bool]
) -> KafkaConsumer:
    """A consumer subscribed to ``topic`` in ``group``, decoding with ``record_decoding``, every wait bounded;
    ``before_revoke(seconds)`` runs before partitions go, for half the session timeout at most."""
    session_ms = stats_setting("KAFKA_SESSION_TIMEOUT_MS")
    consumer = KafkaConsumer(
        bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=session_ms,
        heartbeat_interval_ms=max(500, session_ms // 6),
        # Also the rebalance timeout this member asks for: how long the broker holds a join waiting for every
        # member to rejoin. kafka-python's default (5 min) would let one silent member hold every join that long.
        max_poll_interval_ms=MAX_POLL_INTERVAL_MS,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        max_poll_records=batch_size,
        max_partition_fetch_bytes=4 * 1024 * 1024,
        # A missing topic is an operator's job to create with its partition count; a consumer's metadata
        # request must not create it with the broker's default (after a broker lost its data, say).
        allow_auto_create_topics=False,
        # Producers that write in transactions (exactly-once pipelines) abort some: their records must never
        # count. The broker then serves only up to the last stable offset; record_decoding skips the aborted.
        isolation_level="read_committed",
    )
    decode_records_compiled(consumer)
    consumer.subscribe(
        [topic],
        listener=SeekToStoredOffsets(
            consumer,
            group=group,
            topic=topic,
            before_revoke=before_revoke,
            revoke_wait_seconds=session_ms / 2000,
        ),
    )
    return consumer


def messages_of(polled: dict[TopicPartition, list]) -> list[Message]:
    """The polled records as ``Message`` tuples, partition by partition in offset order."""
    messages: list[Message] = []
    for tp, records in polled.items():
        # The partition's fields looked up once, and no Python call per record: this runs for every record.
        source, partition = tp.topic, tp.partition
        messages += [new_message((source, partition, record.offset, record.value)) for record in records]
    return messages


def _log_failed_commit(offsets: dict[TopicPartition, OffsetAndMetadata], response: object) -> None:
    if isinstance(response, Exception):
        logger.warning("Kafka commit failed (%s); offsets stay safe in Redis", response)


def commit_for_monitoring(consumer: KafkaConsumer, counted: BatchResult) -> None:
    """Commit the offsets a batch stored with its counters, for lag monitoring only.

    The offsets that matter are in Redis. The commit names the offsets the batch stored, not the consumer's
    position, which is a batch further on (parsed, not yet counted). It is asynchronous: a synchronous commit
    retries for up to the request timeout whenever the coordinator is slow, dead or rebalancing, which would
    stall every batch of a loaded machine. A failure is logged and the next batch's commit catches up.
    """
    assigned = consumer.assignment()
    offsets = {
        tp: OffsetAndMetadata(offset, "", -1)
        for (topic, partition), offset in counted.next_offsets.items()
        if (tp := TopicPartition(topic, partition)) in assigned
    }
    if not offsets:
        return
    try:
        consumer.commit_async(offsets=offsets, callback=_log_failed_commit)
    except KafkaError as exc:
        logger.warning("Kafka commit failed (%s); offsets stay safe in Redis", exc)
    faults.reach("after_commit")


def read_on_from_stored(consumer: KafkaConsumer, stale: dict[Partition, int]) -> None:
    """Move each partition whose batch was stale to the offset stored in Redis, if this consumer still has it."""
    assigned = consumer.assignment()
    for (topic, partition), stored in stale.items():
        tp = TopicPartition(topic, partition)
        if tp in assigned:
            forget_held_transactions(consumer, [tp])
            consumer.seek(tp, stored)


def record_high_watermarks(consumer: KafkaConsumer, topic: str) -> None:
    """Record the end offsets the last fetches saw: the fetch responses carry them, so no Kafka request."""
    ends = {tp.partition: consumer.highwater(tp) for tp in consumer.assignment()}
    record_end_offsets(topic, {p: end for p, end in ends.items() if end is not None})


class MembershipReport:
    """Tells ``health`` and ``/metrics`` (through Redis) how long this consumer has held no partitions."""

    EVERY_SECONDS = 5.0

    def __init__(self, *, group: str) -> None:
        self.group = group
        self.member = f"{socket.gethostname()}:{os.getpid()}"
        self.held_none_since: float | None = time.time()
        self.reported = float("-inf")

    def update(self, consumer: KafkaConsumer) -> None:
        holding = bool(consumer.assignment())
        changed = holding == (self.held_none_since is not None)
        if changed:
            self.held_none_since = None if holding else time.time()
        if changed or time.monotonic() - self.reported >= self.EVERY_SECONDS:
            self.reported = time.monotonic()
            metrics.record_membership(
                group=self.group, member=self.member, held_none_since=self.held_none_since, now=time.time()
            )

    def close(self) -> None:
        metrics.forget_member(group=self.group, member=self.member)


class JoinWatch:
    """Logs, once per join, a join of the group that outlasts the session timeout.

    A join can wait on another member: a live one that stopped polling heartbeats on, so its session never
    expires and the broker waits for it to rejoin for its whole rebalance timeout. kafka-python keeps the join
    in flight and sends it again when the request times out (the rebalance timeout plus 5 s); each poll still
    returns within its half second, so the loop goes on, SIGTERM included.

    Why the join is not retried as a new member (leave, then join again): the broker holds every join of the
    group until each member it knows has rejoined or passed its rebalance timeout, whoever asks, so a new member
    waits on the same silent one; and on tansu every new member restarts the rebalance, so a group of two
    would churn. The README's "No unbounded wait" gives what was tried.
    """

    def __init__(self, *, group: str, session_seconds: float) -> None:
        self.group, self.session_seconds = group, session_seconds
        self.joining_since: float | None = None
        self.logged = False

    def check(self, consumer: KafkaConsumer) -> None:
        coordinator = getattr(consumer, "_coordinator", None)
        if coordinator is None or coordinator.stable():
            self.joining_since, self.logged = None, False
            return
        now = time.monotonic()
        if self.joining_since is None:
            self.joining_since = now
        waited = now - self.joining_since
        if waited < self.session_seconds or self.logged:
            return
        self.logged = True
        generation = getattr(coordinator, "_generation", None)
        logger.warning(
            "joining group %s as member %s has taken %.0f s, longer than the session timeout (%.0f s): another "
            "member may hold the group without polling; still joining (kafka-python sends the join again after "
            "%d s)",
            self.group,
            getattr(generation, "member_id", "") or "(none yet)",
            waited,
            self.session_seconds,
            (MAX_POLL_INTERVAL_MS + 5000) // 1000,
        )
