"""The Redis key prefix every app builds its keys on, and the keys no single app owns (locks, scratch, throttles).

Every key of the product starts with ``{P}:`` where ``P`` is ``settings.CPS_REDIS_PREFIX`` (environment
``CPS_REDIS_PREFIX``, default ``cps``). The braces make ``P`` a Redis Cluster hash tag, so every key lives in one
slot: the consumer applies a whole batch (counters of many partners plus the Kafka offset they cover) in one
MULTI/EXEC, and scripts touch several keys at once. Each app builds its own keys in its ``keys`` module on
``prefix()``; no key string is formatted anywhere else::

    {P}:lock:{name}            string  lock token (SET NX PX), renewed while its job runs
    {P}:tmp:{token}[:{part}]   any     scratch keys for merges, deleted in the round trip that made them
    {P}:jobs:{field}           hash    job name -> epoch of its last success ("last_success") or its
                                       duration in seconds ("last_duration") (cpsproject.common.jobruns)
    {P}:throttle:{scope}:{who} list    an API client's recent request times (partners.throttling); kept in
                                       Django's cache, which stores it under its own ":1:" version prefix
"""

from functools import cache

from django.conf import settings
from django.core.signals import setting_changed


@cache
def prefix() -> str:
    return "{" + settings.CPS_REDIS_PREFIX + "}"


def _forget_prefix(*, setting: str, **kwargs) -> None:
    # Built once per process (the consumer builds keys per event); tests give each test its own prefix.
    if setting == "CPS_REDIS_PREFIX":
        prefix.cache_clear()


setting_changed.connect(_forget_prefix)


def lock(name: str) -> str:
    return f"{prefix()}:lock:{name}"


def scratch(token: str) -> str:
    """A scratch key with a hash tag of its own: merges spread over a cluster's nodes, and its parts
    (``scratch_part``) share its slot."""
    return "{" + settings.CPS_REDIS_PREFIX + ":tmp:" + token + "}"


def scratch_part(scratch_key: str, part: int) -> str:
    """A second scratch key beside ``scratch_key`` (PFMERGE takes stored HLL bytes only from keys)."""
    return f"{scratch_key}:{part}"


def throttle(scope: str, who: str) -> str:
    """The cache key of one API client's request history under a throttle ``scope`` (``who``: user or address)."""
    return f"{prefix()}:throttle:{scope}:{who}"


def job_runs(field: str) -> str:
    """The hash of one fact about every job's last successful run (``last_success``, ``last_duration``)."""
    return f"{prefix()}:jobs:{field}"
