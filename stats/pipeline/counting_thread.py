"""The consumer's counting thread: parsed batches counted one at a time while the main thread polls."""

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures

from stats.pipeline.batch import ParsedBatch
from stats.pipeline.ingest import BatchResult, count_batch
from stats.pipeline.isolation import StopRequested
from stats.pipeline.process import StopFlag
from stats.pipeline.storing import archive_in_background


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

    # Each batch held costs memory (most of the consumer's); see stats.conf CONSUMER_BATCH_SIZE.
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
