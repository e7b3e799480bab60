"""The dashboard (the admin index) and the partner page: read the selectors, hand numbers to templates.

Both pages are statistics, for staff with ``stats.view_dailystat`` (the site checks it before calling them).
Query parameters are validated by the shared parsers; a bad one becomes a message on the page and its default
is used instead, never a 500.
"""

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from rest_framework.exceptions import ValidationError

from cpsproject.common.admin_csv import csv_download
from cpsproject.common.params import choice_param, date_param
from cpsproject.common.timeutil import local_day, to_local
from partners.models import Partner
from stats.counters.rankings import top_partners, windows
from stats.counters.uniques import SELF, TREE
from stats.dashboard.charts import Line, bar_chart, line_chart
from stats.dashboard.comparison import Totals, compare, previous_period
from stats.models import DeadLetter
from stats.read.panels import DashboardPage, PartnerPage, dashboard_panels, partner_page_panels
from stats.read.selectors import (
    DayNumbers,
    minute_series,
    partner_days,
    site_days,
    site_uv_between,
    uv_between,
)

logger = logging.getLogger(__name__)

DEFAULT_DAYS = 30
MAX_DAYS = 366
TOP_LIMIT = 10
CHILD_COLOURS = 8  # children's lines take these colours in turn (admin.css: .series.c0 … .c7)


# The date fields as the filters label them: a message names what the reader sees, not the query parameter.
DATE_LABELS = {"start": gettext_lazy("From"), "end": gettext_lazy("to")}


def _bad_date(params, name: str) -> str:
    raw = str(params.get(name, ""))
    return _("“%(label)s” must be a date as YYYY-MM-DD, not “%(value)s”") % {
        "label": DATE_LABELS[name],
        "value": raw if len(raw) <= 40 else raw[:40] + "…",
    }


def _date_range(request: HttpRequest, today: dt.date, days: int) -> tuple[dt.date, dt.date]:
    """``?start=&end=``, by default the last ``days`` days; an end after today stops at today, with a message.

    A range that cannot be shown gets a message naming the fields by their labels, and the default instead.
    """
    default = (today - dt.timedelta(days=days - 1), today)
    dates, problem = {}, None
    for name, fallback in zip(("start", "end"), default, strict=True):
        try:
            dates[name] = date_param(request.GET, name, default=fallback)
        except ValidationError:
            problem = problem or _bad_date(request.GET, name)
    if problem is None and dates["start"] > today:
        messages.warning(
            request,
            _(
                "The range starts on %(start)s, after today: no traffic is counted yet; showing %(first)s to "
                "%(end)s instead."
            )
            % {"start": dates["start"], "first": default[0], "end": default[1]},
        )
        return default
    if problem is None:
        start, end = dates["start"], min(dates["end"], today)
        if end < start:
            problem = _("“%(to)s” is before “%(from)s”") % {
                "to": DATE_LABELS["end"],
                "from": DATE_LABELS["start"],
            }
        elif (end - start).days + 1 > MAX_DAYS:
            problem = _("the range covers more than %(days)d days") % {"days": MAX_DAYS}
    if problem is not None:
        messages.warning(
            request,
            _("The date range was not understood (%(error)s); showing %(start)s to %(end)s instead.")
            % {"error": problem, "start": default[0], "end": default[1]},
        )
        return default
    if dates["end"] > today:
        messages.warning(
            request,
            _("The end date %(end)s is in the future; showing %(start)s to today, %(today)s.")
            % {"end": dates["end"], "start": start, "today": today},
        )
    return start, end


def _scope(request: HttpRequest, *, partner_chosen: bool) -> str:
    try:
        return choice_param(request.GET, "scope", choices=[TREE, SELF], default=TREE)
    except ValidationError:
        # The labels of the page's scope selector, not the values it sends.
        own = _("own traffic only") if partner_chosen else _("traffic without a partner")
        messages.warning(
            request,
            _("Scope must be “%(tree)s” or “%(self)s”; showing “%(tree)s”.")
            % {"tree": _("with sub-partners"), "self": own},
        )
        return TREE


def _pick(day: DayNumbers, scope: str) -> tuple[int, int]:
    return (day.pv_self, day.uv_self) if scope == SELF else (day.pv, day.uv)


