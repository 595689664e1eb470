"""`--trace` writes Chrome trace-event JSON within its bound; `plot-trace` draws it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from vsched.plot import Interval, _bars, gantt_figure, load_trace

from helpers import CliResult

Cli = Callable[..., CliResult]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def write_trace(cli: Cli, scenario: Path, trace: Path, *options: object) -> dict[str, Any]:
    result = cli("run", scenario, "--json", "--trace", trace, *options)
    assert result.exit_code == 0, result.stderr
    document: dict[str, Any] = json.loads(trace.read_text(encoding="utf-8"))
    return document


def run_events(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The pCPU rows' run intervals."""
    return [
        event for event in document["traceEvents"] if event["ph"] == "X" and event["cat"] in ("run", "spin")
    ]


def named(document: dict[str, Any], kind: str) -> dict[int, str]:
    """Each process's (`kind` = "process_name", by pid) or thread's ("thread_name", by tid) name."""
    key = "pid" if kind == "process_name" else "tid"
    return {
        e[key]: e["args"]["name"] for e in document["traceEvents"] if e["ph"] == "M" and e["name"] == kind
    }


def test_trace_is_chrome_trace_event_json(cli: Cli, tiny_scenario: Path, tmp_path: Path) -> None:
    document = write_trace(cli, tiny_scenario, tmp_path / "trace.json")

    assert named(document, "process_name") == {0: "host", 1: "locker", 2: "hog"}
    assert named(document, "thread_name") == {
        0: "pCPU 0",
        1: "pCPU 1",
        2: "locker.v0",
        3: "locker.v1",
        4: "hog.v0",
        5: "hog.v1",
        6: "hypervisor",
    }
    events = run_events(document)
    assert events
    for event in events:
        assert event["cat"] in ("run", "spin")
        assert event["tid"] in (0, 1)
        assert event["args"]["vm"] in ("locker", "hog")
        assert event["name"] == f"{event['args']['vm']}.v{event['args']['vcpu']}"
        assert event["ts"] >= 0 and event["dur"] > 0
        assert event["ts"] + event["dur"] <= 0.5e6 + 1e-6  # within the 0.5 s horizon, in µs
    # A pCPU runs one thing at a time: its intervals never overlap.
    for pcpu in (0, 1):
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e["tid"] == pcpu)
        assert all(end <= next_start + 1e-6 for (_, end), (next_start, _) in zip(spans, spans[1:]))


