"""django-redis on a Redis Cluster: ``REDIS_CLUSTER=1`` makes every ``get_redis_connection`` a ``RedisCluster``.

django-redis builds a ``redis.Redis`` on a connection pool per URL; a cluster client keeps a pool per node and
a map of which node serves which slot, follows MOVED and ASK, and refreshes the map after a failover. So the
factory hands out one ``RedisCluster`` per URL and process, started from the node the URL names (any node:
it asks that one for the others).
"""

from typing import Any

from django_redis.pool import ConnectionFactory
from redis.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException

_FORWARDED = ("username", "password", "socket_timeout", "socket_connect_timeout")


class ClusterConnectionFactory(ConnectionFactory):
    _clusters: dict[str, RedisCluster] = {}

    def get_connection(self, params: dict[str, Any]) -> RedisCluster:
        url = params["url"]
        if url not in self._clusters:
            options = {name: params[name] for name in _FORWARDED if name in params}
            try:
                self._clusters[url] = RedisCluster.from_url(url, **options)
            except RedisClusterException as exc:
                # Not a RedisError: every "Redis is out of reach" path (health's one line, the consumer's wait
                # with backoff) would miss it. Its reason is the node's own connection error.
                reason = str(exc).split("reachable node: ", 1)[-1]
                raise RedisConnectionError(reason) from exc
        return self._clusters[url]

    def disconnect(self, connection: RedisCluster) -> None:
        connection.close()
