"""Reading the pCPU rows of a trace that `vsched run --trace` writes (Chrome trace-event JSON),
whole or only a window of it, in bounded memory.

The pCPU rows are complete events (`"ph": "X"`) with `tid` = pCPU row, `ts`/`dur` in µs,
`cat` = "run" or "spin", `name` = "<vm>.v<index>" and `args.vm`; metadata events
(`"ph": "M"`, `"name": "thread_name"`) name the rows. Everything else in the file (the vCPU
tracks, counters, instants, flows) is for Perfetto and is skipped here.

A trace written by vsched carries an index in `otherData.index` (`crates/vsched/src/
trace_json/`): every few thousand events a `vsched_checkpoint` metadata event lists the
spans open on each pCPU, and the index gives each checkpoint's time and the byte offset just
after it. Events are written as they close, so the spans that overlap a window [a, b] are
the ones written between the last checkpoint at or before a and the first at or after b,
plus the spans that checkpoint lists as still open. A window of a trace of hundreds of MB is
thus read in a few MB.

A trace without an index (hand-made, or cut short by a killed run, whose index was never
written) is read from its start, event by event (`ijson`): only the intervals that overlap
the window are kept, and the reading stops at the first checkpoint past the window's end.
What is not a trace is refused after its first bytes, in one line: a file that is not JSON
(`/dev/zero`), JSON without a `traceEvents` list, more than `MAX_EVENT_BYTES` without a
complete event (endless whitespace), more than `MAX_INTERVALS` intervals to draw. A trace
that ends early or is damaged part way keeps what precedes the damage (`Schedule.damage`
says where it stopped).
"""

from __future__ import annotations

import bisect
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import ijson

US_PER_MS = 1000.0
# The index sits in `otherData`, at the end of the file: read this much of the tail first,
# more if it is longer (a few bytes per checkpoint), up to MAX_TAIL_BYTES.
TAIL_BYTES = 1 << 20
MAX_TAIL_BYTES = 64 << 20
INDEX_FORMAT = 1
CHECKPOINT_NAME = "vsched_checkpoint"
# A vsched event is at most a few hundred bytes, a checkpoint a few hundred per pCPU row.
MAX_EVENT_BYTES = 64 << 20
# What a chart can hold: about 300 bytes each in memory; a trace's default bound is 1,000,000
# events in all.
MAX_INTERVALS = 1_000_000
CHUNK_BYTES = 1 << 16


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
    """What a trace file holds: the run intervals (of the window, when one was asked for) and
    the names of the pCPU rows. `extent_ms` is when the intervals read start and end; `damage`
    says where a trace that ends early or is damaged stopped being read (None: read whole)."""

    intervals: list[Interval] = field(default_factory=list)
    pcpu_names: dict[int, str] = field(default_factory=dict)
    extent_ms: tuple[float, float] | None = None
    damage: str | None = None


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


class _Source:
    """What the JSON parser reads: `head`, then at most `limit` bytes of `file` from where it
    stands, then `tail`. Refuses more than MAX_EVENT_BYTES read since the last `mark()` (one
    event, or what comes before the events)."""

    def __init__(
        self, label: str, file: IO[bytes], head: bytes = b"", limit: int | None = None, tail: bytes = b""
    ):
        self.label, self.file, self.pending, self.left, self.tail = label, file, head, limit, tail
        self.read_bytes = 0
        self.marked = 0
        self.at_end = False

    def mark(self) -> None:
        self.marked = self.read_bytes

    def read(self, size: int = -1) -> bytes:
        if self.read_bytes - self.marked > MAX_EVENT_BYTES:
            raise PlotError(
                f"{self.label}: more than {MAX_EVENT_BYTES >> 20} MiB without a complete event;"
                " expected a trace written by `vsched run --trace`"
            )
        if size == 0:  # ijson's question: bytes or text?
            return b""
        if self.pending:
            data, self.pending = self.pending, b""
            return data
        wanted = CHUNK_BYTES if size < 0 else min(size, CHUNK_BYTES)
        if self.left is not None:
            wanted = min(wanted, self.left)
        data = self.file.read(wanted) if wanted > 0 else b""
        if data:
            self.read_bytes += len(data)
            if self.left is not None:
                self.left -= len(data)
            return data
        data, self.tail = self.tail, b""
        self.at_end = not data
        return data


class _TooMany(PlotError):
    """More than MAX_INTERVALS intervals overlap the window."""


