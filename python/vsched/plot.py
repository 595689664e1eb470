"""Gantt charts of a schedule, drawn from the Chrome trace-event JSON that `vsched run --trace`
writes (read by `trace_reader`): one row per pCPU, one colour per VM, spinning intervals
hatched, time in ms, like the schedule figures of the co-scheduling papers.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

import matplotlib
from matplotlib.backend_bases import FigureCanvasBase
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from vsched.trace_reader import Interval, PlotError, Schedule, load_trace

__all__ = ["Interval", "PlotError", "Schedule", "gantt_figure", "load_trace", "plot_trace"]

# Spinning is drawn lighter and hatched: the lighter face still shows whose vCPU spins.
SPIN_HATCH = "////"
SPIN_ALPHA = 0.45
FIGURE_WIDTH_IN = 12.0
DPI = 150
# About the width of the plot area of the figure, legend and labels aside.
PLOT_WIDTH_PX = 1500
# Bars narrower than this get no outline and no hatching: at that size both would only hide
# the colour, and hatching thousands of tiny bars takes matplotlib minutes.
DETAIL_MIN_PX = 4
# An interval is labelled with its vCPU only if it spans this many pixels.
LABEL_MIN_PX = 40


def _plain(text: str) -> str:
    """`text` drawn as written: a `$` escaped, so that matplotlib does not read `$...$` as
    mathtext (a VM named `$x^{$` would fail the whole figure)."""
    return text.replace("$", r"\$")


def _natural_key(text: str) -> tuple[int | str, ...]:
    """Sort "vm10" after "vm9"."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def _visible(intervals: list[Interval], start_ms: float | None, end_ms: float | None) -> list[Interval]:
    """The intervals overlapping [start_ms, end_ms], clipped to it."""
    low = float("-inf") if start_ms is None else start_ms
    high = float("inf") if end_ms is None else end_ms
    return [
        replace(interval, start_ms=max(interval.start_ms, low), end_ms=min(interval.end_ms, high))
        for interval in intervals
        if interval.end_ms > low and interval.start_ms < high
    ]


@dataclass
class _Bar:
    """What is drawn: one or more intervals of one VM in one state on one pCPU; `label` is
    kept only while the bar is a single vCPU's."""

    pcpu: int
    vm: str
    spinning: bool
    start_ms: float
    end_ms: float
    label: str | None


def _bars(intervals: list[Interval], pixel_ms: float) -> list[_Bar]:
    """Merge what would be indistinguishable: intervals of the same VM and state less than a
    pixel apart, when they belong to the same vCPU or are too narrow to show which vCPU they
    are (a labelled wide bar never swallows them)."""
    detail_ms = DETAIL_MIN_PX * pixel_ms
    bars: list[_Bar] = []
    last_on_pcpu: dict[int, _Bar] = {}
    for interval in sorted(intervals, key=lambda i: (i.pcpu, i.start_ms)):
        last = last_on_pcpu.get(interval.pcpu)
        if (
            last is not None
            and (last.vm, last.spinning) == (interval.vm, interval.spinning)
            and interval.start_ms - last.end_ms < pixel_ms
            and (
                last.label == interval.vcpu_label
                or (
                    interval.end_ms - interval.start_ms < detail_ms
                    and (last.label is None or last.end_ms - last.start_ms < detail_ms)
                )
            )
        ):
            last.end_ms = max(last.end_ms, interval.end_ms)
            if last.label != interval.vcpu_label:
                last.label = None
            continue
        bar = _Bar(
            interval.pcpu,
            interval.vm,
            interval.spinning,
            interval.start_ms,
            interval.end_ms,
            interval.vcpu_label,
        )
        bars.append(bar)
        last_on_pcpu[interval.pcpu] = bar
    return bars


def _check_window(start_ms: float | None, end_ms: float | None) -> None:
    if start_ms is not None and end_ms is not None and start_ms >= end_ms:
        raise PlotError(f"the window start ({start_ms} ms) must be before its end ({end_ms} ms)")


