"""`vsched run --jobs N`: a scenario's repetitions in parallel processes, one repetition a
job on the process pool of `vsched.runs`, combined by the core into the report one process
writes for them all (the same text, byte for byte, apart from the wall-clock `wall_s`).

A trace (`--trace`) records the first repetition only, as in a serial run: that repetition's
job writes it. If any repetition fails, a trace file already written is removed, as the core
does when a serial run fails.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import vsched
from vsched import _core
from vsched._core import DEFAULT_REPS, DEFAULT_SEED, MAX_REPS
from vsched.policy import policy_dir, scenario_file
from vsched.runs import Job, Progress, Row, RunSettings, apply_overrides, make_jobs, run_local

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

_SEEDS = 2**64


@dataclass(frozen=True)
class WholeReport:
    """A worker's task: run a job's single repetition and return its JSON report as the core
    wrote it (`{"key": ..., "report": text}`); the job of seed `traced_seed` writes the trace."""

    trace: str | None = None
    trace_limit: int = 0
    traced_seed: int | None = None

    def __call__(self, job: Job, settings: RunSettings) -> Row:
        traced = self.trace is not None and job.seed == self.traced_seed
        text = vsched.run_json(
            job.text,
            seed=job.seed,
            reps=1,
            trace=self.trace if traced else None,
            trace_limit=self.trace_limit if traced else 0,
            check=settings.check,
            max_memory=settings.max_memory,
        )
        return {"key": job.key, "report": text}


def seed_and_reps(text: str, seed: int | None, reps: int | None) -> tuple[int, int]:
    """The first seed and the number of repetitions of a run of the scenario `text` (valid
    TOML): the options when given, else the scenario's `[run]`, else the core's defaults."""
    table = tomllib.loads(text).get("run", {})
    first = seed if seed is not None else table.get("seed", DEFAULT_SEED)
    count = reps if reps is not None else table.get("reps", DEFAULT_REPS)
    return first, count


def run_repetitions(
    scenario: vsched.ScenarioLike,
    *,
    workers: int,
    seed: int | None = None,
    reps: int | None = None,
    policy: str | None = None,
    trace: str | os.PathLike[str] | None = None,
    trace_limit: int = 0,
    settings: RunSettings | None = None,
    progress: Progress | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> str:
    """The JSON report of `scenario`'s repetitions, run on `workers` processes: the text
    `vsched.run_json` returns for the same arguments. `progress(done, total)` is called as
    repetitions finish."""
    settings = settings or RunSettings()
    vsched._check_int("seed", seed, 0, _SEEDS - 1)
    vsched._check_int("reps", reps, 1, 2**32 - 1)
    vsched._check_int("trace_limit", trace_limit, 0, _SEEDS - 1)
    # `--set` first: every repetition runs the scenario as the options left it.
    text = vsched._with_overrides(vsched.read_scenario(scenario), overrides)
    # Everything a serial run checks before it starts, with the same messages: the scenario
    # under `policy`, the number of repetitions, and the trace file, created here as the core
    # does (an unwritable path raises OSError).
    # A Python policy is found where a serial run would find it.
    policies_from = policy_dir(scenario, policy)
    vsched._check_max_memory(settings.max_memory)
    _core.validate(
        apply_overrides(text, [], policy), max_memory=settings.max_memory, policy_dir=policies_from
    )
    first, count = seed_and_reps(text, seed, reps)
    if count > MAX_REPS:
        raise vsched.ScenarioError(f"--reps: expected an integer in 1..={MAX_REPS}, got {count}")
    if trace is not None:
        vsched._check_path("trace", trace)
        Path(trace).open("w").close()
    # Repetition i has seed first + i, wrapping past 2^64 - 1 as in the core. A Python policy
    # named in a scenario file is found next to that file (`make_jobs`).
    name = scenario_file(scenario) or "scenario"
    jobs = make_jobs(name, text, policy, [], [(first + i) % _SEEDS for i in range(count)])
    task = WholeReport(None if trace is None else os.fspath(trace), trace_limit, first)
    reports: dict[str, str] = {}
    if progress:
        progress(0, count)
    try:
        for row in run_local(jobs, workers, settings, task):
            reports[row["key"]] = row["report"]
            if progress:
                progress(len(reports), count)
    except BaseException:
        if trace is not None and Path(trace).is_file() and not Path(trace).is_symlink():
            Path(trace).unlink()
        raise
    combined: str = _core.combine_reports(
        text,
        policy,
        settings.max_memory,
        first,
        [reports[job.key] for job in jobs],
        policy_dir=policies_from,
    )
    return combined
