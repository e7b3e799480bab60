"""Every Redis key of ``conversions``: the one module that builds them.

``{P}`` is the shared prefix (``cpsproject.common.redis_keys``). The buyers' views are spread over
``VIEW_SHARDS`` hashes per generation, each its own hash tag, so a Redis Cluster spreads them over its nodes::

    {P:views:{generation}:{shard}}  hash  field "{openid}\\x1f{partition}": the buyer's last partner page views
                                          read from that Kafka partition, newest first, joined by \\x1e, each
                                          "{ts ms, 13 digits}\\x1f{event_id}\\x1f{code}\\x1f{url}"; a generation
                                          is the views whose ts falls in one attribution window (epoch days
                                          // window days); the key expires a window and a day after its
                                          generation ends (attribution)
    {P:views:partitions}             set   the Kafka partitions whose consumers wrote views: the fields a
                                          reader asks for (attribution)
    {P:recorded:{partner id}}:{yyyyMMdd}-{yyyyMMdd}
                                     string "{watermark}|{path}|{JSON}": a partner's recorded figures of a
                                          range (its subtree's orders, refunds, commissions and recounted
                                          days), as of the conversions tables' largest ids and the partner's
                                          path; expires after RECORDED_FIGURES_TTL seconds (selectors)
"""

from django.conf import settings

# Buyers are spread over this many hashes per generation: enough to balance a cluster's nodes, few enough that
# a batch writes each with one command.
VIEW_SHARDS = 64


# How long a range's recorded figures are read from the cache at most: the live figures' promise is a minute.
RECORDED_FIGURES_TTL = 60


def views(generation: int, shard: int) -> str:
    return "{" + settings.CPS_REDIS_PREFIX + f":views:{generation}:{shard}}}"


def view_partitions() -> str:
    return "{" + settings.CPS_REDIS_PREFIX + ":views:partitions}"


def recorded_figures(partner_id: int, first: str, last: str) -> str:
    return "{" + settings.CPS_REDIS_PREFIX + f":recorded:{partner_id}}}:{first}-{last}"
