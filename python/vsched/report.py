"""Readable tables of a run report (the JSON document of `vsched run --json`).

The tables show whatever metrics the report holds, so a metric added to the core appears
here without a change; the best-known ones come first, in a fixed order. One repetition
shows its values; several show the summary's mean ± standard deviation.

What does not apply to a run is left out: a row that is 0 or null for every VM (a
co-scheduling counter under a policy that does not co-schedule, latencies where nothing
serves requests), except the few rows every run has (`ALWAYS_SHOWN`). What went wrong is
not left out: a VM whose workload did not finish reads "unfinished" in red, and a warning
under the table says in which runs and when the run stopped.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

# Per-VM fields that describe the configuration rather than measure the run: they go into
# the column headers, not the rows.
VM_CONFIG_FIELDS = frozenset(
    {"name", "workload", "type", "vcpus", "weight", "cap", "host", "virtual_cluster", "ranks"}
)
# Beyond this many VMs (a cluster), the per-VM tables give way to a one-line note.
MAX_VM_COLUMNS = 24
# Rows in these orders first (the report's own order is alphabetical), the others after them.
VM_ORDER = (
    "completion_s",
    "runs_finished",
    "runs_unfinished",
    "cpu_s",
    "spin_s",
    "spin_share",
    "steal_s",
    "lock_holder_preemptions",
    "lock_waiter_preemptions",
    "ple_exits",
    "cpu_share",
    "entitled_share",
    "weight_share",
    "wake_latency_us",
    "wake_latency_us_mean",
    "requests",
    "throughput_rps",
    "latency_ms",
    "latency_ms_mean",
    "latency_ms_p99",
)
HOST_ORDER = (
    "pcpus",
    "utilization",
    "frag_idle_s",
    "fairness",
    "context_switches",
    "ipis",
    "migrations",
    "cache_refill_s",
    "sched_invocations",
    "ple_exits",
)
# A table's rows: (metric, cells), a cell being text or styled text.
Rows = list[tuple[str, list[Any]]]
# Rows shown even when 0 for every VM: they describe any run.
ALWAYS_SHOWN = frozenset(
    {"completion_s", "cpu_s", "steal_s", "cpu_share", "entitled_share", "pcpus", "utilization", "fairness"}
)
MISSING = "—"
UNFINISHED = "unfinished"
UNFINISHED_STYLE = "bold red"
FOOTNOTE = (
    f"{MISSING} = not applicable (e.g. the completion of a job that never ends); rows that are 0 or"
    f" {MISSING} for every VM are left out (see --json)"
)
HOST_FOOTNOTE = (
    "fairness: Jain's index of each VM's CPU over its entitled_share (its part of a weighted"
    " max-min fair split of what it asked for), 1 = each got its due; see docs/scenario.md"
)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_share(key: str) -> bool:
    return key.endswith("share") or key == "utilization"


def _decimals(value: float) -> int:
    """About four significant digits; none for exact integers such as counts and zero."""
    magnitude = abs(value)
    if float(value).is_integer() or magnitude >= 1000:
        return 0
    return 1 if magnitude >= 100 else 2 if magnitude >= 10 else 3


def format_value(key: str, value: Any) -> str:
    """A metric value as shown in a table: shares as percentages, numbers with thousands
    separators and about four significant digits."""
    if value is None:
        return MISSING
    if not _is_number(value):
        return str(value)
    if _is_share(key):
        return f"{value * 100:.1f}%"
    return f"{value:,.{_decimals(value)}f}"


def format_mean_std(key: str, mean: Any, std: Any) -> str:
    """`mean±std`, the deviation printed to the mean's precision."""
    if mean is None:
        return MISSING
    if std is None:
        return format_value(key, mean)
    if _is_share(key):
        return f"{mean * 100:.1f}%±{std * 100:.1f}%"
    decimals = _decimals(mean)
    # No spaces around ±: four VMs' columns then fit in 80 characters.
    return f"{mean:,.{decimals}f}±{std:,.{decimals}f}"


def _ordered(keys: Iterable[str], order: Sequence[str]) -> list[str]:
    rank = {key: position for position, key in enumerate(order)}
    return sorted(keys, key=lambda key: (rank.get(key, len(rank)), key))


