"""`vsched sweep`: one scenario over the cross product of parameter values, each point
repeated over seeds, on the machinery of `vsched.runs` (so an interrupted sweep resumes).

    vsched sweep scenarios/lhp-demo.toml --set scheduler.tslice_ms=10,30 \\
        --set vm.spin.vcpus=2,4 --reps 5 --out sweep-lhp

A `--set` key is a dotted path into the scenario (see `runs.apply_overrides`); its values are
TOML values separated by commas (10, 2.5, true, "credit" or a bare word). results.parquet has
a column per swept key, `set.<key>` (e.g. `set.scheduler.tslice_ms`), and `policy` names the
policy of every run, the scenario's own when not swept.

A point whose scenario the core refuses (e.g. a co-scheduling policy and a VM wider than the
host) refuses the whole sweep before anything runs, unless infeasible points are skipped
(`--skip-infeasible`): each is then listed with the reason and left out. A key that names
nothing in the scenario always refuses the sweep: it is a mistake in the sweep, not a point.

From Python, `run_sweep` does the same and returns the results as tables:

    results = vsched.run_sweep("scenarios/lhp-demo.toml", {"scheduler.tslice_ms": [10, 30]}, reps=3)
    results.vms().groupby(["set.scheduler.tslice_ms", "vm"])["completion_s"].mean()
"""

from __future__ import annotations

import inspect
import itertools
import math
import os
import statistics
import sys
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import vsched
from vsched import policy as python_policy
from vsched._core import MAX_REPS
from vsched.frames import SET_PREFIX, SkippedPoint, SweepResults
from vsched.policy import scenario_file
from vsched.runs import (
    Job,
    Override,
    Progress,
    Row,
    RunSettings,
    Store,
    make_jobs,
    parse_value,
    run_jobs,
    write_parquet,
)


@dataclass(frozen=True)
class Point:
    """One combination of the swept values, under one policy."""

    overrides: tuple[Override, ...]
    policy: str | None


def parse_set(option: str) -> tuple[str, list[Any]]:
    """`key=v1,v2,...` as (key, [values])."""
    key, sep, values = option.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise vsched.ScenarioError(
            f"--set: expected KEY=V1,V2,... (e.g. scheduler.tslice_ms=10,30), got '{option}'"
        )
    return key, [parse_value(v.strip(), key) for v in values.split(",")]


def points(sets: Sequence[str], policies: Sequence[str | None]) -> list[Point]:
    """The grid of `--set KEY=V1,V2,...` options under each policy."""
    return grid_points([parse_set(option) for option in sets], policies)


def grid_points(values: Sequence[tuple[str, Sequence[Any]]], policies: Sequence[str | None]) -> list[Point]:
    """Every combination of the (key, values) pairs, under each policy."""
    keys = [key for key, _ in values]
    if len(set(keys)) != len(keys):
        raise vsched.ScenarioError(f"--set: a key is given twice among {keys}")
    combos = itertools.product(*(choices for _, choices in values))
    return [Point(tuple(zip(keys, combo)), policy) for combo in combos for policy in policies]


def policy_params(policy: str) -> frozenset[str] | None:
    """The `[scheduler]` keys `policy` takes (a registered policy's parameters, a Python class's
    keyword arguments), or None when it takes any (`**kwargs`) or cannot be told here (an
    unknown name, a file that does not load: validation says why)."""
    name = python_policy.split_params(policy)[0]
    if python_policy.is_python_policy(name):
        try:
            signature = inspect.signature(python_policy.load_class(name, os.getcwd()))
        except (vsched.ScenarioError, TypeError, ValueError):
            return None
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
            return None
        return frozenset(signature.parameters)
    for entry in vsched.policies():
        if entry["name"] == name:
            return frozenset(param["name"] for param in entry["params"])
    return None


def _scheduler_key(key: str) -> str | None:
    """The parameter a `scheduler.KEY` override sets (None for `scheduler.name` and other keys)."""
    prefix, _, rest = key.partition(".")
    return rest if prefix == "scheduler" and rest and "." not in rest and rest != "name" else None


def fit_to_policies(grid: Sequence[Point]) -> tuple[list[Point], list[str]]:
    """`grid` with each `scheduler.KEY` override left out of the points of the policies that have
    no parameter KEY, when another policy of the sweep has it: those policies run at their
    defaults (once, not once per value: their points merge, and their `set.scheduler.KEY` is
    null), instead of their points being refused as infeasible. A KEY no policy of the sweep
    has is kept everywhere, so that a misspelt key is refused. Returns the points and one note
    per policy that does not take some key."""
    params = {p.policy: policy_params(p.policy) for p in grid if p.policy is not None}
    keys = {k for p in grid for k, _ in p.overrides if _scheduler_key(k)}
    # A key is specific when some policy takes it (or may: **kwargs) and another does not.
    taken = {k for k in keys if any(ps is None or _scheduler_key(k) in ps for ps in params.values())}
    fitted: list[Point] = []  # a list: override values may be lists, which do not hash
    dropped: dict[str, list[str]] = {}
    for point in grid:
        takes = params.get(point.policy) if point.policy is not None else None
        if point.policy is None or takes is None:
            fitted.append(point)
            continue
        left_out = [k for k, _ in point.overrides if k in taken and _scheduler_key(k) not in takes]
        for key in left_out:
            dropped.setdefault(point.policy, [])
            if key not in dropped[point.policy]:
                dropped[point.policy].append(key)
        kept = Point(tuple((k, v) for k, v in point.overrides if k not in left_out), point.policy)
        if kept not in fitted:
            fitted.append(kept)
    notes = [
        f"note: policy {policy} has no parameter {', '.join(k.partition('.')[2] for k in keys_of)}: it runs "
        f"at its defaults, once for every value of {', '.join(keys_of)} (its set.{keys_of[0]} is null)"
        for policy, keys_of in dropped.items()
    ]
    return fitted, notes


