"""The words around `vsched demo`'s tables.

Every number is read from the report and every sentence is about the report's fields, so
the explanation stays true when the default scenario or the simulator changes.
"""

from __future__ import annotations

from statistics import fmean, median, stdev
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table

FIELD_MEANINGS = (
    (
        "completion_s",
        "when the VM's job finished (— for one that never ends, e.g. a CPU hog; unfinished if cut short)",
    ),
    ("cpu_s", "CPU time its vCPUs received"),
    ("spin_s", "the part of cpu_s burned spinning on a lock: CPU used, no progress made"),
    ("steal_s", "time its vCPUs were runnable but waiting for a pCPU"),
    ("lock_holder_preemptions", "times one of its vCPUs was descheduled while holding a lock"),
    ("lock_waiter_preemptions", "times a ticket lock was handed to a waiter whose vCPU was not running"),
)


def _vcpus(count: int) -> str:
    return f"{count} vCPU" if count == 1 else f"{count} vCPUs"


def introduction(report: dict[str, Any]) -> list[str]:
    """Paragraphs printed before the tables: the scenario and what to look for."""
    vms: list[dict[str, Any]] = report["runs"][0]["vms"]
    pcpus: int = report["pcpus"]
    vcpus = sum(vm["vcpus"] for vm in vms)
    listing = "; ".join(f"{vm['name']}: {_vcpus(vm['vcpus'])} running {vm['workload']}" for vm in vms)
    return [
        f"vsched demo ({report['scenario']}): {len(vms)} VMs with {vcpus} vCPUs in all share"
        f" {pcpus} pCPUs ({vcpus / pcpus:g} vCPUs per pCPU) under the {report['policy']}"
        f" scheduler. {listing}.",
        "A guest that takes spinlocks assumes the lock holder keeps running. The hypervisor"
        " does not know which vCPU holds a lock: when it deschedules the holder, the waiters"
        " spin uselessly until the holder runs again. That is lock-holder preemption. The"
        " simulator does not add it as a penalty: it follows from the schedule, and the tables"
        " below count it.",
    ]


