"""Results as tables in long (tidy) format, for pandas.

A run's report (`vsched.Report`, what `vsched.run` returns) and a sweep's results
(`vsched.SweepResults`, from `vsched.run_sweep` or `read_sweep` of a `vsched sweep --out`
directory) give the same three tables:

- `runs()`: one row per run (per seed, and per point of a sweep), its figures flattened as in
  results.parquet: `host.<metric>`, `vm.<name>.<metric>`, `vc.<cluster>.<metric>`, ...;
- `vms()`: one row per run and VM, with a column per VM metric (`completion_s`, `cpu_s`,
  `spin_s`, ... as documented in crates/vsched-model/src/metrics.rs);
- `hosts()`: one row per run and host (`host` is its index; a single host is host 0), with a
  column per host metric, a policy's counters as `policy_counters.<counter>`.

Every row starts with the columns that say which run it is: `scenario`, in a sweep one
`set.<key>` column per swept key (`set.scheduler.tslice_ms`), `policy` (the policy the run
had, named even when the scenario's own) and `seed`; then `vm` or `host`. One row per
seed and VM with a column per metric is the layout `groupby` and plotting libraries expect:
`report.vms().groupby("vm")["completion_s"].mean()`.

The tables are always pandas DataFrames (pandas is a dependency of vsched), whatever else is
installed; `pyarrow.Table.from_pandas(frame)` converts one for Arrow tools.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vsched.store import Row

if TYPE_CHECKING:
    import pandas

# A flat row's columns that identify its run, as written by `vsched.runs.execute`.
_IDENTITY = ("scenario", "policy", "seed")
# Columns of the job machinery that the tables leave out: the run's digest and the overrides
# as JSON text (a sweep's `set.<key>` columns say the same, one value per column).
_MACHINERY = ("key", "overrides")

SET_PREFIX = "set."
"""Prefix of the column of a swept key in results.parquet and the tables (`set.host.pcpus`):
it keeps a key such as `vm.spin.vcpus` apart from the metric `vm.spin.vcpus`."""


def table(rows: Sequence[Row], columns: Sequence[str] | None = None) -> pandas.DataFrame:
    """`rows` as a pandas DataFrame, columns in the order `columns` gives, or of their first
    appearance. pandas is imported here, at the first table, not with the package."""
    import pandas

    names = list(columns) if columns is not None else list(dict.fromkeys(c for row in rows for c in row))
    return pandas.DataFrame.from_records(list(rows), columns=names)


def _identity(row: Row) -> Row:
    return {name: value for name, value in row.items() if name in _IDENTITY or name.startswith(SET_PREFIX)}


def _ordered(identity: Row) -> Row:
    """Identity columns in the tables' order: scenario, swept keys, policy, seed."""
    swept = {name: value for name, value in identity.items() if name.startswith(SET_PREFIX)}
    return {
        "scenario": identity.get("scenario"),
        **swept,
        "policy": identity.get("policy"),
        "seed": identity.get("seed"),
    }


def vm_rows(runs: Iterable[Row]) -> list[Row]:
    """One row per run and VM, from flat run rows (see the module notes)."""
    rows: list[Row] = []
    for run in runs:
        identity = _ordered(_identity(run))
        by_vm: dict[str, Row] = {}
        for name, value in run.items():
            if name.startswith("vm."):
                # A VM's metrics are not nested, so the metric is the last part and a dotted
                # VM name (`vm.web.1.cpu_s`) is all that is between.
                vm, _, metric = name[len("vm.") :].rpartition(".")
                entry = by_vm.setdefault(vm, {**identity, "vm": vm})
                if metric != "name":  # the `vm` column already
                    entry[metric] = value
        rows.extend(by_vm.values())
    return rows