class _NotATrace(Exception):
    """The JSON is not a document with a `traceEvents` list."""


def _items(source: _Source, whole: bool) -> Iterator[Any]:
    """Each element of the event list, built one at a time: the document's `traceEvents`
    when `whole`, else the top-level array. Stops at the end of the list."""
    prefix = "traceEvents.item" if whole else "item"
    events = ijson.parse(source, use_float=True)
    first = True
    for at, event, value in events:
        if first and whole and (at, event) != ("", "start_map"):
            raise _NotATrace
        first = False
        if whole and at == "traceEvents" and event not in ("start_array", "end_array"):
            raise _NotATrace
        if at == prefix[: -len(".item")] and event == "end_array":
            return
        if at != prefix:
            if whole and (at, event) == ("", "end_map"):
                raise _NotATrace  # a document without the list
            continue
        if event not in ("start_map", "start_array"):
            source.mark()
            yield value
            continue
        builder = ijson.ObjectBuilder()
        end = event.replace("start", "end")
        while (at, event) != (prefix, end):
            builder.event(event, value)
            try:
                at, event, value = next(events)
            except StopIteration:
                raise ijson.IncompleteJSONError("premature end of the document") from None
        source.mark()
        yield builder.value


@dataclass
class _Window:
    """The window asked for, in µs (None: open), and what is collected for it."""

    start_us: float | None
    end_us: float | None
    schedule: Schedule = field(default_factory=Schedule)
    first_ms: float | None = None
    last_ms: float | None = None

    def overlaps(self, interval: Interval) -> bool:
        low = float("-inf") if self.start_us is None else self.start_us / US_PER_MS
        high = float("inf") if self.end_us is None else self.end_us / US_PER_MS
        return interval.end_ms >= low and interval.start_ms <= high

    def add(self, path: str, event: Any, position: int) -> None:
        if not isinstance(event, dict):
            raise PlotError(f"TRACE: '{path}': traceEvents[{position}]: expected an object")
        if not _is_pcpu_interval(event):
            return
        try:
            interval = _interval(event, position)
        except PlotError as error:
            raise PlotError(f"TRACE: '{path}': {error}") from None
        self.first_ms = interval.start_ms if self.first_ms is None else min(self.first_ms, interval.start_ms)
        self.last_ms = interval.end_ms if self.last_ms is None else max(self.last_ms, interval.end_ms)
        if self.overlaps(interval):
            if len(self.schedule.intervals) >= MAX_INTERVALS:
                raise _TooMany(
                    f"TRACE: '{path}': more than {MAX_INTERVALS:,} run intervals to draw;"
                    " expected a window of it (--start-ms, --end-ms)"
                )
            self.schedule.intervals.append(interval)


def _checkpoint(event: Any) -> dict[str, Any] | None:
    if isinstance(event, dict) and event.get("ph") == "M" and event.get("name") == CHECKPOINT_NAME:
        return event
    return None


def _open_spans(path: str, window: _Window, checkpoint: dict[str, Any]) -> None:
    """The spans a checkpoint lists as still open: they overlap the window up to it."""
    args = checkpoint.get("args")
    still_open = args.get("open") if isinstance(args, dict) else None
    if isinstance(still_open, dict):
        for event in still_open.values():
            window.add(path, event, -1)


def _first_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return " ".join(lines[0].split())[:120] if lines else type(error).__name__


def _load_stream(path: str, file: IO[bytes], window: _Window) -> Schedule:
    """Read the trace from its start, event by event, keeping what overlaps `window`."""
    source = _Source(f"TRACE: '{path}'", file)
    position = 0
    try:
        for event in _items(source, whole=True):
            checkpoint = _checkpoint(event)
            if checkpoint is not None:
                ts = checkpoint.get("ts")
                # Every span that overlaps the window closed before this checkpoint or is open at it.
                if window.end_us is not None and isinstance(ts, (int, float)) and ts >= window.end_us:
                    _open_spans(path, window, checkpoint)
                    break
            elif isinstance(event, dict) and event.get("ph") == "M" and event.get("name") == "thread_name":
                args, tid = event.get("args"), event.get("tid")
                if isinstance(tid, int) and isinstance(args, dict) and isinstance(args.get("name"), str):
                    window.schedule.pcpu_names[tid] = args["name"]
            else:
                window.add(path, event, position)
            position += 1
    except _NotATrace:
        raise PlotError(
            f"TRACE: '{path}' has no \"traceEvents\" list; write one with `vsched run --trace`"
        ) from None
    except (ijson.JSONError, UnicodeDecodeError) as error:
        if position == 0 and not window.schedule.pcpu_names:
            if source.at_end and source.read_bytes > 0:
                raise PlotError(f"TRACE: '{path}' ends before its first event") from None
            raise PlotError(f"TRACE: '{path}' is not JSON ({_first_line(error)})") from None
        how = "ends early (cut short, by a killed run?)" if source.at_end else "is damaged"
        window.schedule.damage = (
            f"TRACE: '{path}' {how} after {position:,} events, at about byte {source.read_bytes:,};"
            " drawing what precedes"
        )
    if window.first_ms is not None and window.last_ms is not None:
        window.schedule.extent_ms = (window.first_ms, window.last_ms)
    return window.schedule


