"""`relaxed`'s per-VM esxtop figures (`policy_metrics`) through Python and `vsched sweep`, in
both skew models (docs/policies.md, "`relaxed`")."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pyarrow.parquet as pq

import vsched

from helpers import CliResult

Cli = Callable[..., CliResult]

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "relaxed-unequal-widths.toml"
FIGURES = {"%CSTP", "%RDY", "costops", "skew_us_max", "skew_us_mean"}


def test_each_vm_reports_esxtop_figures_under_either_skew_model() -> None:
    for model in ("min-relative", "cumulative"):
        # Seed 2: one of the seeds at which the base lets the barrier VM fall out of step
        # (at seeds 1 and 5 it runs in step and never co-stops; docs/policies.md, "`relaxed`").
        report = vsched.run(SCENARIO, reps=1, seed=2, policy=f"relaxed(skew_model={model})")
        vms = report["runs"][0]["vms"]
        assert all(set(vm["policy_metrics"]) == FIGURES for vm in vms), model
        # The barrier VM co-stops beside hogs of other widths (the scenario's point).
        bsp = next(vm for vm in vms if vm["name"] == "bsp")
        assert bsp["policy_metrics"]["%CSTP"] > 0, model
        assert bsp["policy_metrics"]["%CSTP"] + bsp["policy_metrics"]["%RDY"] <= 100


def test_other_policies_report_no_policy_figures() -> None:
    report = vsched.run(SCENARIO, reps=1, policy="credit", overrides={"run.horizon_s": 0.2})
    assert all("policy_metrics" not in vm for vm in report["runs"][0]["vms"])


def test_a_sweep_over_skew_models_has_a_column_per_figure(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = cli(
        "sweep", SCENARIO, "--policy", "relaxed", "--reps", "1", "--set", "run.horizon_s=0.2",
        "--set", "scheduler.skew_model=min-relative,cumulative", "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert [r["set.scheduler.skew_model"] for r in rows] == ["min-relative", "cumulative"]
    assert all(r["vm.bsp.policy_metrics.%CSTP"] is not None for r in rows)