def _reason_labels(counts: dict[str, int]) -> list[tuple[str, int]]:
    """Show each dead-letter reason by its label, most frequent first."""
    labels = dict(DeadLetter.Reason.choices)
    return sorted(((str(labels.get(reason, reason)), n) for reason, n in counts.items()), key=lambda r: -r[1])


def pipeline_health(*, today: dt.date) -> dict | None:
    """Gather the pipeline-health panel; None when ``stats.read.pipeline_status`` is not installed.

    Each figure is read on its own: one that fails is logged and shown as unavailable, the page still renders.
    """
    try:
        from stats.read import pipeline_status
    except ImportError:
        return None
    panel: dict = {}
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


@dataclass(frozen=True)
class Ranked:
    rank: int
    code: str
    name: str
    pv: int


def _rankings(now: dt.datetime, *, scope: str) -> list[tuple[str, list[Ranked]]]:
    """Each window's top partners: by their subtree's PV, or with ``scope="self"`` by their own."""
    boards = {name: top_partners(window=name, scope=scope, limit=TOP_LIMIT, now=now) for name in windows()}
    codes = {entry.partner for board in boards.values() for entry in board}
    names = dict(Partner.objects.filter(code__in=codes).values_list("code", "name"))
    return [
        (name, [Ranked(e.rank, e.partner, names.get(e.partner, ""), e.pv) for e in board])
        for name, board in boards.items()
    ]


MAX_MATCHES = 20  # partners listed to choose from when the partner box matches several


def _find_partner(request: HttpRequest, text: str) -> tuple[Partner | None, list[Partner]]:
    """The partner whose code is ``text``, else the one whose name is or contains it, any case.

    Several matches: None and the first ``MAX_MATCHES`` of them to choose from, with a message.
    """
    partner = (
        Partner.objects.filter(code=text).first()
        or Partner.objects.filter(code__iexact=text).order_by("code").first()
        or Partner.objects.filter(name__iexact=text).order_by("code").first()
    )
    if partner is not None:
        return partner, []
    named = list(Partner.objects.filter(name__icontains=text).order_by("code")[: MAX_MATCHES + 1])
    if len(named) == 1:
        return named[0], []
    if named:
        listed = ", ".join(f"{p.code} ({p.name})" for p in named[:5]) + (", …" if len(named) > 5 else "")
        messages.warning(
            request,
            _("Several partners match %(text)s: %(partners)s; showing all traffic.")
            % {"text": text, "partners": listed},
        )
    else:
        messages.warning(
            request, _("No partner has the code or name %(text)s; showing all traffic.") % {"text": text}
        )
    return None, named[:MAX_MATCHES]


def _match_links(request: HttpRequest, matches: list[Partner]) -> list[tuple[Partner, str]]:
    """Each match with the dashboard's address showing it, the page's other parameters kept."""
    links = []
    for match in matches:
        params = request.GET.copy()
        params["partner"] = match.code
        links.append((match, f"{request.path}?{params.urlencode()}"))
    return links


def _partner_totals(
    partner: Partner, start: dt.date, end: dt.date, *, scope: str, now: dt.datetime
) -> tuple[int, int]:
    days = partner_days(partner=partner, start=start, end=end, now=now)
    return sum(_pick(day, scope)[0] for day in days), uv_between(partner, start, end, scope=scope)


def _site_totals(start: dt.date, end: dt.date, *, now: dt.datetime) -> tuple[int, int | None]:
    """The whole site's PV and UV over ``start..end``: the denominators of a partner's shares."""
    days = site_days(start=start, end=end, now=now)
    return sum(day.pv for day in days), site_uv_between(start=start, end=end, now=now)


