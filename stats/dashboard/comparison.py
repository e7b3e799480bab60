"""A period against the one just before it (``stats.read.dashboard.previous_period``), as the pages show it."""

from dataclasses import dataclass

from django.utils.formats import number_format
from django.utils.translation import gettext as _

from stats.read.dashboard import Totals


def _share(part: int | None, whole: int | None) -> float | None:
    return None if part is None or not whole else 100 * part / whole


def _signed(value: float, decimals: int) -> str:
    # number_format truncates to ``decimals``; rounding first shows 66.67 as 66.7, not 66.6.
    text = number_format(round(abs(value), decimals), decimals, force_grouping=True)
    return f"+{text}" if value > 0 else (f"−{text}" if value < 0 else text)


@dataclass(frozen=True)
class Change:
    """One figure of the period against the previous one; a share is in percent, its change in points."""

    key: str
    label: str
    current: float | None
    previous: float | None
    is_share: bool = False

    @property
    def delta(self) -> float | None:
        return None if self.current is None or self.previous is None else self.current - self.previous

    @property
    def percent(self) -> float | None:
        """The change relative to the previous figure, in percent; None when that was 0 or is unknown."""
        delta = self.delta
        return None if delta is None or not self.previous else 100 * delta / self.previous

    def _shown(self, value: float | None) -> str:
        if value is None:
            return "—"
        if self.is_share:
            return f"{number_format(round(value, 1), 1)}%"
        return number_format(round(value), force_grouping=True)

    @property
    def current_text(self) -> str:
        return self._shown(self.current)

    @property
    def previous_text(self) -> str:
        return self._shown(self.previous)

    @property
    def delta_text(self) -> str:
        if self.delta is None:
            return "—"
        if self.is_share:
            return _("%(points)s pp") % {"points": _signed(self.delta, 1)}
        return _signed(round(self.delta), 0)

    @property
    def percent_text(self) -> str:
        return "—" if self.percent is None else f"{_signed(self.percent, 1)}%"

    @property
    def trend(self) -> str:
        """``up``, ``down`` or ``flat``: a CSS class for the colour of the change."""
        delta = self.delta or 0
        return "up" if delta > 0 else ("down" if delta < 0 else "flat")


def compare(current: Totals, previous: Totals, *, shares: bool) -> list[Change]:
    """Return PV and UV of ``current`` against ``previous``, and with ``shares`` their shares of the site's."""
    changes = [
        Change("pv", _("PV"), current.pv, previous.pv),
        Change("uv", _("UV"), current.uv, previous.uv),
    ]
    if shares:
        changes += [
            Change(
                "pv_share",
                _("Share of all PV"),
                _share(current.pv, current.site_pv),
                _share(previous.pv, previous.site_pv),
                is_share=True,
            ),
            Change(
                "uv_share",
                _("Share of all UV"),
                _share(current.uv, current.site_uv),
                _share(previous.uv, previous.site_uv),
                is_share=True,
            ),
        ]
    return changes
