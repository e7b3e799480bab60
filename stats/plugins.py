"""The one module of ``stats`` other apps may import: how a feature plugs into the ingest pipeline.

A feature registers, in its ``AppConfig.ready()``, the event type it parses and the counter it feeds::

    register_event_type("login", parse_login)      # parse(payload, envelope) -> event, or raise Rejected
    register_counter("logins", event_type="login", queue=queue_logins)   # queue(writes, events, *, now)

The pipeline then parses, archives and dead-letters that type like any other. ``writes`` (``CounterWrites``)
takes the counter's Redis commands for one Kafka partition's events: ``writes.fenced`` ones go in the same
MULTI/EXEC as the partition's offset (so increments count exactly once; their keys must carry
``writes.tag``, the partition's hash tag), ``writes.idempotent`` ones just before it, in any slot. A counter
that keeps state in memory from one batch to the next reads ``writes.first_offset`` and ``writes.next_offset``
(None when the events come from no Kafka read): a batch that does not start where the last one ended was read
again (a seek back after a stale batch or a rebalance, a rebuilt share).

A feature that keeps its events in the database registers a recorder (``register_recorder("orders",
event_type="order", record=record_orders)``, ``record(events, *, batch) -> [Refusal]``): after the archive and
before the counters, it gets the batch's events of its type in ``ts`` order (and ``batch``, every event of the
batch by type), writes them in one transaction, idempotently, and returns those it refuses (dead letters).

A feature that keeps numbers of its own per day recounts them when ``reconcile`` recounts the day:
``register_day_recount("orders", recount)``, ``recount(*, day, now) -> one summary line`` (drift included).

A feature adds its own lines to ``manage.py health`` with ``register_health_check(name, check)``,
``check(now) -> [one line per problem]``.

A feature whose Redis keys changed layout between versions registers the function that moves them
(``register_layout_upgrade("logins", upgrade)``, ``upgrade(client) -> keys moved``): it runs once, before a
consumer counts or a flush reads (``stats.jobs.layout``).

A feature that reads traffic beside its own numbers (conversions: buyers per UV) asks
``partner_uv_days(partner=…, start=…, end=…)``: the partner's subtree UV per day (and whether the day is
reconciled), as the stats API shows it, and ``partner_uv_between(partner, start, end)``, distinct users over
the range.

A feature adds a panel to the dashboard or the partner page with ``register_dashboard_panel(name, render)`` /
``register_partner_page_panel(name, render)`` (``stats.read.panels``), and figures to ``/metrics`` with
``register_metrics(name, collect)``, ``collect() -> prometheus-client metric families`` (``stats.read.metric_sources``).
"""

import datetime as dt
from collections.abc import Iterator
from typing import NamedTuple

from partners.models import Partner
from stats.jobs.reconcile import register_day_recount
from stats.models import DeadLetter
from stats.pipeline.archive import ArchivedEvent, get_archive
from stats.pipeline.events import Rejected, identifier
from stats.pipeline.registry import (
    CommandRecorder,
    CounterWrites,
    Envelope,
    Event,
    RedisClient,
    Refusal,
    register_counter,
    register_event_type,
    register_layout_upgrade,
    register_recorder,
)
from stats.read.health import register_health_check
from stats.read.metric_sources import register_metrics
from stats.read.panels import (
    DashboardPage,
    PartnerPage,
    register_dashboard_panel,
    register_partner_page_panel,
)
from stats.read.selectors import partner_days, uv_between

Reason = DeadLetter.Reason


class TrafficDay(NamedTuple):
    """One day of a partner's subtree traffic, for a feature that reads beside it."""

    uv: int
    reconciled: bool


def partner_uv_days(
    *, partner: Partner, start: dt.date, end: dt.date, now: dt.datetime | None = None
) -> dict[dt.date, TrafficDay]:
    """Return the subtree UV of ``partner`` per day from ``start`` to ``end``, as ``GET partners/{code}/stats/``."""
    return {
        day.date: TrafficDay(day.uv, day.reconciled)
        for day in partner_days(partner=partner, start=start, end=end, now=now)
    }


def partner_uv_between(partner: Partner, start: dt.date, end: dt.date) -> int:
    """Return the distinct users of ``partner``'s subtree from ``start`` to ``end`` (HyperLogLog estimate)."""
    return uv_between(partner, start, end)


def archived_events(day: dt.date) -> Iterator[ArchivedEvent]:
    """Yield each archived event of business day ``day`` once (what ``reconcile`` recounts from)."""
    return get_archive().events(day)


def store_dead_letter(*, source: str, offset: int, reason: str, detail: str, raw: bytes) -> None:
    """Store a dead letter that no Kafka message carries any more (a held refund given up on): ``source``
    names where it was kept and ``offset`` its id there, which make it unique."""
    DeadLetter.objects.get_or_create(
        source=source[:255],
        partition=0,
        offset=offset,
        defaults={"reason": reason, "detail": detail[:500], "raw": raw},
    )


__all__ = [
    "ArchivedEvent",
    "archived_events",
    "CommandRecorder",
    "CounterWrites",
    "DashboardPage",
    "PartnerPage",
    "Envelope",
    "Event",
    "Reason",
    "RedisClient",
    "Refusal",
    "Rejected",
    "TrafficDay",
    "partner_uv_between",
    "partner_uv_days",
    "identifier",
    "register_counter",
    "register_day_recount",
    "register_dashboard_panel",
    "register_event_type",
    "register_health_check",
    "register_layout_upgrade",
    "register_metrics",
    "register_partner_page_panel",
    "register_recorder",
    "store_dead_letter",
]