def _vm_means(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Per VM, its summary with each `<m>_mean` renamed `<m>`, plus the VM's configuration
    from the first run."""
    means = []
    for config, summary in zip(report["runs"][0]["vms"], report["summary"]["vms"]):
        vm = dict(config)
        for key, value in summary.items():
            if key.endswith("_mean"):
                vm[key[: -len("_mean")]] = value
            elif not key.endswith("_std"):
                vm[key] = value
        means.append(vm)
    return means


def slowdown(report: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    """Paragraphs comparing each finite job with its completion in `baseline` (the same
    scenario without some VMs, run with the same seeds), seed by seed, against the slowdown a
    fair share of the pCPUs would give."""
    pcpus: int = report["pcpus"]
    baseline_names = {vm["name"] for vm in baseline["runs"][0]["vms"]}
    added_vcpus = sum(vm["vcpus"] for vm in report["runs"][0]["vms"] if vm["name"] not in baseline_names)
    paragraphs = []
    for index, vm in enumerate(report["runs"][0]["vms"]):
        if vm["name"] not in baseline_names or vm["workload"] not in ("spinlock", "bsp"):
            continue
        alone = [
            next(v for v in run["vms"] if v["name"] == vm["name"])["completion_s"] for run in baseline["runs"]
        ]
        crowded = [run["vms"][index]["completion_s"] for run in report["runs"]]
        ratios = [
            f"{c / a:.1f}x (seed {run['seed']})"
            if c is not None
            else f"more than {run['sim_s'] / a:.0f}x (seed {run['seed']}, unfinished)"
            for run, c, a in zip(report["runs"], crowded, alone)
            if a
        ]
        if not ratios:
            continue
        fair = max(1.0, (vm["vcpus"] + added_vcpus) / pcpus)
        paragraphs.append(
            f"Alone ({baseline['scenario']}), {vm['name']} finishes in"
            f" {fmean(a for a in alone if a):.3f} s on average; here it is slower by"
            f" {', '.join(ratios)}. A fair share of the {pcpus} pCPUs would make it about"
            f" {fair:g}x slower: the rest is the cost of lock-holder preemption and of ticket"
            " locks handed to waiters that are not running (a seed that falls into such a"
            " convoy takes far longer)."
        )
    return paragraphs


def _field_meanings() -> RenderableType:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for field, meaning in FIELD_MEANINGS:
        grid.add_row(field, meaning)
    return Group("How to read the VM table:", grid)


# Figures of a VM that the demo's sentences quote; when any of them spreads wider over the
# seeds than its mean (standard deviation above the mean), a mean would describe no run, and
# the sentences go run by run instead.
QUOTED_FIGURES = ("cpu_s", "spin_s", "steal_s", "lock_holder_preemptions", "lock_waiter_preemptions")


def _too_spread_for_a_mean(values: list[float]) -> bool:
    return len(values) > 1 and stdev(values) > fmean(values)


def _one_run(vm: dict[str, Any], sim_s: float, finished: str | None = None) -> str:
    """What VM `vm` (its figures in one run of `sim_s` seconds, or their means) received and
    suffered, and whether it `finished` (by default, as its completion_s says)."""
    spin_fraction = vm["spin_s"] / vm["cpu_s"] if vm["cpu_s"] > 0 else 0.0
    steal_fraction = vm["steal_s"] / (vm["vcpus"] * sim_s) if sim_s > 0 else 0.0
    if finished is None and vm.get("completion_s") is None:
        finished = f"did not finish its job before the run stopped at {sim_s:.3f} s"
    elif finished is None:
        finished = f"finished its job at {vm['completion_s']:.3f} s"
    return (
        f"{vm['name']} received {vm['cpu_s']:.3f} s of CPU and burned {spin_fraction:.0%} of it"
        f" spinning ({vm['spin_s']:.3f} s). Its vCPUs were descheduled"
        f" {vm['lock_holder_preemptions']:,.0f} times while holding a lock"
        f" ({vm['lock_holder_preemptions'] / sim_s:,.1f} per simulated second) and spent"
        f" {steal_fraction:.0%} of their time runnable but waiting (steal). It {finished}."
    )


def _run_by_run(report: dict[str, Any], index: int, spread: str) -> str:
    """VM `index` seed by seed, with the median, for runs too different for a mean."""
    runs: list[dict[str, Any]] = report["runs"]
    lengths = [run["sim_s"] for run in runs]
    why = (
        f" The runs lasted {min(lengths):.3f} to {max(lengths):.3f} s: a run ends when every job"
        " has finished, or at the horizon, so a seed whose job does not finish runs far longer"
        " and accumulates far more of everything."
        if max(lengths) > 2 * min(lengths)
        else ""
    )
    per_seed = " ".join(f"Seed {run['seed']}: {_one_run(run['vms'][index], run['sim_s'])}" for run in runs)
    vms = [run["vms"][index] for run in runs]
    completions = [vm["completion_s"] for vm in vms if vm.get("completion_s") is not None]
    medians = (
        f"Medians over the {len(runs)} runs: {median(vm['cpu_s'] for vm in vms):.3f} s of CPU,"
        f" {median(vm['lock_holder_preemptions'] for vm in vms):,.0f} lock-holder preemptions"
        + (
            f", completion {median(completions):.3f} s over the {len(completions)} runs that finished."
            if completions
            else "; no run finished."
        )
    )
    return (
        f"The {len(runs)} runs differ too much for a mean to describe any of them ({spread}: a"
        f" standard deviation larger than the mean).{why} Run by run: {per_seed} {medians}"
    )


def conclusion(report: dict[str, Any]) -> list[RenderableType]:
    """Paragraphs printed after the tables: what the fields mean and what this run shows."""
    runs: list[dict[str, Any]] = report["runs"]
    sim_s = fmean(run["sim_s"] for run in runs)
    averaged = f" (means over {len(runs)} runs)" if len(runs) > 1 else ""
    paragraphs: list[RenderableType] = [_field_meanings()]
    # The VMs whose guests take locks show it: they spun or were preempted holding one.
    lock_vms = [
        (index, vm)
        for index, vm in enumerate(_vm_means(report))
        if vm["spin_s"] > 0 or vm["lock_holder_preemptions"] > 0
    ]
    spread_out = set()
    for index, vm in lock_vms:
        per_run = {key: [run["vms"][index][key] for run in runs] for key in QUOTED_FIGURES}
        spreads = [key for key, values in per_run.items() if _too_spread_for_a_mean(values)]
        if spreads:
            spread_out.add(index)
            first = per_run[spreads[0]]
            spread = f"{vm['name']}'s {spreads[0]} is {fmean(first):,.1f} ± {stdev(first):,.1f}" + (
                f", and its {', '.join(spreads[1:])} spread as widely" if spreads[1:] else ""
            )
            paragraphs.append(_run_by_run(report, index, spread))
            continue
        finished = None
        if vm["runs_finished"] < len(runs) and vm["completion_s"] is not None:
            finished = (
                f"finished its job in {vm['runs_finished']} of {len(runs)} runs,"
                f" at {vm['completion_s']:.3f} s on average"
            )
        paragraphs.append(f"In this run{averaged}, {_one_run(vm, sim_s, finished)}")
    holders_preempted = any(vm["lock_holder_preemptions"] > 0 for _, vm in lock_vms)
    if holders_preempted:
        paragraphs.append(
            "Each of those preemptions left the VM's other vCPUs spinning on a lock whose holder"
            " could not run: time slices spent, nothing done."
        )
    waiters = [(i, vm) for i, vm in lock_vms if vm["lock_waiter_preemptions"] > vm["lock_holder_preemptions"]]
    for index, vm in waiters:
        if index in spread_out:
            times = ", ".join(
                f"{run['vms'][index]['lock_waiter_preemptions']:,} (seed {run['seed']})" for run in runs
            )
        else:
            times = f"{vm['lock_waiter_preemptions']:,.0f}"
        paragraphs.append(
            f"More often still ({times} times), a ticket lock of"
            f" {vm['name']} was handed to a waiter whose vCPU was not running: the lock stays"
            " taken until that vCPU runs again, and every other waiter spins meanwhile"
            " (lock-waiter preemption)."
        )
    if not holders_preempted and not waiters:
        paragraphs.append(
            "No lock holder was preempted in this run: whatever spinning there was came from"
            " ordinary contention for the lock."
        )
    return paragraphs


NEXT_STEPS = (
    "To experiment, save the scenario with `vsched demo --print-scenario > demo.toml`,"
    " change its [scheduler] (see `vsched policies`) or its VMs, and run it with"
    " `vsched run demo.toml`. To see the schedule itself: `vsched run demo.toml --trace"
    " t.json`, then `vsched plot-trace t.json -o gantt.png`."
)
