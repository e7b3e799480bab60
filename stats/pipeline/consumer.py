"""The consumer loop behind ``manage.py consume``, as numbered steps; and the replay of a JSON-lines file.

The pieces it calls each hold one idea and run without a broker: ``process`` (signals, garbage collection),
``group`` (the ``KafkaConsumer``, assignments, commits, membership and join reports), ``counting_thread``
(batches counted while the next is parsed), ``idle`` (when an idle consumer may exit). The counting itself is
``ingest``.
"""

import contextlib
import logging
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

from django.conf import settings
from kafka import TopicPartition
from kafka.errors import KafkaError

from cpsproject.common import faults
from stats.conf import stats_setting
from stats.pipeline.batch import Message, ParsedBatch, PartnerDirectory, parse_batch
from stats.pipeline.counting import build_counters
from stats.pipeline.counting_thread import CountingThread
from stats.pipeline.group import (
    CLOSE_TIMEOUT_MS,
    END_OFFSETS_EVERY_SECONDS,
    JoinWatch,
    MembershipReport,
    commit_for_monitoring,
    messages_of,
    open_consumer,
    read_on_from_stored,
    record_high_watermarks,
)
from stats.pipeline.idle import DrainWatch
from stats.pipeline.ingest import BatchResult, process_batch
from stats.pipeline.isolation import Backoff, StopRequested
from stats.pipeline.offsets import stored_offsets
from stats.pipeline.process import StopFlag, tune_garbage_collection

__all__ = ["StopFlag", "consume_file", "consume_kafka", "read_file", "tune_garbage_collection"]

logger = logging.getLogger(__name__)


class _KafkaLoop:
    """One run of ``consume_kafka``: what its steps share, a method per step."""

    def __init__(self, *, batch_size: int, exit_when_idle: float | None, stop: StopFlag) -> None:
        self.group, self.topic = settings.KAFKA_GROUP_ID, settings.KAFKA_TOPIC
        self.batch_size, self.stop = batch_size, stop
        self.counting = CountingThread(group=self.group, stop=stop)
        self.consumer = open_consumer(
            group=self.group, topic=self.topic, batch_size=batch_size, before_revoke=self.counting.wait
        )
        self.directory = PartnerDirectory()
        self.total = BatchResult()
        self.drain = DrainWatch(group=self.group, topic=self.topic, exit_when_idle=exit_when_idle)
        self.joins = JoinWatch(
            group=self.group, session_seconds=stats_setting("KAFKA_SESSION_TIMEOUT_MS") / 1000
        )
        self.membership = MembershipReport(group=self.group)
        self.backoff = Backoff(cap=5.0)
        self.ends_recorded = 0.0

    def poll(self, began: float) -> dict[TopicPartition, list] | None:
        """Step 1: return what came within half a second, or None after an outage of the broker (waited out)."""
        try:
            polled = self.consumer.poll(timeout_ms=500, max_records=self.batch_size)
        except KafkaError as exc:
            if not exc.retriable:
                raise
            # The broker is away (a restart, the network): kafka-python raises from a rejoin it cannot
            # finish. No batch is in hand, so wait and poll again, as for any other outage.
            delay = self.backoff.next_delay()
            logger.warning("Kafka unavailable (%s); polling again in %.1f s", exc, delay)
            time.sleep(delay)
            return None
        self.backoff = Backoff(cap=5.0)
        if began - self.ends_recorded >= END_OFFSETS_EVERY_SECONDS:
            record_high_watermarks(self.consumer, self.topic)
            self.ends_recorded = began
        return polled

    def report(self) -> None:
        """Step 2."""
        self.membership.update(self.consumer)
        self.joins.check(self.consumer)

    def parse(self, messages: list[Message]) -> ParsedBatch:
        """Step 3, on the main thread: the batch and its counters' commands, while the batch before waits for
        Redis (the counting thread is then left with the waiting alone)."""
        self.drain.idle.busy()
        faults.reach("polled")
        parsed = parse_batch(messages, directory=self.directory, should_stop=self.stop.is_set)
        build_counters(parsed)
        return parsed

    def finish(self, counted: list[Future[BatchResult]]) -> None:
        """Step 3, for the batches the counting thread has done: read on past stale ones, commit the rest."""
        for future in counted:
            batch = future.result()  # raises what counting raised
            self.total.add(batch)
            read_on_from_stored(self.consumer, batch.stale)
            commit_for_monitoring(self.consumer, batch)
            logger.info(
                "batch of %d from %s; so far %s",
                batch.counted + sum(batch.dead.values()),
                self.topic,
                self.total.summary(),
            )

    def close(self) -> None:
        self.counting.close()
        self.membership.close()
        # Bounded: leaving the group must not hold up the exit when the broker does not answer.
        self.consumer.close(timeout_ms=CLOSE_TIMEOUT_MS)