def dashboard(request: HttpRequest, *, site) -> HttpResponse:
    """Today so far, the chosen range as a chart, rankings, the last hour per minute and the pipeline's health."""
    now = timezone.now()  # one clock reading per page
    today = local_day(now)
    start, end = _date_range(request, today, DEFAULT_DAYS)
    code = request.GET.get("partner", "").strip()
    partner, matches = _find_partner(request, code) if code else (None, [])
    scope = _scope(request, partner_chosen=partner is not None)
    if partner is not None:
        days = partner_days(partner=partner, start=start, end=end, now=now)
        range_uv = uv_between(partner, start, end, scope=scope)
    else:
        days = site_days(start=start, end=end, now=now)
        # The no-partner traffic alone has no union over days here; a very long range gives None (shown —).
        range_uv = site_uv_between(start=start, end=end, now=now) if scope == TREE else None
    if start <= today <= end:  # the default range ends today: read it once
        today_numbers = days[(today - start).days]
    elif partner is not None:
        today_numbers = partner_days(partner=partner, start=today, end=today, now=now)[0]
    else:
        today_numbers = site_days(start=today, end=today, now=now)[0]
    picked = [(day, *_pick(day, scope)) for day in days]
    range_pv = sum(pv for _d, pv, _u in picked)
    labels = [day.date.strftime("%m-%d") for day in days]
    title = _("PV and UV per day")
    chart = line_chart(
        labels=labels,
        lines=[
            Line(_("PV"), [pv for _d, pv, _u in picked], "pv"),
            Line(_("UV"), [uv for _d, _p, uv in picked], "uv"),
        ],
        title=title,
    )
    previous = previous_period(start, end)
    if partner is not None:
        current_totals = Totals(range_pv, range_uv, *_site_totals(start, end, now=now))
        previous_totals = Totals(
            *_partner_totals(partner, *previous, scope=scope, now=now), *_site_totals(*previous, now=now)
        )
    else:
        previous_days = site_days(start=previous[0], end=previous[1], now=now)
        previous_uv = site_uv_between(start=previous[0], end=previous[1], now=now) if scope == TREE else None
        current_totals = Totals(range_pv, range_uv)
        previous_totals = Totals(sum(_pick(day, scope)[0] for day in previous_days), previous_uv)
    minutes = minute_series(partner=partner, scope=scope, start=now - dt.timedelta(minutes=59), end=now)
    minute_chart = bar_chart(
        labels=[moment.strftime("%H:%M") for moment, _count in minutes],
        values=[count for _moment, count in minutes],
        title=_("PV per minute, last hour"),
    )
    context = {
        **site.each_context(request),
        "title": _("Statistics dashboard"),
        "now": to_local(now),
        "today": today_numbers,
        "today_pv_uv": _pick(today_numbers, scope),
        "partner": partner,
        "partner_code": code,
        "matches": _match_links(request, matches),
        "scope": scope,
        "start": start,
        "end": end,
        "days": picked,
        "range_pv": range_pv,
        "previous_start": previous[0],
        "previous_end": previous[1],
        "comparison": compare(current_totals, previous_totals, shares=partner is not None),
        "range_uv": range_uv,
        "chart": chart,
        "minute_chart": minute_chart,
        "minute_total": sum(count for _moment, count in minutes),
        "rankings": _rankings(now, scope=scope),
        "health": pipeline_health(today=today),
        "panels": dashboard_panels(
            DashboardPage(
                request=request,
                partner=partner,
                scope=scope,
                start=start,
                end=end,
                today=today,
                now=now,
                uv_per_day=[uv for _d, _p, uv in picked],
                range_uv=range_uv,
                draw_lines=_draw_lines,
            )
        ),
        # The partner picker's suggestions: every partner, the tree in order (a few kB per hundred partners).
        "choices": Partner.objects.order_by("path").values_list("code", "name", "level"),
        "app_list": site.get_app_list(request),
    }
    request.current_app = site.name
    return TemplateResponse(request, "admin/stats/dashboard.html", context)


def _draw_lines(
    labels: Sequence[str], lines: Sequence[tuple[str, Sequence[int], str]], title: str
) -> SafeString:
    """The pages' line chart, for the panels other apps add (``stats.read.panels``)."""
    return line_chart(labels=labels, lines=[Line(*line) for line in lines], title=title)


@dataclass(frozen=True)
class NetworkRow:
    date: dt.date
    own: DayNumbers
    children: list[DayNumbers]


