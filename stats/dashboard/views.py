"""The dashboard (the admin index) and the partner page: read the selectors, hand numbers to templates.

Both pages are statistics, for staff with ``stats.view_dailystat`` (the site checks it before calling them).
Query parameters are validated by the shared parsers; a bad one becomes a message on the page and its default
is used instead, never a 500.
"""

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from django.contrib import messages
from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
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
from stats.counters.uniques import SELF, TREE
from stats.dashboard.charts import Line, bar_chart, line_chart
from stats.dashboard.comparison import compare
from stats.read.dashboard import (
    MAX_MATCHES,
    DashboardFigures,
    NetworkFigures,
    ScopedDay,
    dashboard_figures,
    partner_ancestors,
    partner_choices,
    partner_named,
    partner_network_comparison,
    partner_network_figures,
    partner_search,
    pipeline_health,
    ranking_boards,
)
from stats.read.panels import DashboardPage, PartnerPage, dashboard_panels, partner_page_panels

DEFAULT_DAYS = 30
MAX_DAYS = 366
CHILD_COLOURS = 8  # children's lines take these colours in turn (admin.css: .series.c0 … .c7)


# The date fields as the filters label them: a message names what the reader sees, not the query parameter.
DATE_LABELS = {"start": gettext_lazy("From"), "end": gettext_lazy("to")}


def _bad_date(params: Mapping[str, Any], name: str) -> str:
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


def _find_partner(request: HttpRequest, text: str) -> tuple[Partner | None, list[Partner]]:
    """The partner ``text`` names (``partner_search``); several matches or none: a message, and all traffic.

    Several: None and the first ``MAX_MATCHES`` of them to choose from.
    """
    found = partner_search(text=text)
    if found.partner is not None:
        return found.partner, []
    named = found.matches
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


def dashboard(request: HttpRequest, *, site: AdminSite) -> TemplateResponse:
    """Today so far, the chosen range as a chart, rankings, the last hour per minute and the pipeline's health."""
    now = timezone.now()  # one clock reading per page
    today = local_day(now)
    start, end = _date_range(request, today, DEFAULT_DAYS)
    code = request.GET.get("partner", "").strip()
    partner, matches = _find_partner(request, code) if code else (None, [])
    scope = _scope(request, partner_chosen=partner is not None)
    figures = dashboard_figures(partner=partner, scope=scope, start=start, end=end, today=today, now=now)
    page = DashboardPage(
        request=request,
        partner=partner,
        scope=scope,
        start=start,
        end=end,
        today=today,
        now=now,
        uv_per_day=[day.uv for day in figures.days],
        range_uv=figures.range_uv,
        draw_lines=_draw_lines,
    )
    context = {
        **site.each_context(request),
        "title": _("Statistics dashboard"),
        "now": to_local(now),
        "partner": partner,
        "partner_code": code,
        "matches": _match_links(request, matches),
        "scope": scope,
        "start": start,
        "end": end,
        **_figures_context(figures, partner=partner),
        "rankings": ranking_boards(now=now, scope=scope),
        "health": pipeline_health(today=today),
        "panels": dashboard_panels(page),
        # The partner picker's suggestions: every partner, the tree in order (a few kB per hundred partners).
        "choices": partner_choices(),
        "app_list": site.get_app_list(request),
    }
    request.current_app = site.name
    return TemplateResponse(request, "admin/stats/dashboard.html", context)


def _figures_context(figures: DashboardFigures, *, partner: Partner | None) -> dict[str, Any]:
    """The dashboard's figures as its template names them."""
    return {
        "today": figures.today,
        "today_pv_uv": figures.today_pv_uv,
        "days": figures.days,
        "range_pv": figures.range_pv,
        "previous_start": figures.previous[0],
        "previous_end": figures.previous[1],
        "comparison": compare(figures.current_totals, figures.previous_totals, shares=partner is not None),
        "range_uv": figures.range_uv,
        "chart": _days_chart(figures.days),
        "minute_chart": bar_chart(
            labels=[moment.strftime("%H:%M") for moment, _count in figures.minutes],
            values=[count for _moment, count in figures.minutes],
            title=_("PV per minute, last hour"),
        ),
        "minute_total": figures.minute_total,
    }


