"""Panels other apps add to the dashboard and the partner page, without ``stats`` importing them.

A feature registers, once its admin is loaded, a function that renders its panel from the page's choices::

    register_dashboard_panel("orders", render)        # render(page: DashboardPage) -> HTML, or None to hide it
    register_partner_page_panel("orders", render)     # render(page: PartnerPage) -> HTML, or None

The pages call every registered function in the order of registration and place the HTML below their own
figures. A panel that fails is logged and left out: the page still renders.
"""

import datetime as dt
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from django.utils.safestring import SafeString

logger = logging.getLogger(__name__)

# Draws a line chart: (labels, [(series name, values, css class)], title) -> inline SVG.
DrawLines = Callable[[Sequence[str], Sequence[tuple[str, Sequence[int], str]], str], SafeString]


@dataclass(frozen=True)
class DashboardPage:
    """What the dashboard shows: its partner (None: all traffic), scope ("tree" or "self"), days and UV."""

    request: HttpRequest
    partner: Any  # partners.models.Partner | None
    scope: str
    start: dt.date
    end: dt.date
    today: dt.date
    now: dt.datetime
    uv_per_day: Sequence[int]  # one per day of start..end, in the page's scope
    range_uv: int | None
    draw_lines: DrawLines


@dataclass(frozen=True)
class PartnerPage:
    """The partner page: the partner, its children in the page's order, and the range."""

    request: HttpRequest
    partner: Any  # partners.models.Partner
    children: Sequence[Any]
    start: dt.date
    end: dt.date
    now: dt.datetime
    draw_lines: DrawLines


_dashboard: dict[str, Callable[[DashboardPage], str | None]] = {}
_partner_page: dict[str, Callable[[PartnerPage], str | None]] = {}


def register_dashboard_panel(name: str, render: Callable[[DashboardPage], str | None]) -> None:
    """Add (or replace, under the same ``name``) a panel of the dashboard."""
    _dashboard[name] = render


def register_partner_page_panel(name: str, render: Callable[[PartnerPage], str | None]) -> None:
    """Add (or replace, under the same ``name``) a panel of the partner page."""
    _partner_page[name] = render


def _render(panels: dict[str, Callable[[Any], str | None]], page: object) -> list[str]:
    shown = []
    for name, render in panels.items():
        try:
            html = render(page)
        except Exception:  # one broken panel must not take the page down
            logger.exception("the panel %s could not be drawn", name)
            continue
        if html:
            shown.append(html)
    return shown


def dashboard_panels(page: DashboardPage) -> list[str]:
    """Return the HTML of every dashboard panel that shows for this page."""
    return _render(_dashboard, page)


def partner_page_panels(page: PartnerPage) -> list[str]:
    """Return the HTML of every partner page panel that shows for this page."""
    return _render(_partner_page, page)
