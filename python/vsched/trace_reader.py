"""Reading the pCPU rows of a trace that `vsched run --trace` writes (Chrome trace-event JSON),
whole or only a window of it.

The pCPU rows are complete events (`"ph": "X"`) with `tid` = pCPU row, `ts`/`dur` in µs,
`cat` = "run" or "spin", `name` = "<vm>.v<index>" and `args.vm`; metadata events
(`"ph": "M"`, `"name": "thread_name"`) name the rows. Everything else in the file (the vCPU
tracks, counters, instants, flows) is for Perfetto and is skipped here.

A trace written by vsched carries an index in `otherData.index` (`crates/vsched/src/
trace_json.rs`): every few thousand events a `vsched_checkpoint` metadata event lists the
spans open on each pCPU, and the index gives each checkpoint's time and the byte offset just
after it. Events are written as they close, so the spans that overlap a window [a, b] are
the ones written between the last checkpoint at or before a and the first at or after b,
plus the spans that checkpoint lists as still open. A window of a trace of hundreds of MB is
thus read in a few MB; a trace without an index (hand-made, or older) is read whole.
"""

from __future__ import annotations

import bisect
import json
import os
from dataclasses import dataclass, field
from typing import IO, Any

US_PER_MS = 1000.0
# The index sits in `otherData`, at the end of the file: read this much of the tail first,
# more if it is longer (a few bytes per checkpoint).
TAIL_BYTES = 1 << 20
INDEX_FORMAT = 1
CHECKPOINT_NAME = "vsched_checkpoint"


class PlotError(ValueError):
    """The trace cannot be drawn as asked: it is not JSON or not in the format `vsched run
    --trace` writes, the window is empty, or the image format is unknown."""


@dataclass(frozen=True)
class Interval:
    """One stretch of time a pCPU ran one vCPU, in ms."""

    pcpu: int
    vm: str
    vcpu_label: str
    start_ms: float
    end_ms: float
    spinning: bool


@dataclass
class Schedule:
    """What a trace file holds: the run intervals and the names of the pCPU rows.
    `extent_ms` is when the trace's intervals start and end, when only a window was read."""

    intervals: list[Interval] = field(default_factory=list)
    pcpu_names: dict[int, str] = field(default_factory=dict)
    extent_ms: tuple[float, float] | None = None


def _number(event: dict[str, Any], key: str, position: int) -> float:
    value = event.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PlotError(f"traceEvents[{position}].{key}: expected a number, got {value!r}")
    return float(value)


def _interval(event: dict[str, Any], position: int) -> Interval:
    pcpu = event.get("tid")
    if isinstance(pcpu, bool) or not isinstance(pcpu, int):
        raise PlotError(f"traceEvents[{position}].tid: expected a pCPU number, got {pcpu!r}")
    name = event.get("name")
    if not isinstance(name, str):
        raise PlotError(f"traceEvents[{position}].name: expected a string, got {name!r}")
    args = event.get("args")
    vm = args.get("vm") if isinstance(args, dict) else None
    if not isinstance(vm, str):
        # "<vm>.v<index>" is the documented name, so the VM can be recovered from it.
        vm = name.rsplit(".", 1)[0]
    start_us = _number(event, "ts", position)
    duration_us = _number(event, "dur", position)
    return Interval(
        pcpu=pcpu,
        vm=vm,
        vcpu_label=name,
        start_ms=start_us / US_PER_MS,
        end_ms=(start_us + duration_us) / US_PER_MS,
        spinning=event.get("cat") == "spin",
    )


def _is_pcpu_interval(event: dict[str, Any]) -> bool:
    """A pCPU row's run interval. Traces before vCPU tracks had no other complete events and
    hand-made ones may omit `cat`: those count too."""
    return event.get("ph") == "X" and event.get("cat", "run") in ("run", "spin")


def _schedule_of(path: str | os.PathLike[str], events: list[Any], schedule: Schedule) -> Schedule:
    for position, event in enumerate(events):
        if not isinstance(event, dict):
            raise PlotError(f"TRACE: '{path}': traceEvents[{position}]: expected an object")
        if _is_pcpu_interval(event):
            try:
                schedule.intervals.append(_interval(event, position))
            except PlotError as error:
                raise PlotError(f"TRACE: '{path}': {error}") from None
    return schedule


