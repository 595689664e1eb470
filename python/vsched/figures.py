"""Draw a catalog figure as the paper does: grouped bars (one group per x, one bar per
series), lines over x, or cumulative distributions. Bars and points show the plotted value
(the mean over seeds, or their standard deviation for "std" figures); mean figures carry ±1
standard deviation error bars.
"""

from __future__ import annotations

import math
import textwrap
import zlib
from functools import cache
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
# SVG element ids come from a hash salted with this, so a figure's SVG is the same every time.
matplotlib.rcParams["svg.hashsalt"] = "vsched"
import matplotlib.pyplot as plt  # noqa: E402

import vsched  # noqa: E402
from vsched.catalog.model import FigureResult  # noqa: E402

# Grey-scale friendly hatches, as the papers print in black and white.
HATCHES = ["", "//", "..", "xx", "\\\\", "++", "oo", "--"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
# Characters per title line: what the default 6.4-inch axes hold at 9 points.
TITLE_CHARS = 85
Colour = tuple[float, float, float, float]
# One colour per policy, the same in every figure (matplotlib's cycle would give a policy the
# colour of its position in each figure): 40 distinct colours, enough for every registered policy.
PALETTE = [matplotlib.colormaps[name](i) for name in ("tab20", "tab20b") for i in range(20)]


@cache
def _registered() -> list[str]:
    return [entry["name"] for entry in vsched.policies()]


def policy_colour(policy: str) -> Colour:
    """The colour of `policy` in every figure: a registered policy's by its place in the
    core's list of policies (no two alike); any other name's chosen from the name itself."""
    registered = _registered()
    index = registered.index(policy) if policy in registered else zlib.crc32(policy.encode())
    return PALETTE[index % len(PALETTE)]


def series_colours(result: FigureResult) -> dict[str, Colour]:
    """Each series' colour, from the policy its runs had (the runs' `policy` column, which names
    the scenario's own policy too), else the policy its cases name, else its label."""
    policy_of: dict[str, str] = {}
    for case in result.figure.cases:
        runs = result.rows.get((case.x, case.series)) or [{}]
        policy = runs[0].get("policy") or case.policy or case.series
        policy_of.setdefault(case.series, str(policy))
    return {series: policy_colour(policy_of[series]) for series in result.series}


def draw(result: FigureResult, paper_label: str, stem: Path) -> list[Path]:
    """Write `stem`.png and `stem`.svg; return their paths."""
    figure = result.figure
    colours = series_colours(result)
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    if figure.kind == "cdf":
        for i, series in enumerate(result.series):
            for x in result.xs:
                values = sorted(result.samples.get((x, series), []))
                if not values:
                    continue
                ys = [(k + 1) / len(values) for k in range(len(values))]
                label = series if len(result.xs) == 1 else f"{series}, {x}"
                ax.step(
                    values,
                    ys,
                    where="post",
                    label=label,
                    color=colours[series],
                    marker=MARKERS[i % len(MARKERS)],
                    markevery=0.1,
                )
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("cumulative fraction")
        # Skews and latencies span µs to seconds: a log axis, linear near 0 where samples can be.
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlim(left=0)
    else:
        error = figure.stat == "mean"
        if figure.kind == "line":
            positions: list[float] = list(range(len(result.xs)))
            for i, series in enumerate(result.series):
                ys = [result.value(x, series) for x in result.xs]
                es = [result.std(x, series) for x in result.xs] if error else None
                ax.errorbar(
                    positions,
                    ys,
                    yerr=es,
                    label=series,
                    color=colours[series],
                    marker=MARKERS[i % len(MARKERS)],
                    capsize=3,
                )
            ax.set_xticks(positions, result.xs)
        else:
            width = 0.8 / max(len(result.series), 1)
            for i, series in enumerate(result.series):
                positions = [k + (i - (len(result.series) - 1) / 2) * width for k in range(len(result.xs))]
                ys = [result.value(x, series) for x in result.xs]
                es = [result.std(x, series) for x in result.xs] if error else None
                ax.bar(
                    positions,
                    ys,
                    width,
                    yerr=es,
                    label=series,
                    color=colours[series],
                    hatch=HATCHES[i % len(HATCHES)],
                    edgecolor="black",
                    capsize=2,
                )
                # A bar whose runs did not all finish is a lower bound: say so on it.
                for position, x, y in zip(positions, result.xs, ys):
                    if result.unfinished(x, series) and not math.isnan(y):
                        ax.annotate("≥", (position, y), ha="center", va="bottom", fontsize=9)
            ax.set_xticks(range(len(result.xs)), result.xs)
        ax.set_ylabel(figure.ylabel)
        if all(not math.isnan(result.value(x, s)) for x in result.xs for s in result.series):
            ax.set_ylim(bottom=0)
    ax.set_xlabel(figure.xlabel)
    # Wrapped: a one-line title wider than the axes is cut off at both edges of the image.
    ax.set_title(textwrap.fill(f"{paper_label} {figure.label}: {figure.title}", TITLE_CHARS), fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    fig.savefig(paths[0], dpi=110)
    # No date, so that the same results give the same file.
    fig.savefig(paths[1], metadata={"Date": None})
    plt.close(fig)
    return paths
