"""Readable tables of a run report (the JSON document of `vsched run --json`).

The tables show whatever metrics the report holds, so a metric added to the core appears
here without a change; the best-known ones come first, in a fixed order. One repetition
shows its values; several show the summary's mean ± standard deviation.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.measure import Measurement
from rich.table import Table

# Per-VM fields that describe the configuration rather than measure the run: they go into
# the column headers, not the rows.
VM_CONFIG_FIELDS = frozenset({"name", "workload", "type", "vcpus", "weight", "cap", "host", "virtual_cluster", "ranks"})
# Beyond this many VMs (a cluster), the per-VM tables give way to a one-line note.
MAX_VM_COLUMNS = 24
# Rows in these orders first (the report's own order is alphabetical), the others after them.
VM_ORDER = (
    "completion_s",
    "runs_finished",
    "cpu_s",
    "spin_s",
    "spin_share",
    "steal_s",
    "lock_holder_preemptions",
    "lock_waiter_preemptions",
    "ple_exits",
    "cpu_share",
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
MISSING = "—"
FOOTNOTE = f"{MISSING} = not applicable (e.g. the completion of an unfinished job)"


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


def _rows_of_values(entries: list[dict[str, Any]], order: Sequence[str]) -> Iterator[tuple[str, list[str]]]:
    """(metric, cells) per numeric metric; a metric null everywhere does not apply here."""
    keys = {key for entry in entries for key in entry if key not in VM_CONFIG_FIELDS}
    for key in _ordered(keys, order):
        values = [entry.get(key) for entry in entries]
        if any(_is_number(value) for value in values):
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
            yield key, [format_mean_std(key, e.get(f"{key}_mean"), e.get(f"{key}_std")) for e in entries]
        elif any(_is_number(entry.get(key)) for entry in entries):
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


def _vm_table(title: str | None, caption: str | None) -> Table:
    table = Table(
        title=title,
        title_justify="left",
        caption=caption,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
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
        rows = list(_rows_of_values(vms, VM_ORDER))
    else:
        rows = list(_rows_of_summary(report["summary"]["vms"], VM_ORDER))

    chunks: list[list[int]] = [[]]
    for index in range(len(vms)):
        candidate = _vm_table(None, None)
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
        table = _vm_table(
            title=f"{heading}VMs ({_runs_description(report)}{policy})" if number == 0 else None,
            caption=FOOTNOTE if number == len(chunks) - 1 else None,
        )
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
        title=f"{title} (mean ± std)" if several else title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False
    )
    table.add_column("metric", style="bold", no_wrap=True)
    table.add_column("value", justify="right")
    if several:
        rows = _rows_of_summary([report["summary"][key]], order)
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
            completion = format_mean_std("completion_s", entry.get("completion_s_mean"), entry.get("completion_s_std"))
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
    rate = f" ({events / wall_s / 1e6:.1f} M events/s)" if wall_s > 0 else ""
    return f"simulated {events:,} events in {wall_s:.2f} s of wall-clock time{rate}"


def report_tables(report: dict[str, Any], width: int) -> Group:
    """Everything `vsched run` prints for a report, for a console `width` characters wide."""
    parts: list[Any] = []
    vms = report["runs"][0]["vms"]
    if len(vms) <= MAX_VM_COLUMNS:
        parts.extend(vm_tables(report, width))
    else:
        parts.append(f"{len(vms)} VMs: per-VM results are in the JSON report (--json, --out)")
    for table in (cluster_table(report), network_table(report), io_table(report)):
        if table is not None:
            parts.extend(["", table])
    title = "host" if report.get("hosts", 1) == 1 else f"all {report['hosts']} hosts"
    parts.extend(["", host_table(report, title), "", speed_line(report)])
    return Group(*parts)
