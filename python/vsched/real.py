"""Scenarios on real vCPUs: the same policies scheduling KVM vCPUs that execute generated
x86-64 code (crate `vsched-kvm`; docs/real-vcpus.md).

`run_json` runs a scenario's repetitions on real vCPUs and returns a report in the schema of
`vsched.run_json` (plus `backend` and `real`), so `vsched.report` prints it. `compare` runs a
scenario (and optionally its baseline, the same VMs alone) on the simulator and on real
vCPUs with the same seeds, and sets per VM the median [min–max] of each world's runs side by
side. Real runs of a scenario and of its baseline are interleaved, repetition by
repetition, so that a change in the shared host's load falls on both.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable

from rich import box
from rich.console import Group
from rich.table import Table

from vsched import (
    ProgressCallback,
    ScenarioError,
    ScenarioLike,
    _check_int,
    _core,
    _with_overrides,
    read_scenario,
)
from vsched.repetitions import seed_and_reps
from vsched.report import format_value

DEFAULT_DEADLINE_S: float = _core.REAL_DEFAULT_DEADLINE_S
DEFAULT_MEMORY_PER_VM: int = _core.REAL_DEFAULT_MEMORY_PER_VM
_U64_MAX = 2**64 - 1

# The per-VM figures a comparison sets side by side, in its rows' order.
COMPARED = ("completion_s", "cpu_share", "spin_share")


class DisturbedHost(Exception):
    """A comparison refused because most of its real runs shared their CPUs with other work."""


def disturbed(runs: Sequence[dict[str, Any]]) -> int:
    """How many of these real runs other processes disturbed: took more than
    `isolation.disturbed_above` of their host CPUs (crates/vsched-kvm/src/isolation.rs)."""
    return sum(run.get("isolation", {}).get("disturbed") is True for run in runs)


def _disturbed_above(runs: Sequence[dict[str, Any]]) -> str:
    share = runs[0].get("isolation", {}).get("disturbed_above") if runs else None
    return "the threshold" if share is None else f"{share:.0%}"


SLOWDOWN = "slowdown"

HOST_THREADS = "host-threads"
"""The workload of the VM that stands for a KVM host's own threads in a simulator report."""

MAX_TIMER_SLOP_US = 10_000.0
"""The longest `host.timer_slop_us` a scenario may set (crates/vsched/src/host.rs)."""


def machine_costs(
    real: dict[str, Any], scenario_text: str, losses: MachineLosses | None = None
) -> dict[str, float]:
    """This machine's costs, as the simulator's host keys (`vsched run --set`), so that the
    simulator models this machine rather than a hardware era's:

    - `host.vm_exit_us`: a pause-loop exit's cost here (`real.ple_exit_us` of `real`, a
      `run_json` report of `scenario_text`, measured once per process at its first real run),
      with `host.ple_handler_us` 0 (it is part of that cost);
    - `host.ple_window_cycles`: the window stretched as the real guests stretch it
      (`real.ple_window_stretch`, crates/vsched-kvm/src/ple_scaling.rs);
    - `host.context_switch_us` and `host.migration_us`: what a switch costs here, and a
      migrating switch beyond it, from `losses` (`machine_losses`; by default of `real`'s
      runs alone); never below the scenario's own.

    docs/real-vcpus.md, "The simulator with this machine's costs"."""
    import tomllib

    host = tomllib.loads(scenario_text).get("host", {})
    measured = real.get("real", {})
    exit_us = measured.get("ple_exit_us")
    stretch = measured.get("ple_window_stretch")
    losses = losses if losses is not None else machine_losses([real])
    costs: dict[str, float] = {} if losses is None else losses.host_keys(host)
    late = [run["scheduler_late_us"]["mean"] for run in real["runs"] if run.get("scheduler_late_us")]
    if late:
        # Uniform in [0, slop): as late on average as the runner's loop was.
        costs["host.timer_slop_us"] = round(min(2 * statistics.median(late), MAX_TIMER_SLOP_US), 3)
    if exit_us is not None and stretch is not None:
        costs["host.vm_exit_us"] = round(exit_us, 3)
        costs["host.ple_handler_us"] = 0.0
        window = host.get("ple_window_cycles", 4096)
        if window > 0:
            costs["host.ple_window_cycles"] = min(round(window * stretch), 2**32 - 1)
    return costs


