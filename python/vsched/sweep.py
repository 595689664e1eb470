"""`vsched sweep`: one scenario over the cross product of parameter values, each point
repeated over seeds, on the machinery of `vsched.runs` (so an interrupted sweep resumes).

    vsched sweep scenarios/lhp-demo.toml --set scheduler.tslice_ms=10,30 \\
        --set vm.spin.vcpus=2,4 --reps 5 --out sweep-lhp

A `--set` key is a dotted path into the scenario (see `runs.apply_overrides`); its values are
TOML values separated by commas (10, 2.5, true, "credit" or a bare word).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import vsched
from vsched.runs import Job, Override, Row, make_jobs, parse_value


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
    parsed = [parse_set(option) for option in sets]
    keys = [key for key, _ in parsed]
    if len(set(keys)) != len(keys):
        raise vsched.ScenarioError(f"--set: a key is given twice among {keys}")
    combos = itertools.product(*(values for _, values in parsed))
    return [Point(tuple(zip(keys, combo)), policy) for combo in combos for policy in policies]


def plan(scenario: str, text: str, grid: Sequence[Point], seeds: range, max_memory: int = 0) -> list[Job]:
    """Every job of the sweep; each scenario variant is validated (its memory estimate against
    `max_memory` bytes, 0 = the core's default budget) before anything runs."""
    jobs = []
    for point in grid:
        point_jobs = make_jobs(scenario, text, point.policy, point.overrides, seeds)
        described = ", ".join(f"{k}={v}" for k, v in point.overrides) or "the scenario as written"
        try:
            vsched.validate(point_jobs[0].text, max_memory=max_memory)
        except (vsched.ScenarioError, vsched.InternalError) as error:
            # The same kind of error, naming the point.
            raise type(error)(f"{error} (with {described})") from None
        jobs += point_jobs
    return jobs


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
                "policy": point.policy or "(scenario's)",
                "runs": len(point_rows),
                **{
                    m: summarize([r.get(m) for r in point_rows], unfinished_runs(point_rows, m))
                    for m in metrics
                },
            }
        )
    return entries