def partner_network(request: HttpRequest, code: str, *, site) -> HttpResponse:
    """One partner's days with its children's side by side, a total row, and the same table as CSV."""
    partner = Partner.objects.filter(code=code).first()
    if partner is None:
        return _partner_missing(request, code, site=site)
    now = timezone.now()
    start, end = _date_range(request, local_day(now), 7)
    children = list(partner.children.order_by("code"))
    own = partner_days(partner=partner, start=start, end=end, now=now)
    per_child = [partner_days(partner=child, start=start, end=end, now=now) for child in children]
    rows = [NetworkRow(day.date, day, [days[index] for days in per_child]) for index, day in enumerate(own)]
    # UV over the range is the union of the day HyperLogLogs, never a sum of daily UVs.
    totals = {
        "pv": sum(d.pv for d in own),
        "pv_self": sum(d.pv_self for d in own),
        "uv": uv_between(partner, start, end),
        "uv_self": uv_between(partner, start, end, scope=SELF),
        "children": [
            (sum(d.pv for d in days), uv_between(child, start, end))
            for child, days in zip(children, per_child, strict=True)
        ],
    }
    if request.GET.get("format") == "csv":
        return _network_csv(partner, children, rows, totals)
    previous = previous_period(start, end)
    comparison = compare(
        Totals(totals["pv"], totals["uv"], *_site_totals(start, end, now=now)),
        Totals(*_partner_totals(partner, *previous, scope=TREE, now=now), *_site_totals(*previous, now=now)),
        shares=True,
    )
    labels = [day.date.strftime("%m-%d") for day in own]
    # The partner's subtree, then each child's: a child's line shows how much of its parent's it carries.
    lines = [Line(partner.code, [day.pv for day in own], "pv")]
    lines += [
        Line(child.code, [day.pv for day in days], f"c{index % CHILD_COLOURS}")
        for index, (child, days) in enumerate(zip(children, per_child, strict=True))
    ]
    chart = line_chart(
        labels=labels,
        lines=lines,
        title=_("PV per day of %(code)s and its children") % {"code": partner.code},
    )
    context = {
        **site.each_context(request),
        "title": _("Partner %(code)s: %(name)s") % {"code": partner.code, "name": partner.name},
        "partner": partner,
        "ancestors": list(Partner.objects.filter(pk__in=partner.ancestor_ids).order_by("level")),
        "children": children,
        "rows": rows,
        "totals": totals,
        "start": start,
        "end": end,
        "comparison": comparison,
        "previous_start": previous[0],
        "previous_end": previous[1],
        "chart": chart,
        "chart_lines": [(line.name, line.css_class) for line in lines],
        "csv_url": f"{request.path}?{_with_format(request, 'csv')}",
        "dashboard_url": reverse("admin:index") + f"?partner={partner.code}",
        "panels": partner_page_panels(
            PartnerPage(
                request=request,
                partner=partner,
                children=children,
                start=start,
                end=end,
                now=now,
                draw_lines=_draw_lines,
            )
        ),
    }
    request.current_app = site.name
    return TemplateResponse(request, "admin/stats/network.html", context)


def _partner_missing(request: HttpRequest, code: str, *, site) -> HttpResponse:
    """A 404 inside the admin's frame, with the way back: the dashboard and a search of the partners."""
    context = {
        **site.each_context(request),
        "title": _("No partner has the code %(code)s") % {"code": code},
        "code": code,
        "search_url": reverse("admin:partners_partner_changelist") + "?" + urlencode({"q": code}),
    }
    request.current_app = site.name
    return TemplateResponse(request, "admin/stats/partner_missing.html", context, status=404)


def _with_format(request: HttpRequest, value: str) -> str:
    params = request.GET.copy()
    params["format"] = value
    return params.urlencode()


def _network_csv(partner: Partner, children: list[Partner], rows: list[NetworkRow], totals: dict):
    header = [_("date"), "PV", "UV", _("own PV"), _("own UV")]
    for child in children:
        header += [f"{child.code} PV", f"{child.code} UV"]

    def lines():
        for row in rows:
            line = [row.date.isoformat(), row.own.pv, row.own.uv, row.own.pv_self, row.own.uv_self]
            for child in row.children:
                line += [child.pv, child.uv]
            yield line
        total = [_("total"), totals["pv"], totals["uv"], totals["pv_self"], totals["uv_self"]]
        for pv, uv in totals["children"]:
            total += [pv, uv]
        yield total

    return csv_download(lines(), header=header, filename=f"partner-{partner.code}.csv")
