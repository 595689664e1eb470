"""The words around `vsched demo`'s tables.

Every number is read from the report or from the trace of its first run, and every sentence is
about the report's fields, so the explanation stays true when the default scenario or the
simulator changes.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from statistics import fmean, median
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
    ("spin_share", "spin_s as a share of cpu_s"),
    ("steal_s", "time its vCPUs were runnable but waiting for a pCPU"),
    ("lock_holder_preemptions", "times one of its vCPUs was descheduled while holding a lock"),
    ("lock_waiter_preemptions", "times a ticket lock was handed to a waiter whose vCPU was not running"),
    ("cpu_share", "its CPU time as a share of the whole host's"),
    (
        "entitled_share",
        "the share of the host a weighted max-min fair split would have given it for what it asked",
    ),
    ("weight_share", "its weight as a share of all VMs' weights"),
    ("wake_latency_us", "from a wake-up of one of its vCPUs to that vCPU running, in µs (mean)"),
    ("guest_ticks", "timer interrupts its guest kernel took"),
    ("timer_wakes", "halted vCPUs woken by their guest's timer"),
    ("runs_finished", "how many of the runs its job finished in"),
)
# The report's field behind a table row named otherwise.
FIELD_IN_REPORT = {"wake_latency_us": "wake_latency_us_mean", "runs_finished": "finished"}


US_PER_MS = 1000.0

# The workload a Xen host's Domain-0 runs in a report.
DRIVER_DOMAIN_WORKLOAD = "dom0"


def _vcpus(count: int) -> str:
    return f"{count} vCPU" if count == 1 else f"{count} vCPUs"


def introduction(report: dict[str, Any]) -> list[str]:
    """Paragraphs printed before the tables: the scenario and what to look for."""
    vms: list[dict[str, Any]] = report["runs"][0]["vms"]
    guests = [vm for vm in vms if vm["workload"] != DRIVER_DOMAIN_WORKLOAD]
    pcpus: int = report["pcpus"]
    vcpus = sum(vm["vcpus"] for vm in guests)
    listing = "; ".join(f"{vm['name']}: {_vcpus(vm['vcpus'])} running {vm['workload']}" for vm in guests)
    driver = [vm for vm in vms if vm["workload"] == DRIVER_DOMAIN_WORKLOAD]
    beside = (
        f", beside Xen's driver domain {driver[0]['name']} ({_vcpus(driver[0]['vcpus'])}, idle but for"
        " its kernel's timer wake-ups)"
        if driver
        else ""
    )
    return [
        f"vsched demo ({report['scenario']}): {len(guests)} VMs with {vcpus} vCPUs in all share"
        f" {pcpus} pCPUs ({vcpus / pcpus:g} vCPUs per pCPU) under the {report['policy']}"
        f" scheduler{beside}. {listing}.",
        "A guest that takes spinlocks assumes the lock holder keeps running. The hypervisor"
        " does not know which vCPU holds a lock: when it deschedules the holder, the waiters"
        " spin uselessly until the holder runs again. That is lock-holder preemption. The"
        " simulator does not add it as a penalty: it follows from the schedule, and the tables"
        " below count it.",
    ]


def slowdown(report: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    """Paragraphs comparing each finite job with its completion in `baseline` (the same
    scenario without some VMs, run with the same seeds), seed by seed, against the slowdown a
    fair share of the pCPUs would give."""
    pcpus: int = report["pcpus"]
    baseline_names = {vm["name"] for vm in baseline["runs"][0]["vms"]}
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
        # Alone it keeps min(vCPUs, pCPUs) pCPUs busy; here it is due `entitled_share` of the
        # host (the report's weighted max-min split, Domain-0 included).
        entitled = fmean(run["vms"][index]["entitled_share"] for run in report["runs"])
        fair = max(1.0, min(vm["vcpus"], pcpus) / pcpus / entitled) if entitled > 0 else 1.0
        waiters = any(run["vms"][index]["lock_waiter_preemptions"] > 0 for run in report["runs"])
        paragraphs.append(
            f"Alone ({baseline['scenario']}), {vm['name']} finishes in"
            f" {fmean(a for a in alone if a):.3f} s on average; here it is slower by"
            f" {', '.join(ratios)}. Its fair share of the host (entitled_share,"
            f" {entitled:.1%}) would make it about {fair:.1f}x slower: the rest is the cost of"
            " lock-holder preemption"
            + (
                " and of ticket locks handed to waiters that are not running (a seed that falls"
                " into such a convoy takes far longer)."
                if waiters
                else "."
            )
        )
    return paragraphs


def _field_meanings(runs: list[dict[str, Any]]) -> RenderableType:
    """The meaning of each field the VM table shows: those not 0 or absent for every VM."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for field, meaning in FIELD_MEANINGS:
        key = FIELD_IN_REPORT.get(field, field)
        if any(vm.get(key) not in (None, 0, 0.0, False) for run in runs for vm in run["vms"]):
            grid.add_row(field, meaning)
    return Group("How to read the VM table:", grid)