def _read_index(file: IO[bytes]) -> dict[str, Any] | None:
    """`otherData.index` of a trace written by vsched, or None (no index, or not such a
    trace): read from the end of the file, a regular file only."""
    if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
        return None
    size = file.seek(0, os.SEEK_END)
    tail_bytes = TAIL_BYTES
    while True:
        start = max(0, size - tail_bytes)
        file.seek(start)
        tail = file.read(size - start)
        # The key's last occurrence is the real one: any later text is inside `otherData`,
        # where a string holding it would have its quotes escaped.
        at = tail.rfind(b'"otherData":')
        if at >= 0:
            break
        if start == 0 or tail_bytes >= MAX_TAIL_BYTES:
            return None
        tail_bytes *= 4
    # `{"otherData": {...}}` ends the document: its value is all but the final brace.
    value = tail[at + len(b'"otherData":') :].rstrip()
    if not value.endswith(b"}"):
        return None
    try:
        other = json.loads(value[:-1])
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
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


def _load_window(path: str, file: IO[bytes], index: dict[str, Any], window: _Window) -> Schedule:
    """The window read through the index: the bytes `byte_range` gives, event by event."""
    start_ms = None if window.start_us is None else window.start_us / US_PER_MS
    end_ms = None if window.end_us is None else window.end_us / US_PER_MS
    start, end = byte_range(index, start_ms, end_ms)
    if not 0 <= start <= end:
        raise ValueError("the index's offsets are out of order")
    file.seek(start)
    first = file.read(1) if end > start else b""
    # The range starts at an event or at the comma before one, and ends after one.
    head = b"[" + (b"" if first == b"," else first)
    source = _Source(f"TRACE: '{path}'", file, head, max(0, end - start - 1), b"]")
    last_checkpoint = None
    for position, event in enumerate(_items(source, whole=False)):
        last_checkpoint = _checkpoint(event)
        if last_checkpoint is None:
            window.add(path, event, position)
    extent = (index["spans_start"], index["spans_end"])
    window.schedule.pcpu_names = {p: str(name) for p, name in enumerate(index["pcpu_rows"])}
    window.schedule.extent_ms = None if None in extent else (extent[0] / US_PER_MS, extent[1] / US_PER_MS)
    # Ending at a checkpoint: the spans still open there overlap the window up to it.
    if last_checkpoint is not None:
        _open_spans(path, window, last_checkpoint)
    return window.schedule


def load_trace(
    path: str | os.PathLike[str], *, start_ms: float | None = None, end_ms: float | None = None
) -> Schedule:
    """Read the pCPU rows of a trace written by `vsched run --trace`: with a window, the
    intervals that overlap it (clip them with the window), read through the trace's index
    when it has one, else from the start, event by event.

    Raises `OSError` if the file cannot be read and `PlotError` if it is not such a trace.
    """
    name = os.fspath(path)
    start_us = None if start_ms is None else start_ms * US_PER_MS
    end_us = None if end_ms is None else end_ms * US_PER_MS
    with open(path, "rb") as file:
        index = _read_index(file)
        if index is not None:
            try:
                return _load_window(name, file, index, _Window(start_us, end_us))
            except _TooMany:
                raise  # as many from the start
            except (ijson.JSONError, UnicodeDecodeError, KeyError, TypeError, AttributeError, ValueError):
                pass  # an index that does not match its file: read it from the start, which says why
        if stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            file.seek(0)
        return _load_stream(name, file, _Window(start_us, end_us))