def gantt_figure(
    schedule: Schedule,
    *,
    start_ms: float | None = None,
    end_ms: float | None = None,
    title: str | None = None,
) -> Figure:
    """Draw `schedule` between `start_ms` and `end_ms` (default: all of it)."""
    _check_window(start_ms, end_ms)
    intervals = _visible(schedule.intervals, start_ms, end_ms)
    if not intervals:
        if not schedule.intervals and schedule.extent_ms is None:
            raise PlotError("TRACE: the trace holds no run intervals")
        first, last = schedule.extent_ms or (
            min(i.start_ms for i in schedule.intervals),
            max(i.end_ms for i in schedule.intervals),
        )
        raise PlotError(f"TRACE: no run intervals in the window; the trace spans {first:g} to {last:g} ms")

    pcpus = sorted({interval.pcpu for interval in intervals} | set(schedule.pcpu_names))
    row_of = {pcpu: row for row, pcpu in enumerate(pcpus)}
    vms = sorted({interval.vm for interval in intervals}, key=_natural_key)
    palette = matplotlib.colormaps["tab10" if len(vms) <= 10 else "tab20"]
    colour_of = {vm: palette(index % palette.N) for index, vm in enumerate(vms)}

    window_start = min(i.start_ms for i in intervals) if start_ms is None else start_ms
    window_end = max(i.end_ms for i in intervals) if end_ms is None else end_ms
    pixel_ms = (window_end - window_start) / PLOT_WIDTH_PX
    bars = _bars(intervals, pixel_ms)

    figure = Figure(figsize=(FIGURE_WIDTH_IN, 1.2 + 0.45 * len(pcpus)), dpi=DPI, layout="constrained")
    axes = figure.add_subplot()
    # One broken_barh call per (pCPU, VM, state, detail) keeps the artist count small.
    groups: dict[tuple[int, str, bool, bool], list[tuple[float, float]]] = {}
    for bar in bars:
        detailed = bar.end_ms - bar.start_ms >= DETAIL_MIN_PX * pixel_ms
        key = (bar.pcpu, bar.vm, bar.spinning, detailed)
        groups.setdefault(key, []).append((bar.start_ms, bar.end_ms - bar.start_ms))
    for (pcpu, vm, spinning, detailed), spans in groups.items():
        axes.broken_barh(
            spans,
            (row_of[pcpu] - 0.4, 0.8),
            facecolors=colour_of[vm],
            alpha=SPIN_ALPHA if spinning else 1.0,
            hatch=SPIN_HATCH if spinning and detailed else None,
            edgecolor="black",
            linewidth=0.3 if detailed else 0.0,
        )
    for bar in bars:
        if bar.label is not None and bar.end_ms - bar.start_ms >= LABEL_MIN_PX * pixel_ms:
            axes.text(
                (bar.start_ms + bar.end_ms) / 2,
                row_of[bar.pcpu],
                _plain(bar.label),
                ha="center",
                va="center",
                fontsize=7,
                clip_on=True,
            )

    axes.set_yticks(range(len(pcpus)))
    axes.set_yticklabels([_plain(schedule.pcpu_names.get(pcpu, f"pCPU {pcpu}")) for pcpu in pcpus])
    axes.set_ylim(len(pcpus) - 0.5, -0.5)  # pCPU 0 on top, as in the papers' figures
    axes.set_xlim(window_start, window_end)
    axes.set_xlabel("time (ms)")
    axes.grid(axis="x", linewidth=0.3, alpha=0.5)
    legend = [Patch(facecolor=colour_of[vm], edgecolor="black", label=_plain(vm)) for vm in vms]
    legend.append(Patch(facecolor="white", edgecolor="black", hatch=SPIN_HATCH, label="spinning"))
    axes.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    if title:
        axes.set_title(_plain(title))
    return figure


def plot_trace(
    trace_path: str | os.PathLike[str],
    output_path: str | os.PathLike[str],
    *,
    start_ms: float | None = None,
    end_ms: float | None = None,
) -> Schedule:
    """Read a trace and save its Gantt chart; the image format follows `output_path`'s
    suffix (png, svg, pdf...). Returns what was read: its `damage` says where a trace that
    ends early or is damaged stopped being read (the chart shows what precedes)."""
    image_format = Path(output_path).suffix.lstrip(".").lower()
    supported = FigureCanvasBase.get_supported_filetypes()
    if image_format not in supported:
        raise PlotError(
            f"output file '{output_path}': unknown image format '{image_format}';"
            f" expected a suffix among {', '.join(sorted(supported))}"
        )
    _check_window(start_ms, end_ms)  # before reading: a backwards window has no bytes to read
    schedule = load_trace(trace_path, start_ms=start_ms, end_ms=end_ms)
    figure = gantt_figure(schedule, start_ms=start_ms, end_ms=end_ms, title=Path(trace_path).name)
    figure.savefig(output_path)
    return schedule