# A figure whose largest value over the seeds exceeds its smallest this many times is quoted
# as its median and range: a mean of values orders of magnitude apart describes no run (a
# lock convoy cut at 300 s beside two runs of 9 s gives a cpu_s of "106 ± 168").
SPREAD_FACTOR = 10.0


def spread_apart(values: list[float]) -> bool:
    """Whether runs' `values` differ too much for a mean (a zero beside a non-zero counts)."""
    return len(values) > 1 and max(values) > SPREAD_FACTOR * min(values)


def across_runs(values: list[float], shown: Callable[[float], str]) -> str:
    """`values` of the runs as one figure: the value of a single run, the mean when the runs
    agree, else the median with the range."""
    if len(values) == 1:
        return shown(values[0])
    if spread_apart(values):
        return f"{shown(median(values))} (median; {shown(min(values))} to {shown(max(values))})"
    return shown(fmean(values))


def _seconds(value: float) -> str:
    return f"{value:.3f} s"


def _percent(value: float) -> str:
    return f"{value:.0%}"


def _count(value: float) -> str:
    return f"{value:,.0f}"


def _rate(value: float) -> str:
    return f"{value:,.1f}"


def _lock_vm(runs: list[dict[str, Any]], index: int) -> str:
    """What VM `index` received and suffered over `runs`: figure by figure, the mean, or the
    median and range where the runs differ more than SPREAD_FACTOR times."""
    vms = [run["vms"][index] for run in runs]
    lengths = [run["sim_s"] for run in runs]
    share = [vm["spin_s"] / vm["cpu_s"] if vm["cpu_s"] > 0 else 0.0 for vm in vms]
    per_second = [vm["lock_holder_preemptions"] / s if s > 0 else 0.0 for vm, s in zip(vms, lengths)]
    steal = [vm["steal_s"] / (vm["vcpus"] * s) if s > 0 else 0.0 for vm, s in zip(vms, lengths)]
    finished = [vm["completion_s"] for vm in vms if vm.get("completion_s") is not None]
    if len(finished) == len(vms):
        outcome = f"finished its job at {across_runs(finished, _seconds)}"
    elif not finished:
        outcome = f"did not finish its job before the run stopped at {across_runs(lengths, _seconds)}"
    else:
        outcome = (
            f"finished its job in {len(finished)} of {len(vms)} runs, at {across_runs(finished, _seconds)};"
            " the others stopped at the horizon"
        )
    if len(runs) == 1:
        lead = "In this run, "
    else:
        lead = (
            f"Over the {len(runs)} runs (seeds {runs[0]['seed']} to {runs[-1]['seed']}; means, or"
            f" the median and range of a figure whose runs differ more than {SPREAD_FACTOR:g}-fold), "
        )
    why = (
        f" The runs lasted {min(lengths):.3f} to {max(lengths):.3f} s: a run ends when every job"
        " has finished, or at the horizon, so a seed whose job does not finish runs far longer"
        " and accumulates far more of everything."
        if max(lengths) > 2 * min(lengths)
        else ""
    )
    cpu = [vm["cpu_s"] for vm in vms]
    spin = [vm["spin_s"] for vm in vms]
    holders = [vm["lock_holder_preemptions"] for vm in vms]
    return (
        f"{lead}{vms[0]['name']} received {across_runs(cpu, _seconds)} of CPU and burned"
        f" {across_runs(share, _percent)} of it spinning ({across_runs(spin, _seconds)}). Its vCPUs"
        f" were descheduled {across_runs(holders, _count)} times while holding a lock"
        f" ({across_runs(per_second, _rate)} per simulated second) and spent"
        f" {across_runs(steal, _percent)} of their time runnable but waiting (steal). It {outcome}.{why}"
    )


def conclusion(report: dict[str, Any]) -> list[RenderableType]:
    """Paragraphs printed after the tables: what the fields mean and what the runs show."""
    runs: list[dict[str, Any]] = report["runs"]
    paragraphs: list[RenderableType] = [_field_meanings(runs)]
    # The VMs whose guests take locks show it: they spun or were preempted holding one.
    lock_vms = [
        index
        for index in range(len(runs[0]["vms"]))
        if any(
            run["vms"][index]["spin_s"] > 0 or run["vms"][index]["lock_holder_preemptions"] > 0
            for run in runs
        )
    ]
    paragraphs += [_lock_vm(runs, index) for index in lock_vms]
    holders_preempted = any(run["vms"][i]["lock_holder_preemptions"] > 0 for run in runs for i in lock_vms)
    if holders_preempted:
        paragraphs.append(
            "Each of those preemptions left the VM's other vCPUs spinning on a lock whose holder"
            " could not run: time slices spent, nothing done."
        )
    waiter_vms = [i for i in lock_vms if any(run["vms"][i]["lock_waiter_preemptions"] > 0 for run in runs)]
    for index in waiter_vms:
        times = [run["vms"][index]["lock_waiter_preemptions"] for run in runs]
        paragraphs.append(
            f"Besides ({across_runs(times, _count)} times), a ticket lock of"
            f" {runs[0]['vms'][index]['name']} was handed to a waiter whose vCPU was not running:"
            " the lock stays taken until that vCPU runs again, and every other waiter spins"
            " meanwhile (lock-waiter preemption)."
        )
    if not holders_preempted and not waiter_vms:
        paragraphs.append(
            "No lock holder was preempted in this run: whatever spinning there was came from"
            " ordinary contention for the lock."
        )
    return paragraphs


