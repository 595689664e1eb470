"""What a trace shows in Perfetto (its tracks, counters, instants and flows), that it is the
same bytes for the same seed, and that `plot-trace` reads a window of it through its index."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pytest

from vsched.plot import _visible
from vsched.trace_reader import Interval, _read_index, byte_range, load_trace

from helpers import CliResult

Cli = Callable[..., CliResult]

# Three VMs on 4 pCPUs under Credit: a ticket spinlock in kernel mode (PLE exits), a BSP VM
# whose vCPUs spin then block, an MPI job of ranks in one VM (messages).
BUSY_SCENARIO = """\
name = "busy"
[host]
pcpus = 4
dom0_vcpus = 0
[scheduler]
name = "credit"
[[vm]]
name = "spin"
vcpus = 2
[vm.workload]
kind = "spinlock"
iterations = 100000000
compute_us = 20
cs_us = 10
lock_kind = "ticket"
mode = "kernel"
[[vm]]
name = "bsp"
vcpus = 4
[vm.workload]
kind = "bsp"
supersteps = 100000000
compute_ms = 1.0
jitter = 0.2
wait = "spin-then-block"
spin_limit_us = 100
[[vm]]
name = "cg"
vcpus = 4
[vm.workload]
kind = "npb-cg"
iterations = 50
[run]
horizon_s = 2
seed = 1
"""


@pytest.fixture(scope="module")
def busy_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The busy scenario's trace: about 160,000 events, 14 MB, 9 checkpoints of the index."""
    import vsched

    directory = tmp_path_factory.mktemp("busy")
    trace = directory / "trace.json"
    vsched.run(BUSY_SCENARIO, reps=1, trace=trace, trace_limit=10**9)
    return trace


def test_perfetto_finds_every_kind_of_track_counter_instant_and_flow(busy_trace: Path) -> None:
    document = json.loads(busy_trace.read_text(encoding="utf-8"))
    events = document["traceEvents"]

    kinds = Counter((e["ph"], e.get("cat") if e["ph"] == "X" else e["name"]) for e in events)
    for kind in [
        ("X", "run"),
        ("X", "spin"),
        ("X", "vcpu"),
        ("C", "runnable vCPUs"),
        ("C", "runq"),
        ("C", "credit"),
        ("i", "PLE exit"),
        ("i", "lock hand-off"),
        ("X", "ipi"),
        ("X", "message"),
    ]:
        assert kinds[kind] > 0, kind
    assert {e["name"] for e in events if e.get("cat") == "vcpu"} == {
        "running",
        "spinning",
        "runnable",
        "blocked",
    }
    # Each flow has one start and one end, bound by their `bind_id`.
    ends = Counter((e["bind_id"], "out" if e.get("flow_out") else "in") for e in events if "bind_id" in e)
    starts = {bind for bind, side in ends if side == "out"}
    assert all(ends[(bind, "out")] == 1 for bind in starts)
    assert all(ends[(bind, "in")] <= 1 for bind in starts)
    assert sum(ends[(bind, "in")] for bind in starts) > 0.9 * len(starts)


def test_the_same_seed_writes_the_same_trace(cli: Cli, tiny_scenario: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    for trace in (first, second):
        result = cli("run", tiny_scenario, "--json", "--trace", trace)
        assert result.exit_code == 0, result.stderr

    assert first.read_bytes() == second.read_bytes()


def clipped(intervals: list[Interval], start_ms: float | None, end_ms: float | None) -> list[Interval]:
    return sorted(_visible(intervals, start_ms, end_ms), key=lambda i: (i.pcpu, i.start_ms))


@pytest.fixture(scope="module")
def whole(busy_trace: Path) -> list[Interval]:
    """Every pCPU interval of the busy trace, read without the index."""
    document = json.loads(busy_trace.read_text(encoding="utf-8"))
    del document["otherData"]["index"]
    plain = busy_trace.with_name("plain.json")
    plain.write_text(json.dumps(document), encoding="utf-8")
    return load_trace(plain).intervals


@pytest.mark.parametrize(
    "window",
    [
        (0.0, 5.0),
        (100.0, 350.5),
        (1000.0, 1000.2),
        (1499.9, 1500.1),
        (1900.0, None),
        (None, 10.0),
        (None, None),
    ],
)
def test_a_window_read_through_the_index_is_the_whole_trace_clipped(
    busy_trace: Path, whole: list[Interval], window: tuple[float | None, float | None]
) -> None:
    start_ms, end_ms = window

    schedule = load_trace(busy_trace, start_ms=start_ms, end_ms=end_ms)

    expected = clipped(whole, start_ms, end_ms)
    assert expected
    assert clipped(schedule.intervals, start_ms, end_ms) == expected
    assert schedule.pcpu_names == {p: f"pCPU {p}" for p in range(4)}
    assert schedule.extent_ms == (0.0, 2000.0)


def test_a_short_window_reads_a_small_part_of_the_file(busy_trace: Path) -> None:
    with open(busy_trace, "rb") as file:
        index = _read_index(file)
    assert index is not None
    assert len(index["checkpoint_ts"]) >= 4

    start, end = byte_range(index, 1500.0, 1500.2)

    assert end - start < busy_trace.stat().st_size / 3


def test_a_trace_whose_index_does_not_match_is_read_whole(
    busy_trace: Path, whole: list[Interval], tmp_path: Path
) -> None:
    document: dict[str, Any] = json.loads(busy_trace.read_text(encoding="utf-8"))
    index = document["otherData"]["index"]
    index["checkpoint_end"] = [offset + 7 for offset in index["checkpoint_end"]]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(document), encoding="utf-8")

    schedule = load_trace(broken, start_ms=100.0, end_ms=200.0)

    assert clipped(schedule.intervals, 100.0, 200.0) == clipped(whole, 100.0, 200.0)


def test_plot_window_outside_an_indexed_trace_names_its_extent(
    cli: Cli, busy_trace: Path, tmp_path: Path
) -> None:
    result = cli("plot-trace", busy_trace, "-o", tmp_path / "g.png", "--start-ms", "5000", "--end-ms", "5100")

    assert result.exit_code == 2
    assert (
        result.stderr.strip() == "error: TRACE: no run intervals in the window; the trace spans 0 to 2000 ms"
    )


def test_a_backwards_window_is_refused_before_reading(cli: Cli, busy_trace: Path, tmp_path: Path) -> None:
    result = cli("plot-trace", busy_trace, "-o", tmp_path / "g.png", "--start-ms", "200", "--end-ms", "100")

    assert result.exit_code == 2
    assert result.stderr.strip() == "error: the window start (200.0 ms) must be before its end (100.0 ms)"