@dataclass(frozen=True)
class MachineLosses:
    """Where real guests lost the time the scheduler gave them (`machine_losses`)."""

    switch_us: float
    """What a context switch costs the vCPU switched in, in µs."""
    migration_us: float
    """What a switch costs beyond that when the vCPU last ran on another CPU, in µs."""
    share: float
    """The share of the time given that a guest loses however it is scheduled: the host's own
    interrupts and work on its CPU, which exit kvm_pvm's guests (not simulated: it slows a VM
    alone and beside others alike, so it cancels in slowdowns)."""
    runs: int
    """The real runs the fit is over."""

    def host_keys(self, scenario_host: dict[str, Any]) -> dict[str, float]:
        """As the simulator's host keys; never below the scenario's own switch cost."""
        switch = max(self.switch_us, scenario_host.get("context_switch_us", 0.0))
        migration = max(self.migration_us, scenario_host.get("migration_us", 0.0))
        return {"host.context_switch_us": round(switch, 3), "host.migration_us": round(migration, 3)}


def machine_losses(reports: Sequence[dict[str, Any] | None]) -> MachineLosses | None:
    """Split the time real guests were given but did not execute (`cpu_s - guest_executed_s`,
    summed over a run's VMs) into its causes, over the undisturbed runs of `reports` (`run_json`
    reports, e.g. a scenario's and its baseline's; None entries are skipped):

        lost - exits x exit cost
            = share x cpu_s + switch cost x switches + migration cost x migrating switches

    Exits that are not switches (pause-loop exits, sends to another VM) are charged at the
    synthesized exit's measured cost (`real.ple_exit_us`). The three others are the
    non-negative least-squares fit over the runs: a VM alone switches rarely and beside a hog
    often, and policies migrate at different shares of their switches, so the terms are told
    apart (the more runs and the more different, the better: `scripts/real_suite.py` fits
    them over the whole suite). None when no run switched."""
    rows, lost = [], []
    for report in (r for r in reports if r is not None):
        exit_us = report.get("real", {}).get("ple_exit_us") or 0.0
        for run in report["runs"]:
            if run.get("isolation", {}).get("disturbed") is True:
                continue  # other processes' time on the guests' CPUs would count as lost
            vms = run["vms"]
            exits = sum(vm.get("ple_exits") or 0 for vm in vms) + run.get("sends_between_vms", 0)
            given = sum(vm["cpu_s"] for vm in vms)
            lost.append(given - sum(vm.get("guest_executed_s") or 0.0 for vm in vms) - exits * exit_us * 1e-6)
            host = run["host"]
            rows.append((given, host["context_switches"], host.get("migrations") or 0))
    if not any(switches for _, switches, _ in rows):
        return None
    share, per_switch, per_migration = nonnegative_least_squares(rows, lost)
    return MachineLosses(
        switch_us=per_switch * 1e6, migration_us=per_migration * 1e6, share=share, runs=len(rows)
    )


def nonnegative_least_squares(rows: Sequence[Sequence[float]], targets: Sequence[float]) -> list[float]:
    """The coefficients c >= 0 that minimize |rows · c - targets|²: the best unconstrained fit
    on each subset of the columns, the others 0, kept if non-negative (exact for the few
    columns `machine_losses` has)."""
    import itertools

    import numpy

    a, b = numpy.asarray(rows, dtype=float), numpy.asarray(targets, dtype=float)
    columns = a.shape[1]
    best, best_residual = [0.0] * columns, float(b @ b)
    for size in range(1, columns + 1):
        for subset in itertools.combinations(range(columns), size):
            fit, *_ = numpy.linalg.lstsq(a[:, subset], b, rcond=None)
            if (fit < 0).any():
                continue
            coefficients = numpy.zeros(columns)
            coefficients[list(subset)] = fit
            error = a @ coefficients - b
            if float(error @ error) < best_residual:
                best, best_residual = [float(c) for c in coefficients], float(error @ error)
    return best


