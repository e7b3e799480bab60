"""Charts drawn on the server as inline SVG: no script, no network, and a test can read the numbers back.

Every point or bar carries a ``<title>`` (the browser's tooltip) and ``data-value`` with its exact number.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.formats import number_format
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 760, 220
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 12, 28


@dataclass(frozen=True)
class Line:
    name: str
    values: Sequence[int]
    css_class: str


def _nice_top(peak: int) -> int:
    """The smallest 1, 2 or 5 times a power of ten at or above ``peak``: an axis that reads well."""
    top, step = 1, 1
    while top < peak:
        for factor in (2, 5, 10):
            if step * factor >= peak:
                return step * factor
        step *= 10
        top = step
    return top


def _frame(top: int, labels: Sequence[str], plot_width: float) -> list[str]:
    parts = []
    for fraction in (0, 0.5, 1):
        y = TOP + (HEIGHT - TOP - BOTTOM) * (1 - fraction)
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(
            f'<text class="axis" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(number_format(round(top * fraction), force_grouping=True))}</text>"
        )
    if labels:
        shown = {0, len(labels) - 1, len(labels) // 2}
        for index in sorted(shown):
            x = LEFT + (plot_width * (index + 0.5) / len(labels))
            parts.append(
                f'<text class="axis" x="{x:.1f}" y="{HEIGHT - 8}" text-anchor="middle">{escape(labels[index])}</text>'
            )
    return parts


def line_chart(*, labels: Sequence[str], lines: Sequence[Line], title: str) -> SafeString:
    """Draw one polyline per series over ``labels`` (one point per label), with a shared y axis from 0."""
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    top = _nice_top(max([v for line in lines for v in line.values] + [1]))
    parts = [
        f'<svg class="cps-chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        *_frame(top, labels, plot_width),
    ]
    for line in lines:
        points = []
        for index, value in enumerate(line.values):
            x = LEFT + plot_width * (index + 0.5) / max(len(line.values), 1)
            y = TOP + plot_height * (1 - value / top)
            points.append((x, y, index, value))
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in points)
        parts.append(f'<g class="series {escape(line.css_class)}" data-series="{escape(line.name)}">')
        parts.append(f'<polyline fill="none" points="{path}"/>')
        for x, y, index, value in points:
            label = labels[index] if index < len(labels) else ""
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" data-label="{escape(label)}" data-value="{value}">'
                f"<title>{escape(label)} {escape(line.name)}: {escape(number_format(value, force_grouping=True))}"
                "</title></circle>"
            )
        parts.append("</g>")
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 — every interpolated text above is escaped


def bar_chart(
    *, labels: Sequence[str], values: Sequence[int], title: str, css_class: str = "pv"
) -> SafeString:
    """Draw one bar per label, heights from 0 to a rounded peak."""
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    top = _nice_top(max(list(values) + [1]))
    slot = plot_width / max(len(values), 1)
    parts = [
        f'<svg class="cps-chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        *_frame(top, labels, plot_width),
        f'<g class="series {escape(css_class)}">',
    ]
    for index, value in enumerate(values):
        height = plot_height * value / top
        x, y = LEFT + slot * index + slot * 0.1, TOP + plot_height - height
        label = labels[index] if index < len(labels) else ""
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot * 0.8:.1f}" height="{height:.1f}" '
            f'data-label="{escape(label)}" data-value="{value}">'
            f"<title>{escape(label)}: {escape(number_format(value, force_grouping=True))}</title></rect>"
        )
    parts.append("</g></svg>")
    return mark_safe("".join(parts))  # noqa: S308 — every interpolated text above is escaped