def _applies(key: str, values: Sequence[Any]) -> bool:
    """Whether a row belongs in the table: some value is a nonzero number (or, for the rows
    every run has, any number)."""
    if key in ALWAYS_SHOWN:
        return any(_is_number(value) for value in values)
    return any(_is_number(value) and value != 0 for value in values)


def _rows_of_values(entries: list[dict[str, Any]], order: Sequence[str]) -> Iterator[tuple[str, list[str]]]:
    """(metric, cells) per numeric metric that applies to this run."""
    keys = {key for entry in entries for key in entry if key not in VM_CONFIG_FIELDS}
    for key in _ordered(keys, order):
        values = [entry.get(key) for entry in entries]
        if _applies(key, values):
            yield key, [format_value(key, value) for value in values]


def _rows_of_summary(entries: list[dict[str, Any]], order: Sequence[str]) -> Iterator[tuple[str, list[str]]]:
    """(metric, cells) from summary entries: `<m>_mean` and `<m>_std` pairs as one row."""
    keys = set()
    for entry in entries:
        for key in entry:
            if key.endswith("_mean"):
                keys.add(key[: -len("_mean")])
            elif not key.endswith("_std") and key not in VM_CONFIG_FIELDS:
                keys.add(key)
    for key in _ordered(keys, order):
        if any(_is_number(entry.get(f"{key}_mean")) for entry in entries):
            if _applies(key, [entry.get(f"{key}_mean") for entry in entries]):
                yield key, [format_mean_std(key, e.get(f"{key}_mean"), e.get(f"{key}_std")) for e in entries]
        elif _applies(key, [entry.get(key) for entry in entries]):
            yield key, [format_value(key, entry.get(key)) for entry in entries]


