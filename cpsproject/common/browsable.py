"""The browsable API's title and line above each endpoint, in the reader's language.

DRF would show a name made of the view's class or function name ("Partner Stats") and the view's docstring,
both written for developers and in English whatever the language. The settings ``VIEW_NAME_FUNCTION`` and
``VIEW_DESCRIPTION_FUNCTION`` point here; OPTIONS answers show the same title and line.
"""

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from rest_framework import views
from rest_framework.utils import formatting

# DRF's name of each view: its title and its line.
PAGES: dict[str, tuple[Promise, Promise]] = {
    "Partner List": (
        _("Partner list"),
        _("The partners you may see, ordered by code; ?parent= and ?level= filter them."),
    ),
    "Partner Instance": (_("Partner"), _("One partner: its code, name, parent and level.")),
    "Partner Stats": (
        _("Daily PV and UV of a partner"),
        _(
            "One entry per day from start to end (?start=&end=), unflushed counts included; reconciled days are final."
        ),
    ),
    "Partner Buckets": (
        _("5-minute PV of a partner"),
        _("The 288 five-minute buckets of one day (?date=), zero-filled."),
    ),
    "Partner Rankings": (
        _("Partner ranking"),
        _("Top partners by PV over a sliding window (?window=1h, 24h or 7d; ?scope=self for their own PV)."),
    ),
    "Series": (
        _("PV series"),
        _(
            "PV per sample of ?precision= seconds, for one partner's subtree (?partner=) or, for staff, the whole site."
        ),
    ),
    "Record Login": (_("Record a login"), _("POST user_type, user_id and, if not today, date.")),
    "User Logins": (
        _("A user's login days"),
        _("Whether, and on which days, the user logged in (?start=&end= or ?month=)."),
    ),
    "Active": (_("Active users"), _("The users who logged in within the range, 1,000 to a page.")),
    "Counts": (_("DAU, WAU and MAU"), _("Daily, weekly and monthly active users of one user type on a day.")),
    "Partner Conversions": (
        _("Conversions of a partner"),
        _(
            "Orders, buyers, money and commission per business day (?start=&end=), subtree and own, with the total."
        ),
    ),
    "Orders": (
        _("Orders"),
        _(
            "The orders paid within the range (?start=&end=), newest first; ?partner= keeps one partner's subtree."
        ),
    ),
    "Partner Statements": (
        _("Statements of a partner"),
        _("The closed months with their amounts; ?month= lists the commission entries of one of them."),
    ),
    "Partner Quality": (
        _("Traffic quality of a partner"),
        _(
            "Per day (?start=&end=): its own views, automated and repeat views, addresses, listed networks, "
            "orders by a view and findings; shares are fractions 0-1."
        ),
    ),
    "Findings": (
        _("Traffic to review"),
        _("The findings from start to end (?start=&end=), newest first; ?partner= and ?status= filter them."),
    ),
    "Spectacular Api": (
        _("API schema"),
        _("The OpenAPI 3 schema of every endpoint; /api/v1/docs/ shows it as a page."),
    ),
}


def view_name(view: views.APIView) -> str:
    """Return the view's title in the active language (DRF's name for a view not listed)."""
    name = views.get_view_name(view)
    return str(PAGES[name][0]) if name in PAGES else name


def view_description(view: views.APIView, html: bool = False) -> str:
    """Return the view's line in the active language (DRF's docstring for a view not listed)."""
    name = views.get_view_name(view)
    if name not in PAGES:
        return views.get_view_description(view, html)
    line = str(PAGES[name][1])
    return formatting.markup_description(line) if html else line
