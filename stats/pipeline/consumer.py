"""The consumer loop behind ``manage.py consume``: sources, signals, idling. The counting is ``process_batch``."""

import contextlib
import gc
import logging
import os
import signal
import socket
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from pathlib import Path

from django.conf import settings
from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.errors import KafkaError

from cpsproject.common import faults
from stats.conf import stats_setting
from stats.pipeline import metrics
from stats.pipeline.batch import Message, ParsedBatch, Partition, PartnerDirectory, new_message, parse_batch
from stats.pipeline.ingest import BatchResult, build_counters, count_batch, process_batch, stored_offsets
from stats.pipeline.isolation import Backoff, StopRequested
from stats.pipeline.lag import record_end_offsets
from stats.pipeline.record_decoding import decode_records_compiled
from stats.pipeline.storing import archive_in_background

logger = logging.getLogger(__name__)

# How long closing the consumer (leaving the group) may take before the process exits anyway.
CLOSE_TIMEOUT_MS = 5000
# A request to the broker (a fetch, end offsets, a commit) gives up after this long; the loop then goes on.
REQUEST_TIMEOUT_MS = 15_000
# This member's rebalance timeout (see ``_open_consumer``): longer than any batch takes to count.
MAX_POLL_INTERVAL_MS = 60_000
# How often an idle consumer compares the offsets counted with the topic's end offsets.
DRAIN_CHECK_SECONDS = 1.0


# Allocations between two young collections, young collections between two middle ones, and middle ones between
# two full ones (CPython's defaults: 700, 10, 10). See ``tune_garbage_collection``.
GC_THRESHOLDS = (10_000, 50, 10)


def tune_garbage_collection() -> None:
    """Keep the cyclic garbage collector from walking the consumer's heap over and over.

    The consumer allocates a few container objects per event (records, messages, events, counter keys), and the
    batches in flight keep tens of thousands alive. With the default thresholds a young collection ran every
    700 allocations and promoted each batch's objects, and the older collections walked the whole heap, Django's
    start-up objects included: 2.8 s of a 10-second run of 300,000 events (``bench/``, a ``gc.callbacks``
    timer). What is alive after start-up is frozen out of every collection, and a young collection waits for
    10,000 allocations: 0.3 s of GC. The consumer makes little cyclic garbage, so memory does not grow for it.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class StopFlag:
    """Set by SIGTERM/SIGINT; the loop finishes the batch in hand and returns."""

    def __init__(self) -> None:
        self.stopping = False

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop)

    def is_set(self) -> bool:
        return self.stopping

    def _stop(self, signum, frame) -> None:
        logger.info("received %s; finishing the current batch", signal.Signals(signum).name)
        self.stopping = True


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

    def on_partitions_revoked(self, revoked) -> None:
        partitions = sorted(tp.partition for tp in revoked)
        if not self.before_revoke(self.revoke_wait_seconds):
            logger.warning(
                "partitions %s revoked while a batch is still being counted: waited %.1f s (half the session "
                "timeout; longer would stop the heartbeats); if the next owner counts it too, the second apply "
                "is dropped as stale",
                partitions,
                self.revoke_wait_seconds,
            )
        logger.info("partitions revoked: %s", partitions)

    def on_partitions_assigned(self, assigned) -> None:
        stored = stored_offsets(group=self.group, source=self.topic)
        for tp in assigned:
            if tp.partition in stored:
                self.consumer.seek(tp, stored[tp.partition])
        logger.info(
            "partitions assigned: %s (stored offsets %s)",
            sorted(tp.partition for tp in assigned),
            {p: o for p, o in stored.items() if TopicPartition(self.topic, p) in assigned},
        )


def _log_failed_commit(offsets, response) -> None:
    if isinstance(response, Exception):
        logger.warning("Kafka commit failed (%s); offsets stay safe in Redis", response)


def _commit_for_monitoring(consumer: KafkaConsumer, counted: BatchResult) -> None:
    # The offsets that matter are in Redis; this commit only feeds lag monitoring. It names the offsets the
    # batch stored with its counters: the consumer's position is a batch further on, already parsed but not
    # yet counted. It is asynchronous: a synchronous commit retries for up to request_timeout_ms (30 s)
    # whenever the coordinator is slow, dead or rebalancing, and that stall came on every batch of a loaded
    # machine. A failure is logged and the next batch's commit catches up.
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


class IdleClock:
    """Seconds spent polling nothing since the last message.

    Why it accumulates instead of restarting: it used to restart from zero whenever the consumer held no
    partitions, so every rebalance erased the idle time seen so far, and a consumer whose group kept
    rebalancing (a starved process losing its session, a sibling crash-looping) never exited. It also used to
    stop while the consumer held no partitions, so a consumer stuck in a join never exited either. Now only a
    message resets it, and reaching the limit is not enough to exit: the whole topic must be counted to its
    end offsets (``undrained_partitions``), whoever holds it.
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


