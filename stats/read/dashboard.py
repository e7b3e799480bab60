"""The figures of the statistics dashboard and the partner page, for the views that render them.

The views (``stats.dashboard.views``) parse their parameters, call these and render; every query and total
the pages show is made here, from the selectors of ``stats.read.selectors``, the rankings and the pipeline's
status.
"""

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.db.models import QuerySet

from cpsproject.common.timeutil import to_local
from partners.models import Partner
from stats.counters.rankings import top_partners, windows
from stats.counters.uniques import SELF, TREE
from stats.models import DeadLetter
from stats.read.selectors import (
    DayNumbers,
    minute_series,
    partner_days,
    site_days,
    site_uv_between,
    uv_between,
)

logger = logging.getLogger(__name__)

TOP_LIMIT = 10  # partners on each ranking board
MAX_MATCHES = 20  # partners listed to choose from when the partner box matches several


def previous_period(start: dt.date, end: dt.date) -> tuple[dt.date, dt.date]:
    """Return the period of as many days as ``start..end`` that ends the day before ``start``."""
    days = (end - start).days + 1
    return start - dt.timedelta(days=days), start - dt.timedelta(days=1)


@dataclass(frozen=True)
class Totals:
    """A period's PV and UV (None: not known, e.g. a union too large to merge) and the whole site's."""

    pv: int
    uv: int | None
    site_pv: int | None = None
    site_uv: int | None = None


class ScopedDay(NamedTuple):
    """A day, and its PV and UV in the page's scope (the subtree's, or the own traffic's)."""

    day: DayNumbers
    pv: int
    uv: int


def in_scope(day: DayNumbers, scope: str) -> tuple[int, int]:
    """Return the day's PV and UV in ``scope``: ``"self"`` the own traffic, else the subtree's."""
    return (day.pv_self, day.uv_self) if scope == SELF else (day.pv, day.uv)


# --- The dashboard ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartnerSearch:
    """What the partner box found: one partner, or None and the partners whose name holds the text."""

    partner: Partner | None
    matches: list[Partner]  # at most MAX_MATCHES + 1: one more than listed says that there are more


def partner_search(*, text: str) -> PartnerSearch:
    """The partner whose code is ``text``, else the one whose name is or contains it, any case."""
    partner = (
        Partner.objects.filter(code=text).first()
        or Partner.objects.filter(code__iexact=text).order_by("code").first()
        or Partner.objects.filter(name__iexact=text).order_by("code").first()
    )
    if partner is not None:
        return PartnerSearch(partner, [])
    named = list(Partner.objects.filter(name__icontains=text).order_by("code")[: MAX_MATCHES + 1])
    if len(named) == 1:
        return PartnerSearch(named[0], [])
    return PartnerSearch(None, named)


def partner_choices() -> QuerySet[Partner, tuple[str, str, int]]:
    """The partner picker's suggestions: every partner's code, name and level, the tree in order."""
    return Partner.objects.order_by("path").values_list("code", "name", "level")


@dataclass(frozen=True)
class DashboardFigures:
    """What the dashboard shows of one partner (or all traffic) in one scope over a range of days."""

    scope: str
    days: list[ScopedDay]
    today: DayNumbers
    range_pv: int
    range_uv: int | None  # None: a union too large to merge
    previous: tuple[dt.date, dt.date]  # the period compared with: as many days, just before
    current_totals: Totals
    previous_totals: Totals
    minutes: list[tuple[dt.datetime, int]]  # PV per minute over the last hour

    @property
    def today_pv_uv(self) -> tuple[int, int]:
        return in_scope(self.today, self.scope)

    @property
    def minute_total(self) -> int:
        return sum(count for _moment, count in self.minutes)


