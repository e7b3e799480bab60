"""Dead letters counted per reason: the one module that knows their Redis hash.

Per Kafka partition one hash (``keys.dead_letter_counts``), reason -> dead letters counted. A batch's counts are
queued on its partition's MULTI/EXEC, with its counters and its offset (``stats.pipeline.offsets``), so each
dead letter is counted exactly once however often its batch is read; ``/metrics`` and ``health`` add the
partitions up. The dead letters themselves, with their raw bytes, are rows (``stats.pipeline.storing``).
"""

from collections import Counter

from redis.client import Pipeline
from redis.cluster import ClusterPipeline

from stats import keys
from stats.pipeline.partitions import summed_hashes
from stats.pipeline.registry import RedisClient


def queue_add(pipe: Pipeline | ClusterPipeline, partition: int, counts: Counter[str]) -> None:
    """Queue adding ``counts`` (reason -> dead letters) to ``partition``'s hash, on its transaction ``pipe``."""
    if not counts:
        return
    key = keys.dead_letter_counts(partition)
    for reason, n in counts.items():
        pipe.hincrby(key, reason, n)
    pipe.expire(key, keys.LONG_TTL)


def counted(client: RedisClient) -> dict[str, int]:
    """Return every dead letter counted so far, by reason, over every partition."""
    return dict(sorted(summed_hashes(client, keys.dead_letter_counts).items()))