class InfeasiblePoint(vsched.ScenarioError):
    """A point of a sweep whose scenario the core refuses; the message names the point."""


@dataclass(frozen=True)
class Plan:
    """The jobs of a sweep, the points they run and the points left out as infeasible."""

    jobs: list[Job]
    points: list[Point]
    skipped: list[SkippedPoint]


def plan(
    scenario: str,
    text: str,
    grid: Sequence[Point],
    seeds: Sequence[int],
    max_memory: int = 0,
    skip_infeasible: bool = False,
) -> Plan:
    """Every job of the sweep; each scenario variant is validated (its memory estimate against
    `max_memory` bytes, 0 = the core's default budget) before anything runs. A variant the
    core refuses raises `InfeasiblePoint`, or with `skip_infeasible` is left out and listed
    in `skipped`; if every point is, `ScenarioError` is raised all the same."""
    jobs: list[Job] = []
    feasible: list[Point] = []
    skipped: list[SkippedPoint] = []
    for point in grid:
        # A bad key or value raises here: a mistake in the sweep, never skipped.
        point_jobs = make_jobs(scenario, text, point.policy, point.overrides, seeds)
        described = ", ".join(
            [f"{k}={v}" for k, v in point.overrides] + ([f"policy {point.policy}"] if point.policy else [])
        )
        try:
            vsched.validate(point_jobs[0].text, max_memory=max_memory)
        except vsched.ScenarioError as error:
            if not skip_infeasible:
                raise InfeasiblePoint(f"{error} (with {described or 'the scenario as written'})") from None
            skipped.append(SkippedPoint(point.overrides, point.policy, str(error)))
            continue
        except vsched.InternalError as error:
            raise vsched.InternalError(f"{error} (with {described or 'the scenario as written'})") from None
        jobs += point_jobs
        feasible.append(point)
    if grid and not feasible:
        raise vsched.ScenarioError(f"every point of the sweep is infeasible, e.g. {skipped[0].describe()}")
    return Plan(jobs, feasible, skipped)


def swept_columns(jobs: Sequence[Job]) -> dict[str, dict[str, Any]]:
    """Per job key, the column of each swept key (`set.<key>`) and its value at the job's point."""
    return {job.key: {f"{SET_PREFIX}{key}": value for key, value in job.overrides} for job in jobs}


def run_sweep(
    scenario: vsched.ScenarioLike,
    grid: Mapping[str, Sequence[Any]] | None = None,
    *,
    policies: Sequence[str | type[vsched.Policy]] | str | None = None,
    reps: int = 1,
    seed: int = 1,
    jobs: int | None = None,
    out: str | os.PathLike[str] | None = None,
    skip_infeasible: bool = False,
    check: bool = False,
    max_memory: int = 0,
    progress: Progress | None = None,
) -> SweepResults:
    """Run `scenario` at every combination of the values in `grid` (dotted key -> values, as
    `vsched sweep --set`), under each of `policies` (registered names, `FILE.py:CLASS`
    names or `vsched.Policy` subclasses defined at the top level of a file; each at its
    default parameters or those it names, `credit(tslice_ms=10)`; None: the scenario's), `reps`
    seeds each from `seed`, on `jobs` local processes (default: all cores). A `scheduler.KEY`
    that only some of the policies take is applied to those, and the others run at their
    defaults (a `UserWarning` says so once per policy). With `out`, runs are stored in
    `out`/runs.jsonl (a rerun resumes) and the results written to `out`/results.parquet, as
    `vsched sweep --out` does.

    Raises `ScenarioError` for a bad key or value (its subclass `vsched.store.StoreBusy` if
    another process writes `out`), `InfeasiblePoint` for a point the core refuses unless
    `skip_infeasible`, and `vsched.runs.JobFailed` if a run fails."""
    vsched._check_int("reps", reps, 1, MAX_REPS)
    vsched._check_int("seed", seed, 0, 2**64 - reps)
    values = [(key, list(choices)) for key, choices in (grid or {}).items()]
    for key, choices in values:
        if not choices:
            raise vsched.ScenarioError(f"{key}: expected at least one value to sweep")
    text = vsched.read_scenario(scenario)
    # The `scenario` column: the file's path, else (text or data) the scenario's name.
    name = scenario_file(scenario) or str(vsched.Scenario.from_toml(text).get("name", "scenario"))
    names = policy_names(policies)
    points, notes = fit_to_policies(grid_points(values, names or [None]))
    for note in notes:
        warnings.warn(note.removeprefix("note: "), stacklevel=2)
    settings = RunSettings(check, max_memory)
    try:
        planned = plan(name, text, points, range(seed, seed + reps), max_memory, skip_infeasible)
    except InfeasiblePoint as error:
        raise InfeasiblePoint(f"{error}; skip_infeasible=True lists and skips such points") from None
    with tempfile.TemporaryDirectory(prefix="vsched-sweep-") as scratch:
        directory = Path(out) if out is not None else Path(scratch)
        with Store(directory / "runs.jsonl") as store:
            workers = jobs or os.cpu_count() or 1
            rows = run_jobs(planned.jobs, store, workers=workers, progress=progress, settings=settings)
            columns = swept_columns(planned.jobs)
            if out is not None:  # under the store's lock, as the runs were
                write_parquet(rows, directory / "results.parquet", columns)
    return SweepResults([{**row, **columns[row["key"]]} for row in rows], planned.skipped)