@dataclass(frozen=True)
class PreemptedHolder:
    """A lock holder's preemption as a trace shows it: vCPU `vcpu` (`<vm>.v<index>`) was
    descheduled at `preempted_ms` holding a lock and ran again at `resumed_ms` (None: never,
    before the trace ends), while its VM's other vCPUs spun `siblings_spin_ms` in all."""

    vcpu: str
    preempted_ms: float
    resumed_ms: float | None
    siblings_spin_ms: float


def preempted_holders(trace_path: str | os.PathLike[str], vm_names: set[str]) -> Iterator[PreemptedHolder]:
    """The lock-holder preemptions of the VMs `vm_names` in a trace that `vsched run --trace`
    wrote (docs/traces.md: the instants on the vCPU tracks, the runs on the pCPU rows), in
    order of time."""
    with open(trace_path, encoding="utf-8") as file:
        events: list[dict[str, Any]] = json.load(file)["traceEvents"]
    track_names = {
        (event["pid"], event["tid"]): event["args"]["name"]
        for event in events
        if event.get("ph") == "M" and event.get("name") == "thread_name"
    }
    runs = [event for event in events if event.get("ph") == "X" and event.get("cat") in ("run", "spin")]
    instants = sorted(
        (event["ts"], track_names.get((event["pid"], event["tid"]), ""))
        for event in events
        if event.get("ph") == "i" and event.get("name") == "lock-holder preemption"
    )
    for at_us, vcpu in instants:
        vm = vcpu.rpartition(".v")[0]
        if vm not in vm_names:
            continue
        later = [event["ts"] for event in runs if event["name"] == vcpu and event["ts"] >= at_us]
        resumed_us = min(later) if later else None
        until_us = math.inf if resumed_us is None else resumed_us
        spun_us = sum(
            max(0.0, min(event["ts"] + event["dur"], until_us) - max(event["ts"], at_us))
            for event in runs
            if event["cat"] == "spin" and event["name"] != vcpu and event["name"].rpartition(".v")[0] == vm
        )
        yield PreemptedHolder(
            vcpu,
            at_us / US_PER_MS,
            None if resumed_us is None else resumed_us / US_PER_MS,
            spun_us / US_PER_MS,
        )


# Time drawn before a preempted holder's descheduling and after its return, so that the Gantt
# chart shows the VM's vCPUs working before and after the stall.
GANTT_MARGIN_MS = 5.0
# How long after the descheduling to draw when the holder never ran again.
GANTT_OPEN_END_MS = 50.0


def gantt_window(holders: Iterator[PreemptedHolder]) -> tuple[PreemptedHolder, float, float] | None:
    """The first preemption whose siblings spun meanwhile (else the first of all), with the
    window of a Gantt chart that shows it, in ms."""
    first = None
    for holder in holders:
        first = first or holder
        if holder.siblings_spin_ms > 0:
            first = holder
            break
    if first is None:
        return None
    end = first.preempted_ms + GANTT_OPEN_END_MS if first.resumed_ms is None else first.resumed_ms
    return first, max(0.0, first.preempted_ms - GANTT_MARGIN_MS), end + GANTT_MARGIN_MS


def next_steps(seed: int, window: tuple[PreemptedHolder, float, float] | None) -> list[str]:
    """How to go on: the scenario to edit and, when the traced run had a lock-holder
    preemption, the Gantt chart of one."""
    edit = (
        "To experiment, save the scenario with `vsched demo --print-scenario > demo.toml`,"
        " change its [scheduler] (see `vsched policies`) or its VMs, and run it with"
        " `vsched run demo.toml`."
    )
    if window is None:
        return [
            edit + " To see the schedule itself: `vsched run demo.toml --trace t.json`, then"
            " `vsched plot-trace t.json --end-ms 100 -o gantt.png` (its first 100 ms)."
        ]
    holder, start, end = window
    back = (
        "never ran again before the run ended"
        if holder.resumed_ms is None
        else f"ran again at {holder.resumed_ms:,.1f} ms"
    )
    return [
        edit,
        f"To see a preempted lock holder: in seed {seed}'s run, {holder.vcpu} was descheduled at"
        f" {holder.preempted_ms:,.1f} ms holding the lock and {back}; meanwhile the VM's other"
        f" vCPUs spun {holder.siblings_spin_ms:,.1f} ms. Draw it with `vsched run demo.toml"
        f" --trace t.json` (the trace of the first run), then `vsched plot-trace t.json"
        f" --start-ms {start:.0f} --end-ms {end:.0f} -o gantt.png` (one row per pCPU, spinning"
        " hatched), or open t.json in https://ui.perfetto.dev.",
    ]
