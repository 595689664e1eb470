"""Reports and sweeps as tables in long format: one row per run and VM (or host), a column
per metric, the same layout from `vsched.run` and from a sweep."""

from __future__ import annotations

import sys
from typing import Any

import pandas
import pytest
from test_cluster import CLUSTER

import vsched
from vsched.frames import read_sweep, vm_rows

from helpers import TINY_SCENARIO


def test_vms_has_a_row_per_repetition_and_vm_and_a_column_per_metric() -> None:
    report = vsched.run(TINY_SCENARIO, reps=3)
    vms = report.vms()
    assert isinstance(vms, pandas.DataFrame)
    assert list(vms.columns[:4]) == ["scenario", "policy", "seed", "vm"]
    assert len(vms) == 3 * 2
    assert list(zip(vms["seed"], vms["vm"])) == [(s, vm) for s in (3, 4, 5) for vm in ("locker", "hog")]
    assert set(vms["policy"]) == {"credit"} and set(vms["scenario"]) == {"tiny"}
    # Every metric of the report, value for value.
    metrics = set(report["runs"][0]["vms"][0]) - {"name"}
    assert metrics <= set(vms.columns)
    for index, vm in enumerate(vm for run in report["runs"] for vm in run["vms"]):
        row = vms.iloc[index]
        for metric in ("cpu_s", "spin_s", "steal_s", "lock_holder_preemptions", "workload", "vcpus"):
            assert row[metric] == vm[metric], (index, metric)
    assert vms.groupby("vm")["cpu_s"].mean()["hog"] == pytest.approx(
        sum(run["vms"][1]["cpu_s"] for run in report["runs"]) / 3
    )


def test_hosts_has_a_row_per_repetition_and_host() -> None:
    single = vsched.run(TINY_SCENARIO, reps=2).hosts()
    assert list(single.columns[:4]) == ["scenario", "policy", "seed", "host"]
    assert list(zip(single["seed"], single["host"])) == [(3, 0), (4, 0)]
    assert "utilization" in single.columns
    assert any(column.startswith("policy_counters.") for column in single.columns)
    report = vsched.run(CLUSTER, reps=2)
    hosts = report.hosts()
    assert list(zip(hosts["seed"], hosts["host"])) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    for index, host in enumerate(h for run in report["runs"] for h in run["hosts"]):
        assert hosts.iloc[index]["context_switches"] == host["context_switches"]
        assert hosts.iloc[index]["utilization"] == host["utilization"]
    vms = report.vms()
    assert len(vms) == 2 * len(report["runs"][0]["vms"])


def test_runs_has_a_row_per_repetition_with_flattened_figures() -> None:
    report = vsched.run(TINY_SCENARIO, reps=2)
    runs = report.runs()
    assert list(runs.columns[:3]) == ["scenario", "policy", "seed"]
    assert list(runs["seed"]) == [3, 4]
    assert list(runs["vm.hog.cpu_s"]) == [run["vms"][1]["cpu_s"] for run in report["runs"]]
    assert list(runs["host.utilization"]) == [run["host"]["utilization"] for run in report["runs"]]


def test_the_tables_are_pandas_data_frames_and_nothing_else(monkeypatch: pytest.MonkeyPatch) -> None:
    report = vsched.run(TINY_SCENARIO, reps=2)
    for frame in (report.runs(), report.vms(), report.hosts()):
        assert type(frame) is pandas.DataFrame
    assert list(report.vms().columns) == list(vm_rows(report.run_rows())[0])
    # Without pandas the install is broken: a table is refused, never another kind of table.
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with pytest.raises(ImportError):
        report.vms()


def test_a_sweep_gives_the_tables_of_its_runs_with_a_column_per_swept_key(tmp_path: Any) -> None:
    results = vsched.run_sweep(
        TINY_SCENARIO, {"scheduler.tslice_ms": [10, 30]}, policies=None, reps=2, seed=3, jobs=2, out=tmp_path
    )
    vms = results.vms()
    assert list(vms.columns[:5]) == ["scenario", "set.scheduler.tslice_ms", "policy", "seed", "vm"]
    assert len(vms) == 2 * 2 * 2  # points x seeds x VMs
    assert set(vms["policy"]) == {"credit"} and set(vms["scenario"]) == {"tiny"}
    hosts = results.hosts()
    assert list(zip(hosts["set.scheduler.tslice_ms"], hosts["seed"])) == [(10, 3), (10, 4), (30, 3), (30, 4)]
    # A point's rows are those of a run of its scenario, seed for seed.
    point = vsched.Scenario.from_toml(TINY_SCENARIO).with_overrides({"scheduler.tslice_ms": 30})
    alone = vsched.run(point, reps=2).vms().drop(columns=["scenario"])
    swept = vms[vms["set.scheduler.tslice_ms"] == 30].drop(columns=["scenario", "set.scheduler.tslice_ms"])
    pandas.testing.assert_frame_equal(swept.reset_index(drop=True), alone)
    # The same tables from the directory a sweep wrote; there a run's VMs come in name order,
    # as results.parquet's columns do.
    stored = read_sweep(tmp_path)
    order = ["set.scheduler.tslice_ms", "seed", "vm"]
    pandas.testing.assert_frame_equal(
        stored.vms().sort_values(order, ignore_index=True), vms.sort_values(order, ignore_index=True)
    )
    assert len(stored.runs()) == 4 and "set.scheduler.tslice_ms" in stored.runs().columns