def undrained_partitions(consumer: KafkaConsumer, *, group: str, topic: str) -> dict[int, tuple[int, int]]:
    """Return each partition of ``topic`` not counted to its end: partition -> (offset counted, end offset).

    The offsets counted are the ones stored in Redis with the counters, whichever member stored them; the end
    offsets are the broker's (the last stable offset: the consumer reads committed records only).
    """
    partitions = consumer.partitions_for_topic(topic) or set()
    tps = [TopicPartition(topic, partition) for partition in sorted(partitions)]
    if not tps:
        return {-1: (0, 0)}  # no metadata yet: nothing is known to be drained
    ends = consumer.end_offsets(tps, timeout_ms=REQUEST_TIMEOUT_MS)
    starts = consumer.beginning_offsets(tps, timeout_ms=REQUEST_TIMEOUT_MS)
    # tansu (the tests' broker) answers a ListOffsets for the end with the last record batch's base offset + 1:
    # where this consumer fetched, the fetch's high watermark is the true end.
    assigned = consumer.assignment()
    ends = {tp: max(end, consumer.highwater(tp) or 0) if tp in assigned else end for tp, end in ends.items()}
    stored = stored_offsets(group=group, source=topic)
    counted = {tp.partition: max(stored.get(tp.partition, 0), starts[tp]) for tp in tps}
    return {tp.partition: (counted[tp.partition], ends[tp]) for tp in tps if counted[tp.partition] < ends[tp]}


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
    in flight and sends it again when the request times out (the rebalance timeout plus 5 s: 65 s with ours);
    each poll still returns within its half second, so the loop goes on, SIGTERM included.

    Why the join is not retried as a new member (leave, then join again): the broker holds every join of the
    group until each member it knows has rejoined or passed its rebalance timeout, whoever asks, so a new member
    waits on the same silent one; and on tansu every new member restarted the rebalance, so a group of two
    churned. The README's "No unbounded wait" gives what was tried.
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


def _read_on_from_stored(consumer: KafkaConsumer, stale: dict[Partition, int]) -> None:
    """Move each partition whose batch was stale to the offset stored in Redis, if this consumer still has it."""
    assigned = consumer.assignment()
    for (topic, partition), stored in stale.items():
        tp = TopicPartition(topic, partition)
        if tp in assigned:
            consumer.seek(tp, stored)


# How often a consumer records the end offsets its fetches saw (for lag on the dashboard and /metrics).
END_OFFSETS_EVERY_SECONDS = 1.0


def _record_high_watermarks(consumer: KafkaConsumer, topic: str) -> None:
    # The fetch responses already carry each partition's end offset: recording them costs no Kafka request.
    ends = {tp.partition: consumer.highwater(tp) for tp in consumer.assignment()}
    record_end_offsets(topic, {p: end for p, end in ends.items() if end is not None})


