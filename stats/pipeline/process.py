"""The consumer process itself: how it stops on a signal, and how its garbage collector is tuned."""

import gc
import logging
import signal
from types import FrameType

logger = logging.getLogger("stats.pipeline.consumer")  # the consumer's lines keep one logger name

# Allocations between two young collections, young collections between two middle ones, and middle ones between
# two full ones (CPython's defaults: 700, 10, 10). See ``tune_garbage_collection``.
GC_THRESHOLDS = (10_000, 50, 10)


def tune_garbage_collection() -> None:
    """Keep the cyclic garbage collector from walking the consumer's heap over and over.

    The consumer allocates a few container objects per event (records, messages, events, counter keys), and the
    batches in flight keep tens of thousands alive. With the default thresholds a young collection runs every
    700 allocations and promotes each batch's objects, and the older collections walk the whole heap, Django's
    start-up objects included, so collecting would take a large share of the consumer's time (``bench/``
    measures it). What is alive after start-up is frozen out of every collection, and a young collection waits
    for 10,000 allocations. The consumer makes little cyclic garbage, so memory does not grow for it.
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

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        logger.info("received %s; finishing the current batch", signal.Signals(signum).name)
        self.stopping = True