def host_rows(runs: Iterable[Row]) -> list[Row]:
    """One row per run and host, from flat run rows: a cluster's `hosts.<i>.<metric>`, or the
    single host's `host.<metric>` as host 0 (see the module notes)."""
    rows: list[Row] = []
    for run in runs:
        identity = _ordered(_identity(run))
        cluster = any(name.startswith("hosts.") for name in run)
        by_host: dict[int, Row] = {}
        for name, value in run.items():
            if cluster and name.startswith("hosts."):
                index, _, metric = name[len("hosts.") :].partition(".")
                by_host.setdefault(int(index), {**identity, "host": int(index)})[metric] = value
            elif not cluster and name.startswith("host."):
                by_host.setdefault(0, {**identity, "host": 0})[name[len("host.") :]] = value
        rows.extend(by_host[index] for index in sorted(by_host))
    return rows


def _run_table(rows: Sequence[Row]) -> pandas.DataFrame:
    """The runs table: identity columns first, then the figures in name order."""
    identity = list(_ordered(_identity(rows[0]))) if rows else list(_IDENTITY)
    figures = sorted({name for row in rows for name in row} - set(identity) - set(_MACHINERY))
    return table(rows, [*identity, *figures])


class Report(dict[str, Any]):
    """The report of `vsched.run`: the dict of `vsched run --json` (`runs[]`, `summary`, ...;
    see crates/vsched-model/src/metrics.rs), with its runs as tables (see the module notes)."""

    def run_rows(self) -> list[Row]:
        """One flat row per repetition: scenario, policy, seed, then its figures flattened."""
        from vsched.runs import flatten

        identity = {"scenario": self["scenario"], "policy": self["policy"]}
        return [{**identity, "seed": run["seed"], **flatten(run)} for run in self["runs"]]

    def runs(self) -> pandas.DataFrame:
        """One row per repetition, its figures flattened (a pandas DataFrame)."""
        return _run_table(self.run_rows())

    def vms(self) -> pandas.DataFrame:
        """One row per repetition and VM, a column per VM metric (a pandas DataFrame)."""
        return table(vm_rows(self.run_rows()))

    def hosts(self) -> pandas.DataFrame:
        """One row per repetition and host, a column per host metric (a pandas DataFrame)."""
        return table(host_rows(self.run_rows()))


@dataclass(frozen=True)
class SkippedPoint:
    """A point of a sweep left out as infeasible (`skip_infeasible`): its swept values, its
    policy (None: the scenario's) and why the core refused it."""

    values: tuple[tuple[str, Any], ...]
    policy: str | None
    reason: str

    def describe(self) -> str:
        """The point in one line, e.g. `host.pcpus=2, policy cosched: vm[0].vcpus: ...`."""
        parts = [f"{key}={json.dumps(value)}" for key, value in self.values]
        if self.policy:
            parts.append(f"policy {self.policy}")
        return f"{', '.join(parts) or 'the scenario as written'}: {self.reason}"


@dataclass(frozen=True)
class SweepResults:
    """A sweep's runs: `rows` are results.parquet's rows (one per point and seed; a column per
    swept key, `set.<key>`), `skipped` the points left out as infeasible."""

    rows: list[Row]
    skipped: list[SkippedPoint] = field(default_factory=list)

    def runs(self) -> pandas.DataFrame:
        """One row per point and seed, its figures flattened (a pandas DataFrame)."""
        return _run_table(self.rows)

    def vms(self) -> pandas.DataFrame:
        """One row per point, seed and VM, a column per VM metric (a pandas DataFrame)."""
        return table(vm_rows(self.rows))

    def hosts(self) -> pandas.DataFrame:
        """One row per point, seed and host, a column per host metric (a pandas DataFrame)."""
        return table(host_rows(self.rows))


def read_sweep(path: str | Path) -> SweepResults:
    """The results of `vsched sweep --out DIR`, from `DIR` or `DIR/results.parquet`. The
    skipped points are not stored (`skipped` is empty), nor the scenario's order of VMs: in
    `vms()` a run's VMs come in name order, as results.parquet's columns do."""
    import pyarrow.parquet as pq

    location = Path(path)
    parquet = location / "results.parquet" if location.is_dir() else location
    rows: list[Row] = pq.read_table(parquet).to_pylist()
    return SweepResults(rows)
