"""Every Redis key of ``conversions``: the one module that builds them.

``{P}`` is the shared prefix (``cpsproject.common.redis_keys``). A buyer's views are read and written alone, so
each key is its own hash tag on the prefix: a Redis Cluster spreads the buyers over its nodes::

    {P:views:{openid}}   zset   the buyer's last partner page views: member "{code}\\x1f{event_id}\\x1f{url}",
                                score the view's ts in epoch ms; the last few kept, TTL the attribution window
                                (attribution)
"""

from django.conf import settings


def buyer_views(openid: str) -> str:
    return "{" + settings.CPS_REDIS_PREFIX + ":views:" + openid + "}"
