"""How many runs fit in memory at once: runs in parallel (`vsched sweep`, `vsched reproduce`,
`vsched run --jobs`) each hold what the core estimates for one run (the memory budget,
docs/hardening.md), so N processes need N times the largest estimate. `fit_workers` lowers N
to what the machine's available memory holds, saying so in one line on stderr; one run at a
time is always allowed (its own estimate is checked against `--max-memory`).

The machine's available memory is what the kernel reports as available (`psutil`), less
within a cgroup's limit (a container), or `VSCHED_MEMORY_AVAILABLE` (bytes, or with a unit:
`512M`, `8G`) when set.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil

MEMORY_VARIABLE = "VSCHED_MEMORY_AVAILABLE"
_SIZE = re.compile(r"\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*", re.IGNORECASE)
_CGROUP = Path("/sys/fs/cgroup")


def _cgroup_room() -> int | None:
    """What this process's cgroup (v2) may still use, or None without a limit."""
    try:
        limit = (_CGROUP / "memory.max").read_text().strip()
        used = (_CGROUP / "memory.current").read_text().strip()
    except OSError:
        return None
    if not limit.isdigit() or not used.isdigit():
        return None
    return max(0, int(limit) - int(used))


def available_memory() -> int:
    """Bytes of memory the runs of a batch may use together."""
    given = os.environ.get(MEMORY_VARIABLE)
    if given:
        match = _SIZE.fullmatch(given)
        if match is None:
            raise ValueError(f"{MEMORY_VARIABLE}: expected a size such as 8G, 512M or bytes, got {given!r}")
        return int(match.group(1)) << (10 * " kmgt".index(match.group(2).lower() or " "))
    available = int(psutil.virtual_memory().available)
    room = _cgroup_room()
    return available if room is None else min(available, room)


def human(size: int) -> str:
    """Bytes in binary units, as the core's messages write them (`3.4 GiB`)."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def estimate(texts: Sequence[str], max_memory: int) -> int:
    """The largest memory estimate among the scenarios `texts` (bytes); 0 where the core
    cannot estimate one (the run then fails as it would have, naming itself)."""
    from vsched import _core

    largest = 0
    for text in set(texts):
        try:
            largest = max(largest, int(_core.validate(text, max_memory=max_memory)))
        except Exception:  # noqa: BLE001 - the run reports it; here it only does not count
            continue
    return largest


def fit_workers(workers: int, each: int, option: str = "--jobs") -> int:
    """`workers`, or fewer if that many runs of `each` bytes would not fit the memory
    available (never fewer than 1); a lowering is said in one line on stderr."""
    if workers <= 1 or each <= 0:
        return workers
    try:
        room = available_memory()
    except ValueError as error:
        import vsched

        raise vsched.ScenarioError(str(error)) from None
    fitting = max(1, room // each)
    if fitting >= workers:
        return workers
    print(
        f"warning: {option}: {workers} runs at once would need about {human(workers * each)} "
        f"(each estimated at {human(each)}), more than the {human(room)} of memory available; "
        f"running {fitting} at a time",
        file=sys.stderr,
    )
    return int(fitting)


def fit_jobs(jobs: Sequence[Any], workers: int, max_memory: int) -> int:
    """`fit_workers` for `jobs` (each with its scenario `text`) on at most `workers` processes."""
    workers = min(workers, len(jobs))
    if workers <= 1:
        return workers
    return fit_workers(workers, estimate([job.text for job in jobs], max_memory))