def recorded_events(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Every event the limit counts: all but the names and the index's checkpoints."""
    return [event for event in document["traceEvents"] if event["ph"] != "M"]


def test_trace_limit_bounds_the_events(cli: Cli, tiny_scenario: Path, tmp_path: Path) -> None:
    unbounded = recorded_events(write_trace(cli, tiny_scenario, tmp_path / "all.json"))
    limit = len(unbounded) // 2
    assert limit > 0

    bounded = recorded_events(
        write_trace(cli, tiny_scenario, tmp_path / "bounded.json", "--trace-limit", limit)
    )

    assert len(bounded) == limit
    assert bounded == unbounded[:limit]


def test_trace_counts_what_the_limit_left_out_after_the_events(
    cli: Cli, tiny_scenario: Path, tmp_path: Path
) -> None:
    full = write_trace(cli, tiny_scenario, tmp_path / "all.json")
    total = len(recorded_events(full))
    assert (full["otherData"]["events"], full["otherData"]["dropped_events"]) == (total, 0)

    path = tmp_path / "bounded.json"
    bounded = write_trace(cli, tiny_scenario, path, "--trace-limit", 3)

    assert bounded["otherData"]["event_limit"] == 3
    assert (bounded["otherData"]["events"], bounded["otherData"]["dropped_events"]) == (3, total - 3)
    # Written as the run goes, the counts come last: `otherData` follows the events.
    text = path.read_text(encoding="utf-8")
    assert text.startswith('{"displayTimeUnit":"ms","traceEvents":[')
    assert text.index('"traceEvents"') < text.index('"otherData"')


def test_plot_trace_writes_png(cli: Cli, tiny_scenario: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    write_trace(cli, tiny_scenario, trace)
    image = tmp_path / "gantt.png"

    result = cli("plot-trace", trace, "-o", image, "--start-ms", "0", "--end-ms", "100")

    assert result.exit_code == 0, result.stderr
    assert image.read_bytes().startswith(PNG_SIGNATURE)


HAND_MADE_TRACE = {
    "traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 0, "args": {"name": "pCPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": "pCPU 1"}},
        {
            "ph": "X",
            "name": "a.v0",
            "cat": "run",
            "pid": 0,
            "tid": 0,
            "ts": 0.0,
            "dur": 500.0,
            "args": {"vm": "a", "vcpu": 0},
        },
        {
            "ph": "X",
            "name": "a.v1",
            "cat": "spin",
            "pid": 0,
            "tid": 1,
            "ts": 0.0,
            "dur": 300.0,
            "args": {"vm": "a", "vcpu": 1},
        },
        {
            "ph": "X",
            "name": "b.v0",
            "cat": "run",
            "pid": 0,
            "tid": 1,
            "ts": 300.0,
            "dur": 1700.0,
            "args": {"vm": "b", "vcpu": 0},
        },
    ],
    "otherData": {},
}


def test_load_trace_reads_intervals_in_ms(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(HAND_MADE_TRACE), encoding="utf-8")

    schedule = load_trace(trace)

    assert schedule.pcpu_names == {0: "pCPU 0", 1: "pCPU 1"}
    assert [(i.vm, i.pcpu, i.start_ms, i.end_ms, i.spinning) for i in schedule.intervals] == [
        ("a", 0, 0.0, 0.5, False),
        ("a", 1, 0.0, 0.3, True),
        ("b", 1, 0.3, 2.0, False),
    ]


def test_gantt_has_a_row_per_pcpu_and_a_legend_entry_per_vm(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(HAND_MADE_TRACE), encoding="utf-8")

    figure = gantt_figure(load_trace(trace), start_ms=0.2, end_ms=1.0)

    axes = figure.axes[0]
    assert [label.get_text() for label in axes.get_yticklabels()] == ["pCPU 0", "pCPU 1"]
    legend = axes.get_legend()
    assert legend is not None
    assert [text.get_text() for text in legend.get_texts()] == ["a", "b", "spinning"]
    assert axes.get_xlim() == pytest.approx((0.2, 1.0))
    assert axes.get_xlabel() == "time (ms)"


def test_plot_window_outside_the_trace(cli: Cli, tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(HAND_MADE_TRACE), encoding="utf-8")

    result = cli("plot-trace", trace, "-o", tmp_path / "g.png", "--start-ms", "50", "--end-ms", "60")

    assert result.exit_code == 2
    assert result.stderr.startswith("error: TRACE: no run intervals in the window")


def test_plot_window_backwards(cli: Cli, tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(HAND_MADE_TRACE), encoding="utf-8")

    result = cli("plot-trace", trace, "--start-ms", "2", "--end-ms", "1")

    assert result.exit_code == 2
    assert "window start" in result.stderr


def test_plot_unknown_image_format(cli: Cli, tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(HAND_MADE_TRACE), encoding="utf-8")

    result = cli("plot-trace", trace, "-o", tmp_path / "gantt.xyz")

    assert result.exit_code == 2
    assert "unknown image format 'xyz'" in result.stderr and "png" in result.stderr


def test_plot_svg(cli: Cli, tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(HAND_MADE_TRACE), encoding="utf-8")

    result = cli("plot-trace", trace, "-o", tmp_path / "gantt.svg")

    assert result.exit_code == 0
    assert "<svg" in (tmp_path / "gantt.svg").read_text(encoding="utf-8")


def test_bars_merge_only_what_a_pixel_cannot_separate() -> None:
    def interval(label: str, start_ms: float, end_ms: float) -> Interval:
        return Interval(pcpu=0, vm="a", vcpu_label=label, start_ms=start_ms, end_ms=end_ms, spinning=False)

    pixel_ms = 0.1
    wide = [interval("a.v0", 0, 10), interval("a.v1", 10, 20)]
    tiny = [interval(f"a.v{i % 2}", 20 + i * 0.01, 20 + (i + 1) * 0.01) for i in range(100)]

    bars = _bars(wide + tiny, pixel_ms)

    # Two wide bars of different vCPUs stay apart and labelled; the hundred tiny ones after
    # them merge into one unlabelled bar.
    assert [(bar.start_ms, bar.end_ms, bar.label) for bar in bars] == [
        (0, 10, "a.v0"),
        (10, 20, "a.v1"),
        (20, pytest.approx(21), None),
    ]