def consume_kafka(*, batch_size: int, exit_when_idle: float | None, stop: StopFlag) -> BatchResult:
    """Consume the configured topic in the configured group until stopped, or idle with the topic drained.

    1. Poll: at most half a second, a join of the group included.
    2. Report whether this consumer holds partitions (for ``health``); log a join that outlasts the session
       timeout.
    3. Parse what came, its counters' commands with it, and hand it to the counting thread, which archives it
       and applies it to Redis with its offsets; commit the batches it has finished to Kafka (for lag
       monitoring only).
    4. Idle for ``exit_when_idle`` seconds: exit once every partition of the topic is counted to its end
       offset, whoever holds it; until then say which are behind (once) and go on polling.
    """
    loop = _KafkaLoop(batch_size=batch_size, exit_when_idle=exit_when_idle, stop=stop)
    try:
        while not stop.stopping:
            began = time.monotonic()
            polled = loop.poll(began)  # step 1
            if polled is None:
                continue
            loop.report()  # step 2
            messages = messages_of(polled)
            del polled  # the Messages hold what is needed of the records
            if messages:  # step 3
                parsed = loop.parse(messages)
                # Parsed: the messages can go before the next poll (the batches in flight are most of the
                # consumer's memory).
                del messages
                loop.finish(loop.counting.start(parsed))
                continue
            loop.finish(loop.counting.drain())
            if loop.drain.drained(loop.consumer, began=began):  # step 4
                loop.total.drained = loop.topic
                break
        loop.finish(loop.counting.drain())
    except StopRequested:
        logger.info("stopped while waiting for a service; the batch will be read again")
    finally:
        loop.close()
    return loop.total


def read_file(path: Path, *, start: int) -> Iterator[Message]:
    source = f"file:{path.resolve()}"
    with path.open("rb") as lines:
        for offset, line in enumerate(lines):
            if offset >= start:
                yield Message(source=source, partition=0, offset=offset, value=line.rstrip(b"\r\n"))


def consume_file(path: Path, *, batch_size: int, stop: StopFlag) -> BatchResult:
    """Replay a JSON-lines file, one line per message, resuming after the last line already counted."""
    group = settings.KAFKA_GROUP_ID
    source = f"file:{path.resolve()}"
    start = stored_offsets(group=group, source=source).get(0, 0)
    directory = PartnerDirectory()
    total = BatchResult()
    batch: list[Message] = []
    for message in read_file(path, start=start):
        if message.value:
            batch.append(message)
        if len(batch) >= batch_size:
            try:
                total.add(process_batch(batch, group=group, directory=directory, should_stop=stop.is_set))
            except StopRequested:
                return total
            logger.info("replayed up to line %d of %s; %s", message.offset + 1, path, total.summary())
            batch = []
            if stop.stopping:
                return total
    if batch:
        with contextlib.suppress(StopRequested):
            total.add(process_batch(batch, group=group, directory=directory, should_stop=stop.is_set))
    return total