def _messages(polled: dict[TopicPartition, list]) -> list[Message]:
    """The polled records as ``Message`` tuples, partition by partition in offset order."""
    messages: list[Message] = []
    for tp, records in polled.items():
        # The partition's fields looked up once, and no Python call per record: this runs for every record.
        source, partition = tp.topic, tp.partition
        messages += [new_message((source, partition, record.offset, record.value)) for record in records]
    return messages


class CountingThread:
    """Counts parsed batches one at a time in a thread of its own, while the consumer polls and parses the next.

    Counting a batch whose counters are built (``build_counters``) is waiting: for the archive's inserts and
    for Redis' MULTI/EXEC. Parsing the next batch and building its counters meanwhile keeps the consumer's core
    busy, and each batch's archive starts as soon as it is parsed. Up to ``QUEUED`` batches wait their turn
    behind the one being counted, so that a batch whose archive or Redis apply runs long does not stall the
    parsing. Batches are counted one after another, in poll order, so each partition's offsets still move
    forward one batch at a time. Whatever touches the ``KafkaConsumer`` (commit, seek) stays with the caller:
    the client is not thread-safe.
    """

    # Each batch held costs memory (16,000 events: ~15 MB parsed); see stats.conf CONSUMER_BATCH_SIZE.
    QUEUED = 1

    def __init__(self, *, group: str, stop: StopFlag) -> None:
        self.group, self.stop = group, stop
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="count")
        self.pending: deque[Future[BatchResult]] = deque()
        self.failed = False  # read and written by the counting thread only

    def _count(self, parsed: ParsedBatch) -> BatchResult:
        try:
            # Once a batch failed, the ones queued behind it are not counted: their offsets would move the
            # partition past the failed batch's events, which a restart must read again.
            if self.failed:
                raise StopRequested("an earlier batch was not counted")
            return count_batch(
                parsed, group=self.group, should_stop=self.stop.is_set, archive_concurrently=True
            )
        except BaseException:
            self.failed = True
            raise
        finally:
            # Its archive started when it was handed over. The rows of a batch that is not counted are harmless
            # (a restart stores the same ones), but a write still running after ``close`` would land in whatever
            # this process runs next.
            if parsed.archiving is not None:
                parsed.archiving.exception()

    def start(self, parsed: ParsedBatch) -> list[Future[BatchResult]]:
        """Archive ``parsed`` now and count it after the batches before; return the batches that are done.

        Waits while more than ``QUEUED`` batches wait their turn; the ones returned are in poll order.
        """
        archive_in_background(parsed, should_stop=self.stop.is_set)
        self.pending.append(self.thread.submit(self._count, parsed))
        done = []
        while self.pending and (len(self.pending) > self.QUEUED + 1 or self.pending[0].done()):
            self.pending[0].exception()
            done.append(self.pending.popleft())
        return done

    def wait(self, seconds: float | None = None) -> bool:
        """Wait until every batch handed over is counted, or ``seconds``; return whether they all are.

        ``drain`` or ``start`` hands over the results.
        """
        return not wait_for_futures(self.pending, timeout=seconds).not_done

    def drain(self) -> list[Future[BatchResult]]:
        """Wait for every batch handed over and return them, in poll order."""
        self.wait()
        done, self.pending = list(self.pending), deque()
        return done

    def close(self) -> None:
        self.thread.shutdown(wait=True)


