"""vsched: a laboratory for hypervisor vCPU scheduling.

A deterministic discrete-event simulator (written in Rust) runs scheduling policies over
simulated hosts whose guests really synchronize, so lock-holder preemption, skew and
fragmentation emerge from the schedule. This package is its Python face::

    import vsched
    report = vsched.run("scenarios/lhp-demo.toml", seed=1, reps=3)
    for vm in report["summary"]["vms"]:
        print(vm["name"], vm["completion_s_mean"], vm["completion_s_std"])

A scenario is given either as a path (a `pathlib.Path`, or a one-line `str`) or as TOML
text (a `str` holding at least one newline). Bad input raises `ScenarioError`, whose
message is the one line the command line prints; a policy that makes an unusable decision
(a bug in the policy, not in the input) raises `PolicyError`. The scenario format is described in
docs/scenario.md; the report's fields in the crate `vsched-model` (`metrics.rs`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Union

from vsched import _core
from vsched._core import DEFAULT_BASELINE_SCENARIO, DEFAULT_SCENARIO, PolicyError, ScenarioError

__all__ = [
    "DEFAULT_BASELINE_SCENARIO",
    "DEFAULT_SCENARIO",
    "PolicyError",
    "ProgressCallback",
    "Scenario",
    "ScenarioError",
    "bench",
    "policies",
    "read_scenario",
    "run",
    "run_json",
    "validate",
    "workloads",
]

Scenario = Union[str, "os.PathLike[str]"]
"""A scenario file path, or the scenario's TOML text (any `str` containing a newline)."""

ProgressCallback = Callable[[int, int, float, float], None]
"""Called as `progress(rep, reps, sim_s, horizon_s)` at most every 100 ms of a run; `rep`
counts from 0 and `sim_s` is the simulated time reached in that repetition."""

_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1


def read_scenario(scenario: Scenario) -> str:
    """The TOML text of `scenario`: text is returned as is, a path is read as UTF-8.

    Raises `OSError` (e.g. `FileNotFoundError`) if the file cannot be read and
    `ScenarioError` if it is not UTF-8 text.
    """
    if isinstance(scenario, str) and "\n" in scenario:
        return scenario
    path = Path(scenario)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ScenarioError(f"{path}: not UTF-8 text (byte {error.start})") from None


def _check_int(option: str, value: int | None, low: int, high: int) -> None:
    """Range-check an option the core takes as an unsigned integer, so that the user gets a
    `ScenarioError` naming it rather than an `OverflowError` from the conversion."""
    if value is not None and not low <= value <= high:
        raise ScenarioError(f"{option}: expected an integer from {low} to {high}, got {value}")


def run_json(
    scenario: Scenario,
    *,
    seed: int | None = None,
    reps: int | None = None,
    policy: str | None = None,
    trace: str | os.PathLike[str] | None = None,
    trace_limit: int = 0,
    progress: ProgressCallback | None = None,
) -> str:
    """Run `scenario` and return the JSON report exactly as the core wrote it.

    `seed` and `reps` override the scenario's `[run]` table; repetition i runs with seed
    `seed + i`. `policy` runs the scenario under that policy, at its default parameters,
    instead of its `[scheduler]`. `trace` names a file to receive per-pCPU run intervals as Chrome trace-event
    JSON, holding at most `trace_limit` run intervals (0 = the core's default bound). Same scenario
    and seed give the same text, except for wall-clock fields such as `wall_s`.
    """
    _check_int("seed", seed, 0, _U64_MAX)
    _check_int("reps", reps, 1, _U32_MAX)
    _check_int("trace_limit", trace_limit, 0, _U64_MAX)
    return _core.run(
        read_scenario(scenario),
        seed=seed,
        reps=reps,
        policy=policy,
        trace=None if trace is None else os.fspath(trace),
        trace_limit=trace_limit,
        progress=progress,
    )


def run(
    scenario: Scenario,
    *,
    seed: int | None = None,
    reps: int | None = None,
    policy: str | None = None,
    trace: str | os.PathLike[str] | None = None,
    trace_limit: int = 0,
    progress: ProgressCallback | None = None,
) -> dict[str, Any]:
    """Run `scenario` and return the report: `runs[]` (one per repetition, each with `seed`,
    `events`, `wall_s`, `vms[]` and `host`) and `summary` (means and standard deviations, per
    VM and for the host).

    Arguments as for `run_json`.
    """
    report: dict[str, Any] = json.loads(
        run_json(
            scenario,
            seed=seed,
            reps=reps,
            policy=policy,
            trace=trace,
            trace_limit=trace_limit,
            progress=progress,
        )
    )
    return report


def validate(scenario: Scenario) -> None:
    """Check `scenario` without running it; raises `ScenarioError` if it is invalid."""
    _core.validate(read_scenario(scenario))


def policies() -> list[dict[str, Any]]:
    """The scheduling policies: each with `name`, `description` and `params[]` (`name`,
    `default`, `doc`)."""
    entries: list[dict[str, Any]] = json.loads(_core.policies())
    return entries


def workloads() -> list[dict[str, Any]]:
    """The guest workloads: each with `name`, `description` and `params[]` (`name`,
    `default`, `doc`)."""
    entries: list[dict[str, Any]] = json.loads(_core.workloads())
    return entries


def bench(sim_s: float | None = None) -> dict[str, Any]:
    """Run the standard benchmark scenario for `sim_s` simulated seconds (default: the
    core's) and return its figures, among them `events_per_s` and `sim_s_per_wall_s`."""
    figures: dict[str, Any] = json.loads(_core.bench(sim_s))
    return figures
