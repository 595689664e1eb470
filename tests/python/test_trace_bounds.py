"""`plot-trace` reads within bounds: what is not a trace is refused after its first bytes, a
trace cut short by a killed run is drawn from what precedes the cut, a window of a trace
without an index is read only up to the first checkpoint past it, and names holding `$` are
drawn as written (not as matplotlib's mathtext)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
from test_trace_window import BUSY_SCENARIO

import vsched
from vsched.plot import _visible
from vsched.trace_reader import CHECKPOINT_NAME, Interval, load_trace

from helpers import TINY_SCENARIO, CliResult

Cli = Callable[..., CliResult]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The address space a plot-trace process may use here: matplotlib and the library take a few
# hundred MB; reading /dev/zero whole took all there is.
ADDRESS_SPACE = 3 << 30


@pytest.fixture(scope="module")
def busy_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    trace = tmp_path_factory.mktemp("busy") / "trace.json"
    vsched.run(BUSY_SCENARIO, reps=1, trace=trace, trace_limit=10**9)
    return trace


def clipped(intervals: list[Interval], start_ms: float | None, end_ms: float | None) -> list[Interval]:
    return sorted(_visible(intervals, start_ms, end_ms), key=lambda i: (i.pcpu, i.start_ms))


def checkpoints(data: bytes) -> list[tuple[float, int]]:
    """Each checkpoint of a trace's bytes: its time (µs) and the offset just after it."""
    marker = f'"name":"{CHECKPOINT_NAME}"'.encode()
    found = []
    at = data.find(marker)
    while at >= 0:
        ts_at = data.index(b'"ts":', at)
        end = data.index(b"}", ts_at) + 1
        found.append((float(data[ts_at + 5 : end - 1]), end))
        at = data.find(marker, end)
    return found


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_dev_zero_is_refused_in_one_line(tmp_path: Path) -> None:
    """Before, it was read until memory ran out. The timeout only bounds a hung read."""
    process = subprocess.run(
        [sys.executable, "-m", "vsched", "plot-trace", "/dev/zero", "-o", str(tmp_path / "g.png")],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=limited,
        check=False,
    )
    assert process.returncode == 2, process.stderr[-2000:]
    assert process.stderr.startswith("error: TRACE: '/dev/zero' is not JSON (")
    assert len(process.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x89PNG\r\n\x1a\n" + bytes(range(256)), "is not JSON ("),
        (b"[1, 2, 3]", 'has no "traceEvents" list'),
        (b'{"traceEvents": {"ph": "X"}}', 'has no "traceEvents" list'),
        (b'{"otherData": {}}', 'has no "traceEvents" list'),
        (b'{"traceEvents": [', "ends before its first event"),
        (b" " * (65 << 20), "more than 64 MiB without a complete event"),
    ],
    ids=["png", "array", "events-not-a-list", "no-events", "cut-at-once", "endless-whitespace"],
)
def test_what_is_not_a_trace_is_refused_in_one_line(
    cli: Cli, tmp_path: Path, content: bytes, message: str
) -> None:
    trace = tmp_path / "trace.json"
    trace.write_bytes(content)
    result = cli("plot-trace", trace, "-o", tmp_path / "g.png")
    assert result.exit_code == 2
    assert len(result.stderr_lines) == 1 and result.stderr_lines[0].startswith(f"error: TRACE: '{trace}'")
    assert message in result.stderr
    assert not (tmp_path / "g.png").exists()


def test_a_trace_cut_short_is_drawn_from_what_precedes_the_cut(
    cli: Cli, busy_trace: Path, tmp_path: Path
) -> None:
    """As a killed run leaves it: no index, the last event cut in the middle. Before, it was
    refused as not JSON (after being read whole)."""
    data = busy_trace.read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: int(len(data) * 0.6)])
    whole = load_trace(busy_trace).intervals

    result = cli("plot-trace", cut, "-o", tmp_path / "g.png")

    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "g.png").read_bytes().startswith(PNG_SIGNATURE)
    [warning] = [line for line in result.stderr_lines if line.startswith("warning:")]
    assert warning.startswith(f"warning: TRACE: '{cut}' ends early (cut short, by a killed run?) after ")
    # Everything before the cut is there: the intervals of a window well before it, and,
    # unwindowed, every interval that ended before the last checkpoint the cut file holds
    # (events are written as they end).
    schedule = load_trace(cut, start_ms=100.0, end_ms=150.0)
    assert schedule.damage is None  # read up to the checkpoint past the window, before the cut
    assert clipped(schedule.intervals, 100.0, 150.0) == clipped(whole, 100.0, 150.0)
    everything = load_trace(cut)
    assert everything.damage is not None
    last_ms = checkpoints(cut.read_bytes())[-1][0] / 1000
    assert 150.0 < last_ms < 2000.0
    ended = [i for i in clipped(whole, None, None) if i.end_ms <= last_ms]
    assert [i for i in clipped(everything.intervals, None, None) if i.end_ms <= last_ms] == ended


def test_a_window_of_a_trace_without_an_index_is_read_up_to_the_next_checkpoint(
    busy_trace: Path, tmp_path: Path
) -> None:
    """What follows the first checkpoint past the window is not read: here it is garbage,
    which a reader going on would report. Before, the whole file was read (and refused)."""
    data = busy_trace.read_bytes()
    found = checkpoints(data)
    window_end_ms = found[1][0] / 1000 - 1
    after = next(end for ts, end in found if ts >= window_end_ms * 1000)
    spoiled = tmp_path / "spoiled.json"
    spoiled.write_bytes(data[:after] + b"\x00" * (len(data) - after))

    schedule = load_trace(spoiled, start_ms=0.0, end_ms=window_end_ms)

    assert schedule.damage is None
    expected = clipped(load_trace(busy_trace).intervals, 0.0, window_end_ms)
    assert expected and clipped(schedule.intervals, 0.0, window_end_ms) == expected


def test_names_holding_dollars_are_drawn_as_written(cli: Cli, tmp_path: Path) -> None:
    """Before, matplotlib read `$...$` as mathtext and failed the figure: an internal error."""
    scenario = tmp_path / "dollars.toml"
    scenario.write_text(TINY_SCENARIO.replace('name = "locker"', 'name = "$x^{$ and $\\\\frac$"'))
    trace = tmp_path / "trace $1$.json"
    assert cli("run", scenario, "--trace", trace).exit_code == 0

    result = cli("plot-trace", trace, "-o", tmp_path / "g.png", "--start-ms", "0", "--end-ms", "50")

    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "g.png").read_bytes().startswith(PNG_SIGNATURE)
    names = {event.get("args", {}).get("vm") for event in json.loads(trace.read_text())["traceEvents"]}
    assert "$x^{$ and $\\frac$" in names
