"""Clusters from the user's side: a virtual cluster over hosts with driver domains, its JSON
report and its tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import vsched

from helpers import CliResult

CLUSTER = """\
name = "two-hosts"
[cluster]
hosts = 2
[host]
pcpus = 2
dom0_vcpus = 1
[scheduler]
name = "credit"
[[virtual_cluster]]
name = "ep"
vcpus = 2
[virtual_cluster.workload]
kind = "npb-ep"
serial_s = 0.4
[[vm]]
name = "batch"
vcpus = 1
host = 1
[vm.workload]
kind = "cpu_hog"
[run]
horizon_s = 5
until = "all_done"
"""


def test_a_virtual_cluster_report_has_hosts_clusters_and_network() -> None:
    report = vsched.run(CLUSTER, reps=2)
    assert report["hosts"] == 2
    run = report["runs"][0]
    # Host by host, each host's driver domain first.
    assert [(vm["name"], vm["host"]) for vm in run["vms"]] == [
        ("dom0.0", 0),
        ("ep.0", 0),
        ("dom0.1", 1),
        ("batch", 1),
        ("ep.1", 1),
    ]
    assert [vm["virtual_cluster"] for vm in run["vms"]] == [None, "ep", None, None, "ep"]
    (cluster,) = run["virtual_clusters"]
    assert (cluster["name"], cluster["workload"], cluster["vms"], cluster["ranks"]) == ("ep", "npb-ep", 2, 4)
    # The cluster finishes when its last VM does.
    assert cluster["completion_s"] == max(
        vm["completion_s"] for vm in run["vms"] if vm["virtual_cluster"] == "ep"
    )
    assert run["network"]["messages"] > 0 and run["network"]["driver_passes"] > 0
    assert len(run["hosts"]) == 2 and run["host"]["pcpus"] == 4
    assert sum(h["context_switches"] for h in run["hosts"]) == run["host"]["context_switches"]
    # Only messages between VMs are packets, and every one went through both driver domains.
    assert run["network"]["packets"] == sum(vm["rx_packets"] for vm in run["vms"])
    summary = report["summary"]["virtual_clusters"][0]
    assert summary["runs_finished"] == 2 and summary["completion_s_mean"] > 0


def test_cluster_tables_show_the_virtual_clusters(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    path = tmp_path / "cluster.toml"
    path.write_text(CLUSTER, encoding="utf-8")
    result = cli("run", path)
    assert result.exit_code == 0, result.stderr
    assert "virtual clusters" in result.stdout and "npb-ep" in result.stdout
    assert "all 2 hosts" in result.stdout and "driver_passes" in result.stdout
    # Same scenario and seed, same JSON (apart from wall-clock time).
    first, second = (json.loads(vsched.run_json(CLUSTER)) for _ in range(2))
    for report in (first, second):
        for run in report["runs"]:
            run.pop("wall_s")
    assert first == second
