"""How the admin writes a finding's measured value and threshold, and a share, for a person to read.

The model keeps fractions and plain numbers (the API's contract); a reviewer reads "99.5%" against "> 30%",
"3 s" against "< 10 s" and "×10" against "> ×5", so the direction of each rule is on the page.
"""

from django.template.defaultfilters import floatformat
from django.utils.formats import number_format
from django.utils.translation import gettext as _

from quality.models import Finding

SHARE_RULES = {
    Finding.Rule.AUTOMATED,
    Finding.Rule.REPEATS,
    Finding.Rule.CONCENTRATION,
    Finding.Rule.LISTED_NETWORKS,
}


def grouped(value: int) -> str:
    """Return a count as the reader's language writes it ("12,345"); the CSV keeps the raw number."""
    return number_format(value, force_grouping=True)


def percent(share: float | None) -> str:
    """Return a fraction 0..1 as a percentage with at most one decimal ("99.5%", "40%"), "-" for None."""
    return "-" if share is None else f"{floatformat(round(share * 100, 1), '-1g')}%"


def rule_value(rule: str, value: float) -> str:
    """Return a finding's measured value in its rule's unit."""
    if rule in SHARE_RULES:
        return percent(value)
    if rule == Finding.Rule.FAST_ORDERS:
        return _("%(seconds)s s") % {"seconds": floatformat(value, "-1g")}
    return f"×{floatformat(value, '-2g')}"


def rule_threshold(rule: str, threshold: float) -> str:
    """Return a rule's threshold with the side that breaks it: "> 30%", "< 10 s", "> ×5"."""
    side = "<" if rule == Finding.Rule.FAST_ORDERS else ">"
    return f"{side} {rule_value(rule, threshold)}"