def _days_chart(days: list[ScopedDay]) -> SafeString:
    """The range's PV and UV per day, in the page's scope."""
    return line_chart(
        labels=[day.day.date.strftime("%m-%d") for day in days],
        lines=[Line(_("PV"), [day.pv for day in days], "pv"), Line(_("UV"), [day.uv for day in days], "uv")],
        title=_("PV and UV per day"),
    )


def _draw_lines(
    labels: Sequence[str], lines: Sequence[tuple[str, Sequence[int], str]], title: str
) -> SafeString:
    """The pages' line chart, for the panels other apps add (``stats.read.panels``)."""
    return line_chart(labels=labels, lines=[Line(*line) for line in lines], title=title)


def partner_network(request: HttpRequest, code: str, *, site: AdminSite) -> HttpResponseBase:
    """One partner's days with its children's side by side, a total row, and the same table as CSV."""
    partner = partner_named(code=code)
    if partner is None:
        return _partner_missing(request, code, site=site)
    now = timezone.now()
    start, end = _date_range(request, local_day(now), 7)
    figures = partner_network_figures(partner=partner, start=start, end=end, now=now)
    if request.GET.get("format") == "csv":
        return _network_csv(partner, figures)
    previous, current, before = partner_network_comparison(
        partner=partner, totals=figures.totals, start=start, end=end, now=now
    )
    lines = _network_lines(partner, figures)
    context = {
        **site.each_context(request),
        "title": _("Partner %(code)s: %(name)s") % {"code": partner.code, "name": partner.name},
        "partner": partner,
        "ancestors": partner_ancestors(partner=partner),
        "children": figures.children,
        "rows": figures.rows,
        "totals": figures.totals,
        "start": start,
        "end": end,
        "comparison": compare(current, before, shares=True),
        "previous_start": previous[0],
        "previous_end": previous[1],
        "chart": line_chart(
            labels=[day.date.strftime("%m-%d") for day in figures.own],
            lines=lines,
            title=_("PV per day of %(code)s and its children") % {"code": partner.code},
        ),
        "chart_lines": [(line.name, line.css_class) for line in lines],
        "csv_url": f"{request.path}?{_with_format(request, 'csv')}",
        "dashboard_url": reverse("admin:index") + f"?partner={partner.code}",
        "panels": partner_page_panels(
            PartnerPage(
                request=request,
                partner=partner,
                children=figures.children,
                start=start,
                end=end,
                now=now,
                draw_lines=_draw_lines,
            )
        ),
    }
    request.current_app = site.name
    return TemplateResponse(request, "admin/stats/network.html", context)


def _network_lines(partner: Partner, figures: NetworkFigures) -> list[Line]:
    """The partner's subtree, then each child's: a child's line shows how much of its parent's it carries."""
    lines = [Line(partner.code, [day.pv for day in figures.own], "pv")]
    lines += [
        Line(child.code, [day.pv for day in days], f"c{index % CHILD_COLOURS}")
        for index, (child, days) in enumerate(zip(figures.children, figures.per_child, strict=True))
    ]
    return lines


def _partner_missing(request: HttpRequest, code: str, *, site: AdminSite) -> TemplateResponse:
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


def _network_csv(partner: Partner, figures: NetworkFigures) -> StreamingHttpResponse:
    header = [_("date"), "PV", "UV", _("own PV"), _("own UV")]
    for child in figures.children:
        header += [f"{child.code} PV", f"{child.code} UV"]

    def lines() -> Iterator[list[object]]:
        for row in figures.rows:
            line: list[object] = [
                row.date.isoformat(),
                row.own.pv,
                row.own.uv,
                row.own.pv_self,
                row.own.uv_self,
            ]
            for child in row.children:
                line += [child.pv, child.uv]
            yield line
        totals = figures.totals
        total: list[object] = [_("total"), totals.pv, totals.uv, totals.pv_self, totals.uv_self]
        for pv, uv in totals.children:
            total += [pv, uv]
        yield total

    return csv_download(lines(), header=header, filename=f"partner-{partner.code}.csv")