def dashboard_figures(
    *, partner: Partner | None, scope: str, start: dt.date, end: dt.date, today: dt.date, now: dt.datetime
) -> DashboardFigures:
    """Return the dashboard's figures of ``partner`` (None: all traffic) in ``scope`` over ``start..end``.

    Steps: 1. the range's days and its UV (a union over the days, never a sum); 2. today's numbers; 3. the
    totals of the range and of the period before it (with a partner, the site's beside them, for its
    shares); 4. the last hour per minute.
    """
    # step 1
    if partner is not None:
        days = partner_days(partner=partner, start=start, end=end, now=now)
        range_uv: int | None = _partner_range_uv(partner, days, start, end, scope=scope)
    else:
        days = site_days(start=start, end=end, now=now)
        # The no-partner traffic alone has no union over days here; a very long range gives None (shown —).
        range_uv = _site_range_uv(days, start, end, now=now) if scope == TREE else None
    scoped = [ScopedDay(day, *in_scope(day, scope)) for day in days]
    range_pv = sum(day.pv for day in scoped)
    # step 2
    if start <= today <= end:  # the default range ends today: read it once
        today_numbers = days[(today - start).days]
    elif partner is not None:
        today_numbers = partner_days(partner=partner, start=today, end=today, now=now)[0]
    else:
        today_numbers = site_days(start=today, end=today, now=now)[0]
    # step 3
    previous = previous_period(start, end)
    if partner is not None:
        current = Totals(range_pv, range_uv, *site_totals(start, end, now=now))
        before = Totals(
            *partner_totals(partner, *previous, scope=scope, now=now), *site_totals(*previous, now=now)
        )
    else:
        current, before = Totals(range_pv, range_uv), _site_scope_totals(*previous, scope=scope, now=now)
    # step 4
    minutes = minute_series(partner=partner, scope=scope, start=now - dt.timedelta(minutes=59), end=now)
    return DashboardFigures(
        scope, scoped, today_numbers, range_pv, range_uv, previous, current, before, minutes
    )


def partner_totals(
    partner: Partner, start: dt.date, end: dt.date, *, scope: str, now: dt.datetime
) -> tuple[int, int]:
    """The PV and UV of ``partner`` in ``scope`` over ``start..end`` (UV a union over the days)."""
    days = partner_days(partner=partner, start=start, end=end, now=now)
    return sum(in_scope(day, scope)[0] for day in days), _partner_range_uv(
        partner, days, start, end, scope=scope
    )


def _partner_range_uv(
    partner: Partner, days: list[DayNumbers], start: dt.date, end: dt.date, *, scope: str
) -> int:
    """UV over ``start..end``: one day's is that day's as the lists and the API show it (exact once
    reconciled); a union of HyperLogLogs, an estimate, would differ from it by its error."""
    if start == end:
        return in_scope(days[0], scope)[1]
    return uv_between(partner, start, end, scope=scope)


def site_totals(start: dt.date, end: dt.date, *, now: dt.datetime) -> tuple[int, int | None]:
    """The whole site's PV and UV over ``start..end``: the denominators of a partner's shares."""
    days = site_days(start=start, end=end, now=now)
    return sum(day.pv for day in days), _site_range_uv(days, start, end, now=now)


def _site_scope_totals(start: dt.date, end: dt.date, *, scope: str, now: dt.datetime) -> Totals:
    """All traffic's PV and UV in ``scope`` (the no-partner traffic's UV over a range is not known)."""
    days = site_days(start=start, end=end, now=now)
    uv = _site_range_uv(days, start, end, now=now) if scope == TREE else None
    return Totals(sum(in_scope(day, scope)[0] for day in days), uv)


def _site_range_uv(days: list[DayNumbers], start: dt.date, end: dt.date, *, now: dt.datetime) -> int | None:
    """The whole site's UV over ``start..end``: one day's as the site's day list shows it (a single source's
    own figure, exact once reconciled, where the union of its HyperLogLogs would be an estimate)."""
    if start == end:
        return days[0].uv
    return site_uv_between(start=start, end=end, now=now)


@dataclass(frozen=True)
class Ranked:
    rank: int
    code: str
    name: str
    pv: int


def ranking_boards(*, now: dt.datetime, scope: str) -> list[tuple[str, list[Ranked]]]:
    """Each window's top partners: by their subtree's PV, or with ``scope="self"`` by their own."""
    boards = {name: top_partners(window=name, scope=scope, limit=TOP_LIMIT, now=now) for name in windows()}
    codes = {entry.partner for board in boards.values() for entry in board}
    names = dict(Partner.objects.filter(code__in=codes).values_list("code", "name"))
    return [
        (name, [Ranked(e.rank, e.partner, names.get(e.partner, ""), e.pv) for e in board])
        for name, board in boards.items()
    ]