def policy_names(policies: Sequence[str | type[vsched.Policy]] | str | None) -> list[str]:
    """`run_sweep`'s `policies` as the names its jobs run under: a name as it is (a string, the
    comma-separated list `--policy` takes), a class as `/abs/path/file.py:ClassName`, which the
    worker processes load anew. A class they could not load (defined in a notebook, nested in a
    function) or anything else raises `ScenarioError` naming the entry."""
    if policies is None:
        return []
    if isinstance(policies, str):
        return python_policy.split_policies(policies)
    names = []
    for index, policy in enumerate(policies):
        label = f"policies[{index}]"
        if isinstance(policy, str):
            names.append(policy)
            continue
        if not isinstance(policy, type):
            raise vsched.ScenarioError(
                f"{label}: expected a policy name or a vsched.Policy subclass, got {policy!r}"
            )
        python_policy.check_class(policy, label)
        module = sys.modules.get(policy.__module__)
        path = getattr(module, "__file__", None)
        if not path or "." in policy.__qualname__ or getattr(module, policy.__name__, None) is not policy:
            where = f"in {path}" if path else f"in module {policy.__module__}, which has no file"
            raise vsched.ScenarioError(
                f"{label}: class {policy.__qualname__} is defined {where}, not at the top level of a .py "
                "file that the sweep's worker processes can load; define it there, or pass "
                "'path/to/file.py:ClassName'"
            )
        names.append(f"{Path(path).resolve()}:{policy.__name__}")
    return names


def default_metrics(rows: Sequence[Row], limit: int = 6) -> list[str]:
    """Completion times (of VMs, then of virtual clusters), or host utilization if none."""
    names = sorted(
        {k for row in rows for k in row if k.endswith(".completion_s") and k.startswith(("vm.", "vc."))}
    )
    names = [n for n in names if any(row.get(n) is not None for row in rows)]
    return names[:limit] or ["host.utilization"]


def summarize(value_lists: list[Any], unfinished: int = 0) -> str:
    """Mean ± std of the numbers among `value_lists`, and how many runs had none: `unfinished`
    of them because the VM's workload did not finish (no completion time), the rest missing."""
    values = [v for v in value_lists if isinstance(v, (int, float)) and not isinstance(v, bool)]
    missing = len(value_lists) - len(values) - unfinished
    absent = ", ".join(f"{n} {why}" for n, why in ((unfinished, "unfinished"), (missing, "missing")) if n)
    if not values:
        return f"unfinished in all {unfinished} runs" if unfinished and not missing else "—"
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    text = f"{mean:.4g} ± {std:.2g}" if math.isfinite(mean) else str(mean)
    return text + (f" ({absent})" if absent else "")


def unfinished_runs(rows: Sequence[Row], metric: str) -> int:
    """Among `rows`, the runs in which the VM of a `vm.<name>.completion_s` metric did not
    finish its workload (0 for any other metric)."""
    if not (metric.startswith("vm.") and metric.endswith(".completion_s")):
        return 0
    finished = metric[: -len("completion_s")] + "finished"
    return sum(row.get(finished) is False for row in rows)


def summary(
    grid: Sequence[Point], jobs: Sequence[Job], rows: Sequence[Row], metrics: Sequence[str]
) -> list[dict[str, Any]]:
    """Per point of `grid`: its values, policy, number of runs and each metric's mean ± std
    over the seeds (`rows[i]` is the row of `jobs[i]`)."""
    entries = []
    for point in grid:
        point_rows = [
            r for j, r in zip(jobs, rows) if (j.overrides, j.policy) == (point.overrides, point.policy)
        ]
        entries.append(
            {
                **dict(point.overrides),
                # The policy the runs had: the scenario's own when the point names none.
                "policy": point.policy
                or next((r["policy"] for r in point_rows if r["policy"]), "(scenario's)"),
                "runs": len(point_rows),
                **{
                    m: summarize([r.get(m) for r in point_rows], unfinished_runs(point_rows, m))
                    for m in metrics
                },
            }
        )
    return entries