def simulate(
    text: str,
    baseline_text: str | None,
    seed: int,
    reps: int,
    policy: str | None,
    costs: dict[str, float] | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The simulator's side of a comparison: the reports of the scenario `text` and of its
    baseline (if any), with the same seeds and policy, and the host keys of `costs` set
    (`machine_costs`; none: the scenario's own)."""

    def one(scenario_text: str) -> dict[str, Any]:
        report: dict[str, Any] = json.loads(
            _core.run(_with_overrides(scenario_text, costs), seed=seed, reps=reps, policy=policy)
        )
        return report

    return one(text), None if baseline_text is None else one(baseline_text)


def unavailable_reason() -> str | None:
    """Why this machine cannot run real vCPUs (one line), or None if it can."""
    return _core.real_unavailable()


def run_json(
    scenario: ScenarioLike,
    *,
    seed: int | None = None,
    reps: int | None = None,
    policy: str | None = None,
    deadline_s: float | None = None,
    memory_per_vm: int | None = None,
    progress: ProgressCallback | None = None,
    trace: str | os.PathLike[str] | None = None,
    trace_limit: int = 0,
) -> str:
    """Run `scenario` on real vCPUs and return the JSON report as the core wrote it.

    As `vsched.run_json` for `seed`, `reps` and `policy` (a registered policy: Python
    policies cannot run on real vCPUs yet). Each run ends when every VM whose workload ends
    has finished (`until = "all_done"`), at the scenario's horizon, or at `deadline_s` seconds
    of wall-clock time (default `DEFAULT_DEADLINE_S`), whichever comes first. Each VM gets
    `memory_per_vm` bytes of guest memory at most. `progress(rep, reps, elapsed_s,
    deadline_s)` is called at most every 100 ms. `trace` names a file for the first
    repetition's trace, in `vsched run --trace`'s format (at most `trace_limit` events, 0 =
    the default bound). Bad input, and a machine that cannot run real vCPUs or this scenario
    on them, raise `ScenarioError`; Ctrl-C stops the run after its VMs are cleaned up.
    """
    _check_int("seed", seed, 0, _U64_MAX)
    _check_int("reps", reps, 1, 2**32 - 1)
    _check_int("--memory-per-vm", memory_per_vm, 0, _U64_MAX)
    if deadline_s is not None and not isinstance(deadline_s, (int, float)):
        raise ScenarioError(f"--deadline-s: expected a number of seconds, got {deadline_s!r}")
    return _core.run_real(
        read_scenario(scenario),
        seed=seed,
        reps=reps,
        policy=policy,
        deadline_s=None if deadline_s is None else float(deadline_s),
        memory_per_vm=memory_per_vm,
        progress=progress,
        trace=trace,
        trace_limit=trace_limit,
    )


@dataclass(frozen=True)
class Spread:
    """The median, smallest and largest of a figure over runs (None: no run had it). A run
    whose VM did not finish its work counts as `UNFINISHED`, beyond every finished one: the
    median of three runs two of which did not finish is unfinished, not the one that did."""

    median: float | None
    low: float | None
    high: float | None
    runs: int
    unfinished: int = 0

    @staticmethod
    def of(values: Sequence[float | None]) -> Spread:
        known = [v for v in values if v is not None]
        if not known:
            return Spread(None, None, None, 0)
        unfinished = sum(v == UNFINISHED for v in known)
        return Spread(statistics.median(known), min(known), max(known), len(known), unfinished)

    def as_json(self) -> dict[str, Any]:
        """In JSON, unfinished is null beside the count of unfinished runs."""

        def finite(value: float | None) -> float | None:
            return None if value == UNFINISHED else value

        return {
            "median": finite(self.median),
            "min": finite(self.low),
            "max": finite(self.high),
            "runs": self.runs,
            "unfinished": self.unfinished,
        }

    @staticmethod
    def from_json(entry: dict[str, Any]) -> Spread:
        unfinished = entry.get("unfinished", 0)

        def value(v: float | None) -> float | None:
            return UNFINISHED if v is None and unfinished else v

        median, low, high = (value(entry[k]) for k in ("median", "min", "max"))
        return Spread(median, low, high, entry["runs"], unfinished)

    def text(self, key: str) -> str:
        if self.median is None or self.low is None or self.high is None:
            return "—"

        def shown(value: float) -> str:
            return "unfinished" if value == UNFINISHED else format_value(key, value)

        return f"{shown(self.median)} [{shown(self.low)}–{shown(self.high)}]"


UNFINISHED = math.inf
"""A completion or slowdown of a run whose VM did not finish its work (`Spread`)."""


def _per_vm(report: dict[str, Any], key: str) -> dict[str, list[float | None]]:
    """`key` of each VM (by name) in each run of `report`; a completion of a VM that did not
    finish its work is `UNFINISHED`."""
    values: dict[str, list[float | None]] = {}
    for run in report["runs"]:
        for vm in run["vms"]:
            value = vm.get(key)
            if key == "completion_s" and vm.get("finished") is False:
                value = UNFINISHED
            values.setdefault(vm["name"], []).append(value)
    return values


def _slowdowns(report: dict[str, Any], baseline: dict[str, Any]) -> dict[str, list[float | None]]:
    """Each run's completion of each VM over the median completion of that VM in `baseline`."""
    alone = {name: Spread.of(values).median for name, values in _per_vm(baseline, "completion_s").items()}
    slowdowns: dict[str, list[float | None]] = {}
    for name, completions in _per_vm(report, "completion_s").items():
        reference = alone.get(name)
        slowdowns[name] = [
            None if c is None or reference is None or reference <= 0 else c / reference for c in completions
        ]
    return slowdowns


def _ratio(real: Spread, sim: Spread) -> float | None:
    """Real over simulated medians; None when either is missing or unfinished."""
    if (
        real.median is None
        or sim.median is None
        or sim.median == 0
        or UNFINISHED in (real.median, sim.median)
    ):
        return None
    return real.median / sim.median


def comparison(
    sim: dict[str, Any],
    real: dict[str, Any],
    sim_baseline: dict[str, Any] | None = None,
    real_baseline: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The per-VM comparison of a simulator report and a real-vCPU report of one scenario
    (and of its baseline's two reports, for slowdowns): for each VM and figure, each world's
    median [min–max] over its runs and the ratio of the medians, real over simulated."""
    columns: dict[str, tuple[dict[str, list[float | None]], dict[str, list[float | None]]]] = {
        key: (_per_vm(sim, key), _per_vm(real, key)) for key in COMPARED
    }
    if sim_baseline is not None and real_baseline is not None:
        columns[SLOWDOWN] = (_slowdowns(sim, sim_baseline), _slowdowns(real, real_baseline))
    vms = []
    for vm in real["runs"][0]["vms"]:
        name = vm["name"]
        figures = {}
        for key, (sim_values, real_values) in columns.items():
            s, r = Spread.of(sim_values.get(name, [])), Spread.of(real_values.get(name, []))
            figures[key] = {"sim": s.as_json(), "real": r.as_json(), "real_over_sim": _ratio(r, s)}
        vms.append({"name": name, "workload": vm["workload"], "vcpus": vm["vcpus"], "figures": figures})
    return {
        "scenario": real["scenario"],
        "policy": real["policy"],
        "seed": real["seed"],
        "reps": real["reps"],
        "baseline": None if real_baseline is None else real_baseline["scenario"],
        "backend": real.get("backend"),
        "vms": vms,
    }


def compare(
    scenario: ScenarioLike,
    *,
    baseline: ScenarioLike | None = None,
    seed: int | None = None,
    reps: int | None = None,
    policy: str | None = None,
    deadline_s: float | None = None,
    memory_per_vm: int | None = None,
    progress: Callable[[str], None] | None = None,
    allow_disturbed: bool = False,
    with_machine_costs: bool = False,
) -> dict[str, Any]:
    """Run `scenario` (and `baseline`, if given) on real vCPUs and on the simulator with the
    same policy and seeds, and return `comparison(...)` with the four reports under
    `reports`. Real runs go one repetition at a time, the scenario's and the baseline's in
    turn; `progress(message)` hears of each. Raises `DisturbedHost` when more than half the
    real runs were disturbed, unless `allow_disturbed`. With `with_machine_costs`, the
    simulator runs with this machine's costs as the scenario's real runs measured them
    (`machine_costs`, the same for the baseline; under `machine_costs` in the result, with
    `guest_loss_share`, `MachineLosses.share`).
    Other arguments as for `run_json`."""
    text = read_scenario(scenario)
    baseline_text = None if baseline is None else read_scenario(baseline)
    for checked in (text, baseline_text):
        if checked is not None:
            _core.validate(checked)
    seed, reps = seed_and_reps(text, seed, reps)
    _check_int("seed", seed, 0, _U64_MAX - (reps - 1))
    _check_int("reps", reps, 1, 2**32 - 1)
    real_runs: list[dict[str, Any]] = []
    baseline_runs: list[dict[str, Any]] = []
    options: dict[str, Any] = {"policy": policy, "deadline_s": deadline_s, "memory_per_vm": memory_per_vm}
    for rep in range(reps):
        if progress is not None:
            progress(f"real vCPUs: run {rep + 1}/{reps} (seed {seed + rep})")
        real_runs.append(json.loads(run_json(text, seed=seed + rep, reps=1, **options)))
        if baseline_text is not None:
            baseline_runs.append(json.loads(run_json(baseline_text, seed=seed + rep, reps=1, **options)))
    if progress is not None:
        progress("simulator")
    real = _joined(real_runs, seed)
    real_baseline = _joined(baseline_runs, seed) if baseline_runs else None
    runs = real["runs"] + ([] if real_baseline is None else real_baseline["runs"])
    spoiled = disturbed(runs)
    if 2 * spoiled > len(runs) and not allow_disturbed:
        raise DisturbedHost(
            f"{spoiled} of {len(runs)} real runs were disturbed: other processes took more than "
            f"{_disturbed_above(runs)} of their host CPUs (isolation.others_share in `vsched real --json`); "
            "compare on a quiet host"
        )
    losses = machine_losses([real, real_baseline]) if with_machine_costs else None
    costs = machine_costs(real, text, losses) if with_machine_costs else {}
    result = against_real(text, baseline_text, real, real_baseline, policy, costs)
    result["guest_loss_share"] = None if losses is None else round(losses.share, 4)
    return result


def against_real(
    text: str,
    baseline_text: str | None,
    real: dict[str, Any],
    real_baseline: dict[str, Any] | None,
    policy: str | None,
    costs: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The scenario `text` (and its baseline) simulated with the seeds of the real reports
    `real` (and `real_baseline`) and the host keys of `costs`, set beside them: `comparison`'s
    result with the disturbed real runs counted, `machine_costs`, whether the simulator ran a
    KVM host's threads, and the four reports under `reports`. `compare` and the differential
    suite's replays (scripts/real_suite.py) both use it."""
    sim, sim_baseline = simulate(text, baseline_text, real["seed"], real["reps"], policy, costs)
    runs = real["runs"] + ([] if real_baseline is None else real_baseline["runs"])
    result = comparison(sim, real, sim_baseline, real_baseline)
    result["disturbed_runs"] = disturbed(runs)
    result["real_runs"] = len(runs)
    result["disturbed_above"] = _disturbed_above(runs)
    result["machine_costs"] = costs or None
    result["sim_host_threads"] = any(vm["workload"] == HOST_THREADS for vm in sim["runs"][0]["vms"])
    result["reports"] = {"sim": sim, "real": real, "sim_baseline": sim_baseline}
    result["reports"]["real_baseline"] = real_baseline
    return result


def _joined(reports: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    """One report of single-repetition real reports (their runs in order; the summary is
    left out, a comparison reads the runs)."""
    joined = dict(reports[0])
    joined["runs"] = [run for report in reports for run in report["runs"]]
    joined["reps"] = len(reports)
    joined["seed"] = seed
    joined.pop("summary", None)
    return joined


def comparison_table(result: dict[str, Any]) -> Group:
    """The comparison as `vsched real --compare` prints it: per VM and figure, the simulator's
    and real vCPUs' median [min–max] over the runs, and real over simulated."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("VM", "figure", "simulator", "real vCPUs", "real/sim"):
        table.add_column(column, justify="left" if column in ("VM", "figure") else "right", overflow="fold")
    for vm in result["vms"]:
        first = True
        for key, figure in vm["figures"].items():
            sim, real = (Spread.from_json(figure[w]) for w in ("sim", "real"))
            if sim.median is None and real.median is None:
                continue  # e.g. the completion of a workload that never ends
            ratio = figure["real_over_sim"]
            name = vm["name"] if first else ""
            table.add_row(name, key, sim.text(key), real.text(key), "—" if ratio is None else f"{ratio:.2f}")
            first = False
    against = f", slowdown against {result['baseline']}" if result["baseline"] else ""
    last_seed = result["seed"] + result["reps"] - 1
    backend = "" if result.get("backend") in (None, "kvm") else f" ({result['backend']} backend)"
    spoiled = result.get("disturbed_runs", 0)
    if spoiled:
        against += (
            f"; {spoiled} of {result['real_runs']} real runs disturbed (others took over "
            f"{result['disturbed_above']} of their CPUs)"
        )
    costs = result.get("machine_costs")
    if costs:
        against += "; the simulator with this machine's costs: " + ", ".join(
            f"{key.removeprefix('host.')} {value:g}" for key, value in costs.items()
        )
    if costs and "host.context_switch_us" not in costs:
        against += " (no switch costs: no undisturbed real run switched)"
    if result.get("sim_host_threads"):
        against += (
            "; the simulator ran the KVM host's threads, which the runner's policy does not see "
            "(host.host_threads = false compares like with like)"
        )
    share = result.get("guest_loss_share")
    if share:
        against += f"; the guests lost {share:.1%} of their time to the host however scheduled (not modelled)"
    title = (
        f"{result['scenario']}, policy {result['policy']}: simulator against real vCPUs{backend}, "
        f"median [min–max] over {result['reps']} runs (seeds {result['seed']}..{last_seed})"
        f"{against}"
    )
    return Group(title, table)
