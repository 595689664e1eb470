"""The store of finished runs: `OUT/runs.jsonl`, one finished run per line, under a lock.

One process at a time writes a store. Opening one takes an exclusive lock on
`<path>.lock` (`flock(2)`, which the kernel releases when the holder ends, even killed with
SIGKILL); a second writer is refused at once with `StoreBusy`, one line naming the process
that holds it, rather than waiting behind a sweep that may run for hours. While the lock is
held the store is append-only: a line is appended and synced to disk as each run ends. Only
the holder compacts (drops damaged and repeated lines, the one rewrite, replacing the file
in one step), and it does so on opening, before its first append: no other process appends
to a store while it is rewritten, so no finished run is lost to a rewrite, and none is
stored twice.

Readers need no lock: a line is whole once its newline is written; a reader skips a last
line without one.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import vsched

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: no lock
    fcntl = None  # type: ignore[assignment]

Row = dict[str, Any]
"""One finished run, flattened (`vsched.runs.flatten`): the job's columns, then its metrics."""

# Columns that say which job a row is; every other column is a metric of the run.
JOB_COLUMNS = ("key", "scenario", "policy", "overrides", "seed")

# At most this many line numbers are listed in the warning about damaged lines.
_LISTED_LINES = 10

# Lock descriptors this process holds. A child made by fork (a sweep's worker) closes its
# copies at once: the lock is then the parent's alone and goes with it, even when the
# parent is killed before its workers.
_HELD_LOCKS: set[int] = set()


def _close_inherited_locks() -> None:
    for descriptor in _HELD_LOCKS:
        with contextlib.suppress(OSError):
            os.close(descriptor)
    _HELD_LOCKS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_inherited_locks)


class StoreBusy(vsched.ScenarioError):
    """Another process writes this store: one line naming the option, the directory and the
    process holding it."""


def _is_row(value: Any) -> bool:
    """Whether a stored line's JSON value is a row as `vsched.runs.execute` writes them: the
    job columns with their types, and metrics that are JSON scalars or arrays."""
    if not isinstance(value, dict):
        return False
    if not isinstance(value.get("key"), str) or not value["key"]:
        return False
    if not all(isinstance(value.get(column), str) for column in ("scenario", "policy", "overrides")):
        return False
    seed = value.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        return False
    return not any(isinstance(v, dict) for k, v in value.items() if k not in JOB_COLUMNS)


def _parse_line(raw: bytes) -> Row | None:
    """The row a stored line holds, or None if the line is damaged."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, or nested beyond reason
        return None
    return value if _is_row(value) else None


def read_rows(path: Path) -> list[Row]:
    """The rows stored in `path` in their order, as a reader sees them without the lock:
    damaged lines and a last line still being written are skipped, repeats kept."""
    rows = []
    for raw in path.read_bytes().split(b"\n")[:-1]:
        row = _parse_line(raw)
        if row is not None:
            rows.append(row)
    return rows


class _Lock:
    """An exclusive `flock` on `path`, taken at once or refused with `StoreBusy`; the file
    holds the holder's process id, for the refusal's message."""

    def __init__(self, path: Path, option: str) -> None:
        self.descriptor: int | None = None
        if fcntl is None:  # pragma: no cover
            return
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(descriptor, 32, 0).decode("ascii", "replace").strip()
            os.close(descriptor)
            by = f"process {holder}" if holder.isdigit() else "another process"
            raise StoreBusy(
                f"{option}: '{path.parent}' is in use: {by} is writing its runs ({path.name} is locked); "
                "expected another directory, or the same command again once that one has ended"
            ) from None
        except BaseException:
            os.close(descriptor)
            raise
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
        self.descriptor = descriptor
        self.owner = os.getpid()
        _HELD_LOCKS.add(descriptor)

    def release(self) -> None:
        if self.descriptor is None or os.getpid() != self.owner:
            return
        _HELD_LOCKS.discard(self.descriptor)
        os.close(self.descriptor)  # closing the last descriptor releases the flock
        self.descriptor = None


class Store:
    """Finished runs in `path` (JSON lines), keyed by `Job.key`; opening it locks it against
    other writers (`StoreBusy`, whose message names `option`), closing it releases it.

    A line is appended and synced to disk as each run finishes, so a killed sweep loses at
    most the runs in flight. On opening, a damaged line (cut short by a kill, not UTF-8, not
    JSON, not a row) is skipped, moved to `<path>.damaged` and reported on stderr in one line;
    the run it held, if any, is run again. A run stored twice is kept once.
    """

    def __init__(self, path: Path, option: str = "out") -> None:
        self.path = path
        self.rows: dict[str, Row] = {}
        self.damaged_lines: list[int] = []
        """1-based numbers of the damaged lines found on opening."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = _Lock(path.with_name(path.name + ".lock"), option)
        try:
            if path.exists():
                self._load()
            self._file = path.open("a", encoding="utf-8")
        except BaseException:
            self._lock.release()
            raise

    def _load(self) -> None:
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        kept: list[bytes] = []
        damaged: list[bytes] = []
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            row = _parse_line(raw)
            if row is None:
                self.damaged_lines.append(number)
                damaged.append(raw)
            elif row["key"] not in self.rows:
                self.rows[row["key"]] = row
                kept.append(raw)
        clean = b"".join(line + b"\n" for line in kept)
        if clean == data:
            return
        if damaged:
            with open(f"{self.path}.damaged", "ab") as file:
                file.write(b"".join(line + b"\n" for line in damaged))
        # The compaction: under the lock, so no other process appends meanwhile; replaced in
        # one step, so that a kill now leaves either file whole.
        temporary = self.path.with_name(self.path.name + ".tmp")
        with open(temporary, "wb") as file:
            file.write(clean)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.path)
        if damaged:
            numbers = ", ".join(map(str, self.damaged_lines[:_LISTED_LINES]))
            if len(self.damaged_lines) > _LISTED_LINES:
                numbers += f" and {len(self.damaged_lines) - _LISTED_LINES} more"
            count = len(self.damaged_lines)
            print(
                f"warning: {self.path}: skipped {count} damaged line{'s' if count > 1 else ''} "
                f"(line{'s' if count > 1 else ''} {numbers}), moved to {self.path}.damaged; "
                "the runs they held are run again",
                file=sys.stderr,
            )

    def add(self, row: Row) -> None:
        if row["key"] in self.rows:
            return
        self.rows[row["key"]] = row
        self._file.write(json.dumps(row, allow_nan=True) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()
        self._lock.release()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
