"""Figures other apps add to ``/metrics``, without ``stats`` importing them.

A feature registers ``register_metrics(name, collect)``, ``collect() -> metric families`` (prometheus-client's
``GaugeMetricFamily`` and the like), read at every scrape after the pipeline's own. A source that fails is
logged and left out: the scrape still answers.
"""

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

logger = logging.getLogger(__name__)

_sources: dict[str, Callable[[], Iterable[Any]]] = {}


def register_metrics(name: str, collect: Callable[[], Iterable[Any]]) -> None:
    """Add (or replace, under the same ``name``) a source of metric families."""
    _sources[name] = collect


def extra_metrics() -> Iterator[Any]:
    for name, collect in _sources.items():
        try:
            families = list(collect())
        except Exception:  # one broken source must not take the scrape down
            logger.exception("the metrics of %s could not be read", name)
            continue
        yield from families
