"""The server-drawn SVG charts: an axis that reads well, every number carried on its mark, text escaped."""

import re

import pytest

from stats.dashboard.charts import Line, _nice_top, bar_chart, line_chart


@pytest.mark.parametrize(
    ("peak", "top"),
    [(0, 1), (1, 1), (2, 2), (3, 5), (7, 10), (10, 10), (11, 20), (48540, 50000), (50001, 100000)],
)
def test_axis_top_is_one_two_or_five_times_a_power_of_ten_at_or_above_the_peak(peak, top):
    assert _nice_top(peak) == top


def test_line_chart_carries_each_value_and_escapes_labels():
    svg = str(
        line_chart(
            labels=["11-21", "<b>"], lines=[Line("PV", [6, 2], "pv"), Line("UV", [4, 2], "uv")], title="t & t"
        )
    )
    assert re.findall(r'data-series="(\w+)"', svg) == ["PV", "UV"]
    assert re.findall(r'data-value="(\d+)"', svg) == ["6", "2", "4", "2"]
    assert "<b>" not in svg and "&lt;b&gt;" in svg and "t &amp; t" in svg
    # The axis runs from 0 to 10 (the peak 6 rounded up): 6 sits 60% of the way up the plot.
    ys = [float(y) for y in re.findall(r'<circle cx="[\d.]+" cy="([\d.]+)"', svg)]
    bottom, top = 220 - 28, 12
    assert ys[0] == pytest.approx(bottom - 0.6 * (bottom - top), abs=0.1)


def test_bar_chart_heights_are_proportional_to_the_values():
    svg = str(bar_chart(labels=["a", "b", "c"], values=[0, 5, 10], title="per minute"))
    heights = [float(h) for h in re.findall(r'height="([\d.]+)" data-label', svg)]
    assert heights[0] == 0 and heights[2] == pytest.approx(2 * heights[1])