def _open_consumer(*, group: str, topic: str, batch_size: int, counting: CountingThread) -> KafkaConsumer:
    """A consumer subscribed to ``topic`` in ``group``, decoding with ``record_decoding``, every wait bounded."""
    session_ms = stats_setting("KAFKA_SESSION_TIMEOUT_MS")
    consumer = KafkaConsumer(
        bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=session_ms,
        heartbeat_interval_ms=max(500, session_ms // 6),
        # Also the rebalance timeout this member asks for: how long the broker holds a join waiting for every
        # member to rejoin. kafka-python's default (5 min) let one silent member hold every join that long.
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
            before_revoke=counting.wait,
            revoke_wait_seconds=session_ms / 2000,
        ),
    )
    return consumer


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
    group, topic = settings.KAFKA_GROUP_ID, settings.KAFKA_TOPIC
    counting = CountingThread(group=group, stop=stop)
    consumer = _open_consumer(group=group, topic=topic, batch_size=batch_size, counting=counting)
    directory = PartnerDirectory()
    total = BatchResult()
    idle = IdleClock(exit_when_idle)
    joins = JoinWatch(group=group, session_seconds=stats_setting("KAFKA_SESSION_TIMEOUT_MS") / 1000)
    backoff = Backoff(cap=5.0)
    ends_recorded = 0.0
    membership = MembershipReport(group=group)
    waiting_for: set[int] | None = None  # the partitions last logged as behind
    drain_checked = float("-inf")

    def finish(counted: list[Future[BatchResult]]) -> None:
        for future in counted:
            batch = future.result()  # raises what counting raised
            total.add(batch)
            _read_on_from_stored(consumer, batch.stale)
            _commit_for_monitoring(consumer, batch)
            logger.info(
                "batch of %d from %s; so far %s",
                batch.counted + sum(batch.dead.values()),
                topic,
                total.summary(),
            )

    try:
        while not stop.stopping:
            # step 1
            began = time.monotonic()
            try:
                polled = consumer.poll(timeout_ms=500, max_records=batch_size)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                # The broker is away (a restart, the network): kafka-python raises from a rejoin it cannot
                # finish. No batch is in hand, so wait and poll again, as for any other outage.
                delay = backoff.next_delay()
                logger.warning("Kafka unavailable (%s); polling again in %.1f s", exc, delay)
                time.sleep(delay)
                continue
            backoff = Backoff(cap=5.0)
            if began - ends_recorded >= END_OFFSETS_EVERY_SECONDS:
                _record_high_watermarks(consumer, topic)
                ends_recorded = began
            # step 2
            membership.update(consumer)
            joins.check(consumer)
            messages = _messages(polled)
            if messages:  # step 3
                idle.busy()
                faults.reach("polled")
                parsed = parse_batch(messages, directory=directory, should_stop=stop.is_set)
                # The counters' commands too, while the batch before waits for Redis: the counting thread is
                # then left with the waiting alone.
                build_counters(parsed)
                # Parsed: the polled records can go before the next poll (the batches in flight are most of
                # the consumer's memory).
                del polled, messages
                finish(counting.start(parsed))
                continue
            finish(counting.drain())
            # step 4
            if not idle.empty_poll(began=began) or time.monotonic() - drain_checked < DRAIN_CHECK_SECONDS:
                continue
            drain_checked = time.monotonic()
            try:
                behind = undrained_partitions(consumer, group=group, topic=topic)
            except KafkaError as exc:
                logger.warning("could not read the topic's end offsets (%s); checking again", exc)
                continue
            if not behind:
                logger.info(
                    "idle for %.1f s and topic %s is drained: every partition counted to its end offset; exiting",
                    idle.seconds,
                    topic,
                )
                total.drained = topic
                break
            if set(behind) != waiting_for:
                waiting_for = set(behind)
                held = {tp.partition for tp in consumer.assignment()}
                logger.info(
                    "idle for %.1f s, but topic %s is not drained: %s behind their end offsets (counted/end); "
                    "%s; waiting for them",
                    idle.seconds,
                    topic,
                    ", ".join(
                        f"partition {p} {counted}/{end}" for p, (counted, end) in sorted(behind.items())
                    ),
                    "this consumer holds none of them, another member or a rebalance does"
                    if not held & set(behind)
                    else f"this consumer holds partitions {sorted(held)}",
                )
        finish(counting.drain())
    except StopRequested:
        logger.info("stopped while waiting for a service; the batch will be read again")
    finally:
        counting.close()
        membership.close()
        # Bounded: leaving the group must not hold up the exit when the broker does not answer.
        consumer.close(timeout_ms=CLOSE_TIMEOUT_MS)
    return total


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
