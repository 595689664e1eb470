"""`vsched sweep`'s results.parquet: a column per swept key and the policy on every row; and
`--skip-infeasible`, which lists and leaves out the points the core refuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pyarrow.parquet as pq
import pytest

import vsched
from vsched.sweep import InfeasiblePoint

from helpers import TINY_SCENARIO, CliResult

Cli = Callable[..., CliResult]

# TINY_SCENARIO's locker VM as a concurrent (CON) VM: co-scheduling policies refuse it once
# it has more vCPUs than the host's two pCPUs; Credit runs it.
CON_SCENARIO = TINY_SCENARIO.replace('name = "locker"\n', 'name = "locker"\ntype = "CON"\n')


def test_results_have_a_column_per_swept_key_and_the_policy_of_every_run(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY_SCENARIO)
    out = tmp_path / "out"
    result = cli(
        "sweep", path, "--set", "scheduler.tslice_ms=10,30", "--set", "vm.hog.vcpus=1,2", "--out", out
    )
    assert result.exit_code == 0, result.stderr
    table = pq.read_table(out / "results.parquet")
    assert table.column_names[:7] == [
        "key", "scenario", "policy", "overrides", "seed", "set.scheduler.tslice_ms", "set.vm.hog.vcpus",
    ]  # fmt: skip
    rows = table.to_pylist()
    assert [(r["set.scheduler.tslice_ms"], r["set.vm.hog.vcpus"]) for r in rows] == [
        (10, 1),
        (10, 2),
        (30, 1),
        (30, 2),
    ]
    # Not swept, the policy is the scenario's; the swept value is the one the run had.
    assert {r["policy"] for r in rows} == {"credit"}
    assert [r["vm.hog.vcpus"] for r in rows] == [1, 2, 1, 2]
    swept = cli("sweep", path, "--policy", "rr,credit", "--out", tmp_path / "policies")
    assert swept.exit_code == 0, swept.stderr
    rows = pq.read_table(tmp_path / "policies" / "results.parquet").to_pylist()
    assert [r["policy"] for r in rows] == ["rr", "credit"]
    assert not any(name.startswith("set.") for name in rows[0])


def test_an_infeasible_point_refuses_the_sweep_and_names_the_flag(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "con.toml"
    path.write_text(CON_SCENARIO)
    result = cli(
        "sweep", path, "--set", "vm.locker.vcpus=2,3", "--policy", "credit,cosched", "--out", tmp_path / "o"
    )
    assert result.exit_code == 2
    (line,) = result.stderr_lines
    assert line.startswith(
        'error: scheduler.name: policy cosched cannot run this scenario: CON VM "locker" has 3'
    )
    assert "(with vm.locker.vcpus=3, policy cosched); --skip-infeasible lists and skips such points" in line
    assert not (tmp_path / "o" / "runs.jsonl").exists()  # refused before anything ran


def test_skip_infeasible_lists_and_leaves_out_the_points_the_core_refuses(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "con.toml"
    path.write_text(CON_SCENARIO)
    out = tmp_path / "o"
    args = ["sweep", path, "--set", "vm.locker.vcpus=2,3", "--policy", "credit,cosched", "--out", out]
    result = cli(*args, "--skip-infeasible", "--json")
    assert result.exit_code == 0, result.stderr
    skipped = [line for line in result.stderr_lines if line.startswith("skipped")]
    assert skipped == [
        "skipped (infeasible) vm.locker.vcpus=3, policy cosched: scheduler.name: policy cosched cannot "
        'run this scenario: CON VM "locker" has 3 vCPUs but the host has 2 pCPUs; co-scheduling needs '
        "one pCPU per vCPU"
    ]
    summary = json.loads(result.stdout)
    assert [(p["vm.locker.vcpus"], p["policy"]) for p in summary["points"]] == [
        (2, "credit"),
        (2, "cosched"),
        (3, "credit"),
    ]
    assert [(s["vm.locker.vcpus"], s["policy"]) for s in summary["skipped"]] == [(3, "cosched")]
    assert "co-scheduling needs one pCPU per vCPU" in summary["skipped"][0]["reason"]
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert [(r["set.vm.locker.vcpus"], r["policy"]) for r in rows] == [
        (2, "credit"),
        (2, "cosched"),
        (3, "credit"),
    ]


def test_skipping_never_hides_a_mistake_in_the_sweep_itself(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "con.toml"
    path.write_text(CON_SCENARIO)
    # A key naming nothing is the sweep's mistake, not an infeasible point.
    typo = cli("sweep", path, "--set", "vm.lockr.vcpus=2,3", "--skip-infeasible", "--out", tmp_path / "a")
    assert typo.exit_code == 2
    assert typo.stderr_lines == [
        "error: vm.lockr.vcpus: no element 'lockr' in this array (expected *, a name among locker, hog "
        "or an index below 2)"
    ]
    # Nothing left to run is refused too.
    options = ["--set", "vm.locker.vcpus=3,4", "--policy", "cosched", "--skip-infeasible"]
    none = cli("sweep", path, *options, "--out", tmp_path / "b")
    assert none.exit_code == 2
    assert none.stderr_lines[-1].startswith(
        "error: every point of the sweep is infeasible, e.g. vm.locker.vcpus=3, policy cosched: "
    )


def test_run_sweep_skips_or_refuses_as_the_command_does(tmp_path: Path) -> None:
    grid = {"vm.locker.vcpus": [2, 3]}
    with pytest.raises(InfeasiblePoint, match="skip_infeasible=True lists and skips such points$"):
        vsched.run_sweep(CON_SCENARIO, grid, policies=["cosched"], jobs=1)
    results = vsched.run_sweep(CON_SCENARIO, grid, policies=["cosched"], jobs=1, skip_infeasible=True)
    assert [(s.values, s.policy) for s in results.skipped] == [((("vm.locker.vcpus", 3),), "cosched")]
    assert list(results.runs()["set.vm.locker.vcpus"]) == [2]
    assert isinstance(InfeasiblePoint("x"), vsched.ScenarioError)