def _load_whole(path: str | os.PathLike[str]) -> Schedule:
    try:
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
    except json.JSONDecodeError as error:
        raise PlotError(
            f"TRACE: '{path}' is not JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from None
    except UnicodeDecodeError:
        raise PlotError(f"TRACE: '{path}' is not UTF-8 text") from None
    events = document.get("traceEvents") if isinstance(document, dict) else None
    if not isinstance(events, list):
        raise PlotError(f"TRACE: '{path}' has no \"traceEvents\" list; write one with `vsched run --trace`")
    schedule = _schedule_of(path, events, Schedule())
    for event in events:
        if event.get("ph") == "M" and event.get("name") == "thread_name":
            args = event.get("args")
            tid = event.get("tid")
            if isinstance(tid, int) and isinstance(args, dict) and isinstance(args.get("name"), str):
                schedule.pcpu_names[tid] = args["name"]
    return schedule


def _read_index(file: IO[bytes]) -> dict[str, Any] | None:
    """`otherData.index` of a trace written by vsched, or None (no index, or not such a
    trace): read from the end of the file."""
    size = file.seek(0, os.SEEK_END)
    tail_bytes = TAIL_BYTES
    while True:
        start = max(0, size - tail_bytes)
        file.seek(start)
        tail = file.read()
        # The key's last occurrence is the real one: any later text is inside `otherData`,
        # where a string holding it would have its quotes escaped.
        at = tail.rfind(b'"otherData":')
        if at >= 0:
            break
        if start == 0:
            return None
        tail_bytes *= 4
    # `{"otherData": {...}}` ends the document: its value is all but the final brace.
    value = tail[at + len(b'"otherData":') :].rstrip()
    if not value.endswith(b"}"):
        return None
    try:
        other = json.loads(value[:-1])
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    index = other.get("index") if isinstance(other, dict) else None
    if not isinstance(index, dict) or index.get("format") != INDEX_FORMAT:
        return None
    return index


def byte_range(index: dict[str, Any], start_ms: float | None, end_ms: float | None) -> tuple[int, int]:
    """The bytes to read for the window [start_ms, end_ms]: from just after the last
    checkpoint at or before its start (or the first event) to just after the first
    checkpoint at or after its end (or the last event)."""
    times: list[float] = index["checkpoint_ts"]
    ends: list[int] = index["checkpoint_end"]
    first = -1 if start_ms is None else bisect.bisect_right(times, start_ms * US_PER_MS) - 1
    last = len(times) if end_ms is None else bisect.bisect_left(times, end_ms * US_PER_MS)
    start = ends[first] if first >= 0 else int(index["events_at"])
    end = ends[last] if last < len(times) else int(index["events_end"])
    return start, end


def _load_window(
    path: str | os.PathLike[str],
    file: IO[bytes],
    index: dict[str, Any],
    start_ms: float | None,
    end_ms: float | None,
) -> Schedule:
    start, end = byte_range(index, start_ms, end_ms)
    file.seek(start)
    chunk = file.read(end - start).decode("utf-8").lstrip(",")
    events = json.loads(f"[{chunk}]")
    extent = (index["spans_start"], index["spans_end"])
    schedule = Schedule(
        pcpu_names=dict(enumerate(index["pcpu_rows"])),
        extent_ms=None if None in extent else (extent[0] / US_PER_MS, extent[1] / US_PER_MS),
    )
    _schedule_of(path, events, schedule)
    # Ending at a checkpoint: the spans still open there overlap the window up to it.
    if events and isinstance(events[-1], dict) and events[-1].get("name") == CHECKPOINT_NAME:
        still_open = list(events[-1]["args"]["open"].values())
        _schedule_of(path, still_open, schedule)
    return schedule


def load_trace(
    path: str | os.PathLike[str], *, start_ms: float | None = None, end_ms: float | None = None
) -> Schedule:
    """Read the pCPU rows of a trace written by `vsched run --trace`: with a window, at least
    every interval that overlaps it (more may come: clip with the window), read through the
    trace's index when it has one.

    Raises `OSError` if the file cannot be read and `PlotError` if it is not such a trace.
    """
    with open(path, "rb") as file:
        index = _read_index(file)
        if index is not None:
            try:
                return _load_window(path, file, index, start_ms, end_ms)
            except (
                json.JSONDecodeError,
                UnicodeDecodeError,
                KeyError,
                TypeError,
                AttributeError,
                ValueError,
            ):
                pass  # an index that does not match its file: read the file whole, which says why
    return _load_whole(path)
