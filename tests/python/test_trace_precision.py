"""A trace's times are whole nanoseconds, whichever way a reader turns its µs into ns.

No trace reader that runs offline could be installed here: the `perfetto` package's
TraceProcessor downloads its trace_processor_shell binary on first use. So the file is read as
the readers do: a strict JSON parse, then each `ts`/`dur` (µs) turned into integer ns by
truncation (Perfetto's JSON importer before v51 for durations; `int(ts * 1000)`), by rounding
(Perfetto from v51) and from the exact decimal text, cut after three decimals (Perfetto's
text path for timestamps). All three must agree, and no two slices of a track may overlap.
"""

from __future__ import annotations

import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

from helpers import CliResult

Cli = Callable[..., CliResult]

TIME_KEYS = ("ts", "dur")
LONGER = ("--set", "run.horizon_s=2", "--set", "vm.locker.workload.iterations=20000")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    assert len(keys) == len(set(keys)), f"duplicate keys in {keys}"
    return dict(pairs)


def _no_constants(name: str) -> None:
    raise AssertionError(f"{name} is not JSON")


def strict_parse(text: str) -> Any:
    """The document, refusing what lenient parsers accept: NaN, Infinity, duplicate keys; numbers
    kept as their exact decimal text."""
    return json.loads(
        text, parse_float=Decimal, parse_constant=_no_constants, object_pairs_hook=_no_duplicate_keys
    )


def nanoseconds(micros: Decimal | int) -> int:
    """The integer ns of a µs value, the same by every reading, or an assertion error."""
    as_double = float(micros) * 1000.0
    truncated, rounded = int(as_double), round(as_double)
    from_text = int(Decimal(micros) * 1000)  # the decimal text, digits past ns cut off
    assert truncated == rounded == from_text, f"{micros} µs reads as {truncated}, {rounded} or {from_text} ns"
    return from_text


def timed_values(event: Any) -> list[Decimal | int]:
    """Every `ts` and `dur` in `event`, nested ones (a checkpoint's open spans) included."""
    if isinstance(event, dict):
        own = [event[key] for key in TIME_KEYS if key in event]
        return own + [value for item in event.values() for value in timed_values(item)]
    if isinstance(event, list):
        return [value for item in event for value in timed_values(item)]
    return []


def test_trace_times_are_whole_nanoseconds_and_slices_of_a_track_never_overlap(
    cli: Cli, tiny_scenario: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "trace.json"
    # Two simulated seconds of a lock that never runs out of work: some 20,000 slices whose
    # times are not whole µs, enough that a lossy conversion shows (on a trace before times
    # were written for it, 11 of its values read 1 ns apart by truncation and by rounding).
    result = cli("run", tiny_scenario, "--json", "--trace", trace, *LONGER)
    assert result.exit_code == 0, result.stderr
    document = strict_parse(trace.read_text(encoding="utf-8"))
    events = document["traceEvents"]

    times = [value for event in events for value in timed_values(event)]
    assert len(times) > 10_000
    for value in times:
        nanoseconds(value)

    tracks: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for event in events:
        if event["ph"] == "X" and event["dur"] > 0:  # zero-length slices are flow ends
            start = nanoseconds(event["ts"])
            tracks[event["pid"], event["tid"]].append((start, start + nanoseconds(event["dur"])))
    assert {cat for cat in (e.get("cat") for e in events if e["ph"] == "X")} >= {"run", "vcpu"}
    for track, slices in tracks.items():
        slices.sort()
        for (_, end), (next_start, _) in zip(slices, slices[1:]):
            assert end <= next_start, f"track {track}: a slice ends at {end} ns after the next starts"