def _flatten(metrics: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables (e.g. `policy_counters`) become dotted keys."""
    flat: dict[str, Any] = {}
    for key, value in metrics.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _unfinished_runs(report: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """The runs in which VM `index` had a workload to finish and did not finish it."""
    return [run for run in report["runs"] if run["vms"][index].get("finished") is False]


def _flag_unfinished(report: dict[str, Any], rows: Rows) -> Rows:
    """`rows` with each unfinished workload's completion in red, and runs_finished
    not applicable (rather than 0) for workloads that never end."""
    runs: list[dict[str, Any]] = report["runs"]
    vms: list[dict[str, Any]] = runs[0]["vms"]
    unfinished = [len(_unfinished_runs(report, index)) for index in range(len(vms))]
    never_ending = [vm.get("finished", False) is None for vm in vms]
    flagged = dict(rows)
    if any(unfinished) and "completion_s" not in flagged:
        flagged["completion_s"] = [MISSING] * len(vms)
    red = Text(UNFINISHED, style=UNFINISHED_STYLE)
    for index, count in enumerate(unfinished):
        if count == len(runs):
            flagged["completion_s"][index] = red
        elif count and "runs_unfinished" in flagged:
            cells = flagged["runs_unfinished"]
            cells[index] = Text(cells[index], style=UNFINISHED_STYLE)
        for key in ("runs_finished", "runs_unfinished"):
            if never_ending[index] and key in flagged:
                flagged[key][index] = MISSING
    return [(key, flagged[key]) for key in _ordered(flagged, VM_ORDER)]


def unfinished_warnings(report: dict[str, Any]) -> list[str]:
    """One line per VM whose workload did not finish in some run: in which runs, and why."""
    runs: list[dict[str, Any]] = report["runs"]
    lines = []
    for index, vm in enumerate(runs[0]["vms"]):
        cut_short = _unfinished_runs(report, index)
        if not cut_short:
            continue
        if len(cut_short) > 1 and all(_stopped_at_horizon(report, r, r["vms"][index]) for r in cut_short):
            seeds = ", ".join(str(run["seed"]) for run in cut_short)
            reasons = f"seeds {seeds} stopped at the {report['horizon_s']:g} s horizon"
        else:
            reasons = "; ".join(_why_unfinished(report, run, run["vms"][index]) for run in cut_short)
        if len(runs) == 1:
            lines.append(
                f"warning: {vm['name']} did not finish its {vm['workload']} workload: {reasons};"
                " its figures describe work left undone"
            )
            continue
        finished = len(runs) - len(cut_short)
        completion = (
            f"its completion_s is over the {finished} runs that finished"
            if finished
            else "it has no completion time"
        )
        lines.append(
            f"warning: {vm['name']} did not finish its {vm['workload']} workload in {len(cut_short)} of"
            f" {len(runs)} runs ({reasons}): {completion}"
        )
    return lines


def _stopped_at_horizon(report: dict[str, Any], run: dict[str, Any], vm: dict[str, Any]) -> bool:
    existed = vm.get("created_s") is not None and vm.get("destroyed_s") is None
    return existed and bool(run["sim_s"] >= report.get("horizon_s", float("inf")))


def _why_unfinished(report: dict[str, Any], run: dict[str, Any], vm: dict[str, Any]) -> str:
    """Why VM `vm` of `run` did not finish, e.g. "seed 1 stopped at the 300 s horizon"."""
    which = f"seed {run['seed']}" if len(report["runs"]) > 1 else "the run"
    if vm.get("created_s") is None:
        return f"it was due after {which} ended at {run['sim_s']:.3f} s"
    if vm.get("destroyed_s") is not None:
        in_which = f" in {which}" if len(report["runs"]) > 1 else ""
        return f"the VM was destroyed at {vm['destroyed_s']:.3f} s{in_which}"
    if _stopped_at_horizon(report, run, vm):
        return f"{which} stopped at the {run['sim_s']:g} s horizon"
    return f"{which} stopped at {run['sim_s']:.3f} s"


def _vm_header(vm: dict[str, Any]) -> str:
    if "workload" in vm and "vcpus" in vm:
        return f"{vm['name']}\n{vm['workload']} ×{vm['vcpus']}"
    return str(vm["name"])


def _runs_description(report: dict[str, Any]) -> str:
    runs: list[dict[str, Any]] = report["runs"]
    seeds = [run["seed"] for run in runs]
    if len(runs) == 1:
        return f"seed {seeds[0]}"
    return f"mean ± std over {len(runs)} runs, seeds {seeds[0]}..{seeds[-1]}"


def _vm_table(title: str | None) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("metric", style="bold", no_wrap=True)
    return table


def _natural_width(table: Table) -> int:
    """The width `table` takes when nothing has to wrap."""
    console = Console(file=io.StringIO(), width=10_000)
    return Measurement.get(console, console.options, table).maximum


def vm_tables(report: dict[str, Any], width: int) -> list[Table]:
    """Per-VM results: one column per VM (headed by its workload × vCPUs), one row per metric.

    Columns never shrink below their content (a clipped number would mislead): when the VMs
    do not fit in `width` characters, they are split over several tables of the same rows.
    """
    runs: list[dict[str, Any]] = report["runs"]
    vms: list[dict[str, Any]] = runs[0]["vms"]
    # The summary lists the VMs in the runs' order, so the columns line up.
    if len(runs) == 1:
        rows: Rows = list(_rows_of_values(vms, VM_ORDER))
    else:
        rows = list(_rows_of_summary(report["summary"]["vms"], VM_ORDER))
    rows = _flag_unfinished(report, rows)

    chunks: list[list[int]] = [[]]
    for index in range(len(vms)):
        candidate = _vm_table(None)
        for column in [*chunks[-1], index]:
            candidate.add_column(_vm_header(vms[column]), no_wrap=True)
        for key, cells in rows:
            candidate.add_row(key, *(cells[column] for column in [*chunks[-1], index]))
        if chunks[-1] and _natural_width(candidate) > width:
            chunks.append([])
        chunks[-1].append(index)

    heading = f"{report['scenario']}: " if report.get("scenario") else ""
    policy = f", policy {report['policy']}" if report.get("policy") else ""
    tables = []
    for number, chunk in enumerate(chunks):
        title = f"{heading}VMs ({_runs_description(report)}{policy})"
        table = _vm_table(title if number == 0 else None)
        for index in chunk:
            table.add_column(_vm_header(vms[index]), justify="right", no_wrap=True)
        for key, cells in rows:
            table.add_row(key, *(cells[index] for index in chunk))
        tables.append(table)
    return tables


def _metric_table(report: dict[str, Any], key: str, title: str, order: Sequence[str]) -> Table:
    """One metric per row from the runs' `key` table (one run) or the summary's (several)."""
    runs: list[dict[str, Any]] = report["runs"]
    several = len(runs) > 1
    table = Table(
        title=f"{title} (mean ± std)" if several else title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    # A value is never clipped (a clipped number would mislead); on a narrow console a long
    # metric name (a policy's counter) folds instead.
    table.add_column("metric", style="bold", overflow="fold")
    table.add_column("value", justify="right", no_wrap=True)
    if several:
        # Nested summaries (the policy's counters) become dotted rows, as in one run's table.
        rows = _rows_of_summary([_flatten(report["summary"][key])], order)
    else:
        rows = _rows_of_values([_flatten(runs[0][key])], order)
    for name, cells in rows:
        table.add_row(name, *cells)
    return table


def host_table(report: dict[str, Any], name: str = "host") -> Table:
    return _metric_table(report, "host", name, HOST_ORDER)


def cluster_table(report: dict[str, Any]) -> Table | None:
    """Completion time per virtual cluster, if the scenario has any."""
    runs: list[dict[str, Any]] = report["runs"]
    clusters: list[dict[str, Any]] = runs[0].get("virtual_clusters", [])
    if not clusters:
        return None
    several = len(runs) > 1
    title = "virtual clusters (mean ± std)" if several else "virtual clusters"
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("virtual cluster", "workload", "ranks", "completion_s"):
        table.add_column(column, justify="left" if column in ("virtual cluster", "workload") else "right")
    summary = report["summary"].get("virtual_clusters", [])
    for index, cluster in enumerate(clusters):
        if several:
            entry = summary[index]
            completion = format_mean_std(
                "completion_s", entry.get("completion_s_mean"), entry.get("completion_s_std")
            )
        else:
            completion = format_value("completion_s", cluster.get("completion_s"))
        table.add_row(cluster["name"], cluster["workload"], str(cluster["ranks"]), completion)
    return table


def network_table(report: dict[str, Any]) -> Table | None:
    """Network totals, if any message was sent."""
    if not any(run.get("network") for run in report["runs"]):
        return None
    return _metric_table(report, "network", "network", ())


def io_table(report: dict[str, Any]) -> Table | None:
    """Disk and driver-domain totals, if a disk request was issued."""
    if not any(run.get("io") for run in report["runs"]):
        return None
    return _metric_table(report, "io", "disk and driver domain", ())


def speed_line(report: dict[str, Any]) -> str:
    runs: list[dict[str, Any]] = report["runs"]
    events = sum(run["events"] for run in runs)
    wall_s = sum(run["wall_s"] for run in runs)
    if "backend" in report:
        # A run on real vCPUs (`vsched real`): its events are the scheduler's, its time real.
        return f"ran on real vCPUs ({report['backend']}): {events:,} scheduler events in {wall_s:.2f} s"
    rate = f" ({events / wall_s / 1e6:.1f} M events/s)" if wall_s > 0 else ""
    return f"simulated {events:,} events in {wall_s:.2f} s of wall-clock time{rate}"


def report_tables(report: dict[str, Any], width: int) -> Group:
    """Everything `vsched run` prints for a report, for a console `width` characters wide."""
    parts: list[Any] = []
    vms = report["runs"][0]["vms"]
    if len(vms) <= MAX_VM_COLUMNS:
        parts.extend([*vm_tables(report, width), FOOTNOTE])
    else:
        parts.append(f"{len(vms)} VMs: per-VM results are in the JSON report (--json, --out)")
    parts.extend(Text(line, style=UNFINISHED_STYLE) for line in unfinished_warnings(report))
    for table in (cluster_table(report), network_table(report), io_table(report)):
        if table is not None:
            parts.extend(["", table])
    title = "host" if report.get("hosts", 1) == 1 else f"all {report['hosts']} hosts"
    parts.extend(["", host_table(report, title)])
    if any(run["host"].get("fairness") is not None for run in report["runs"]):
        parts.append(HOST_FOOTNOTE)
    parts.extend(["", speed_line(report)])
    return Group(*parts)