def _reason_labels(counts: dict[str, int]) -> list[tuple[str, int]]:
    """Show each dead-letter reason by its label, most frequent first."""
    labels = dict(DeadLetter.Reason.choices)
    return sorted(((str(labels.get(reason, reason)), n) for reason, n in counts.items()), key=lambda r: -r[1])


def pipeline_health(*, today: dt.date) -> dict[str, Any] | None:
    """Gather the pipeline-health panel; None when ``stats.read.pipeline_status`` is not installed.

    Each figure is read on its own: one that fails is logged and shown as unavailable, the page still renders.
    """
    try:
        from stats.read import pipeline_status
    except ImportError:
        return None
    panel: dict[str, Any] = {}
    readers = {
        "lag": pipeline_status.consumer_lag,
        "last_flush": lambda: pipeline_status.last_job_success("flush"),
        "last_reconcile": lambda: pipeline_status.last_job_success("reconcile"),
        "dead_letters": lambda: _reason_labels(pipeline_status.dead_letters_by_reason(day=today)),
        "drift": pipeline_status.last_reconcile_drift,
    }
    for name, read in readers.items():
        try:
            panel[name] = read()
        except Exception:  # one broken figure must not hide the others
            logger.exception("the dashboard could not read %s", name)
            panel[name] = None
            panel.setdefault("failed", []).append(name)
    for name in ("last_flush", "last_reconcile"):
        if panel.get(name):
            panel[name] = to_local(panel[name])
    # Lag is as of when its end offsets were seen (by a consumer or the probe job): say how old the oldest is.
    seen = [row.seen_at for row in panel.get("lag") or () if row.seen_at is not None]
    panel["lag_seen"] = to_local(min(seen)) if seen else None
    return panel


# --- The partner page ---------------------------------------------------------------------------------


def partner_named(*, code: str) -> Partner | None:
    """The partner whose code is exactly ``code``."""
    return Partner.objects.filter(code=code).first()


def partner_ancestors(*, partner: Partner) -> list[Partner]:
    """The partner's ancestors, the root first."""
    return list(Partner.objects.filter(pk__in=partner.ancestor_ids).order_by("level"))


@dataclass(frozen=True)
class NetworkRow:
    date: dt.date
    own: DayNumbers
    children: list[DayNumbers]


@dataclass(frozen=True)
class NetworkTotals:
    """The range's totals of the partner page: UV over the range is a union of the days, never a sum."""

    pv: int
    pv_self: int
    uv: int
    uv_self: int
    children: list[tuple[int, int]]  # each child's PV and UV, in the page's order


@dataclass(frozen=True)
class NetworkFigures:
    """One partner's days with its children's side by side, and the range's totals."""

    children: list[Partner]  # by code
    own: list[DayNumbers]
    per_child: list[list[DayNumbers]]  # each child's days, in the order of ``children``
    rows: list[NetworkRow]
    totals: NetworkTotals


def partner_network_figures(
    *, partner: Partner, start: dt.date, end: dt.date, now: dt.datetime
) -> NetworkFigures:
    """Return the partner page's table of ``partner`` and its children over ``start..end``."""
    children = list(partner.children.order_by("code"))
    own = partner_days(partner=partner, start=start, end=end, now=now)
    per_child = [partner_days(partner=child, start=start, end=end, now=now) for child in children]
    rows = [NetworkRow(day.date, day, [days[index] for days in per_child]) for index, day in enumerate(own)]
    totals = NetworkTotals(
        pv=sum(d.pv for d in own),
        pv_self=sum(d.pv_self for d in own),
        uv=uv_between(partner, start, end),
        uv_self=uv_between(partner, start, end, scope=SELF),
        children=[
            (sum(d.pv for d in days), uv_between(child, start, end))
            for child, days in zip(children, per_child, strict=True)
        ],
    )
    return NetworkFigures(children, own, per_child, rows, totals)


def partner_network_comparison(
    *, partner: Partner, totals: NetworkTotals, start: dt.date, end: dt.date, now: dt.datetime
) -> tuple[tuple[dt.date, dt.date], Totals, Totals]:
    """The period before ``start..end``, and the partner's subtree totals then and now beside the site's."""
    previous = previous_period(start, end)
    current = Totals(totals.pv, totals.uv, *site_totals(start, end, now=now))
    before = Totals(
        *partner_totals(partner, *previous, scope=TREE, now=now), *site_totals(*previous, now=now)
    )
    return previous, current, before
