"""The Redis key prefix every app builds its keys on, and the keys no single app owns (locks, scratch, throttles).

Every key of the product starts with ``{P`` where ``P`` is ``settings.CPS_REDIS_PREFIX`` (environment
``CPS_REDIS_PREFIX``, default ``cps``), inside a Redis Cluster hash tag. Keys that are read or written
together share a tag, and so a slot: ``{P}:…`` for what is shared and small, ``{P:pN}:…`` for a Kafka
partition's counters with its offset (one MULTI/EXEC per batch; ``stats.keys``), and tags of their own where
keys are independent (a block of users' logins, a merge's scratch keys, a client's throttle log), so that a
cluster spreads them. Each app builds its own keys in its ``keys`` module on ``prefix()``; no key string is
formatted anywhere else (docs/architecture.md has the table of every structure and its tag)::

    {P}:lock:{name}            string  lock token (SET NX PX), renewed while its job runs
    {P:tmp:{token}}[:{part}]   any     scratch keys for merges, deleted in the round trip that made them
    {P}:jobs:{field}           hash    job name -> epoch of its last success ("last_success") or its
                                       duration in seconds ("last_duration") (cpsproject.common.jobruns)
    {P:throttle:{scope}:{who}} list    an API client's recent request times, newest first (partners.throttling);
                                       a hash tag per client, so the API's logs spread over a cluster
"""

from functools import cache

from django.conf import settings
from django.core.signals import setting_changed


@cache
def prefix() -> str:
    return "{" + settings.CPS_REDIS_PREFIX + "}"


def _forget_prefix(*, setting: str, **kwargs: object) -> None:
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
    """The log of one API client's request times under a throttle ``scope`` (``who``: user or address)."""
    return "{" + settings.CPS_REDIS_PREFIX + ":throttle:" + scope + ":" + who + "}"


def job_runs(field: str) -> str:
    """The hash of one fact about every job's last successful run (``last_success``, ``last_duration``)."""
    return f"{prefix()}:jobs:{field}"
