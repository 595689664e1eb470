"""Honest headlines (issue 19): unfinished workloads flagged, rows that do not apply left
out, fairness beside each VM's entitlement, the demo's medians and ranges when a mean would
mislead, and sweep summaries that say which runs did not finish."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Callable

from rich.console import Console

import vsched
from vsched.demo import conclusion
from vsched.report import report_tables
from vsched.sweep import summarize, unfinished_runs

from helpers import CliResult

Cli = Callable[..., CliResult]

QUOTED_LOCK_FIGURES = ("lock_holder_preemptions", "lock_waiter_preemptions")

# A spinlock VM too long for its 0.5 s horizon, beside a CPU hog that never ends.
CUT_SHORT = """
name = "cut-short"
[host]
pcpus = 2
dom0_vcpus = 0
[scheduler]
name = "credit"
[[vm]]
name = "spin"
vcpus = 2
[vm.workload]
kind = "spinlock"
iterations = 1000000
[[vm]]
name = "hog"
vcpus = 2
[vm.workload]
kind = "cpu_hog"
[run]
horizon_s = 0.5
"""


def text_of(report: dict[str, Any], width: int = 100) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None).print(report_tables(report, width))
    return buffer.getvalue()


def test_an_unfinished_workload_is_flagged_and_a_never_ending_one_is_not() -> None:
    report = vsched.run(CUT_SHORT)
    spin, hog = report["runs"][0]["vms"]
    assert (spin["finished"], spin["completion_s"]) == (False, None)
    assert (hog["finished"], hog["completion_s"]) == (None, None)

    text = text_of(report)
    completion = next(line for line in text.splitlines() if line.strip().startswith("completion_s"))
    assert completion.split()[1:] == ["unfinished", "—"]
    warning = " ".join(text[text.index("warning:") :].split())
    assert warning.startswith(
        "warning: spin did not finish its spinlock workload: the run stopped at the 0.5 s horizon"
    )
    assert "hog did not finish" not in text


def test_several_runs_count_the_unfinished_ones(cli: Cli, tmp_path: Path) -> None:
    scenario = tmp_path / "cut-short.toml"
    scenario.write_text(CUT_SHORT, encoding="utf-8")
    report = vsched.run(CUT_SHORT.replace("horizon_s = 0.5", "horizon_s = 0.5\nreps = 2"))
    assert [vm["runs_unfinished"] for vm in report["summary"]["vms"]] == [2, 0]
    text = text_of(report)
    unfinished_row = next(line for line in text.splitlines() if line.strip().startswith("runs_unfinished"))
    # The hog has nothing to finish: its count is not applicable rather than 0.
    assert unfinished_row.split()[1:] == ["2", "—"]
    assert "did not finish its spinlock workload in 2 of 2 runs" in " ".join(text.split())

    # With --json the warning goes to stderr, stdout stays a clean document.
    result = cli("run", scenario, "--json")
    assert result.exit_code == 0
    json.loads(result.stdout)
    assert "warning: spin did not finish" in result.stderr


def test_rows_that_apply_to_no_vm_are_left_out() -> None:
    report = vsched.run(CUT_SHORT)
    vms = report["runs"][0]["vms"]
    text = text_of(report)
    rows = {line.split()[0] for line in text.splitlines() if line.strip()}
    # Nothing co-schedules, serves requests or halts in a paravirtual lock here ...
    for absent in ("co_launches", "costarts", "requests", "latency_ms_mean", "pv_halts"):
        assert all(not vm[absent] for vm in vms), absent
        assert absent not in rows
    # ... while what every run has stays, zero or not, and the JSON keeps everything.
    for present in ("cpu_s", "steal_s", "cpu_share", "entitled_share", "spin_s"):
        assert present in rows
    assert "left out" in text


def test_fairness_is_shown_beside_each_vms_entitlement() -> None:
    report = vsched.run(CUT_SHORT)
    text = text_of(report)
    assert "entitled_share" in text and "fairness" in text
    assert "Jain's index of each VM's CPU over its entitled_share" in " ".join(text.split())


def demo_report(cpu_s: list[float], sim_s: list[float], completion: list[float | None]) -> dict[str, Any]:
    """A report of one lock VM over len(cpu_s) seeds, as `vsched run --json` writes it."""
    runs: list[dict[str, Any]] = [
        {
            "seed": seed,
            "sim_s": length,
            "vms": [
                {
                    "name": "spin",
                    "vcpus": 4,
                    "cpu_s": cpu,
                    "spin_s": cpu / 2,
                    "steal_s": cpu,
                    "completion_s": done,
                    "lock_holder_preemptions": 10,
                    "lock_waiter_preemptions": 5,
                }
            ],
        }
        for seed, (cpu, length, done) in enumerate(zip(cpu_s, sim_s, completion), start=1)
    ]
    keys = ("cpu_s", "spin_s", "steal_s", "completion_s", *QUOTED_LOCK_FIGURES)
    summary: dict[str, Any] = {"runs_finished": sum(d is not None for d in completion)}
    for key in keys:
        values = [run["vms"][0][key] for run in runs if run["vms"][0][key] is not None]
        summary[f"{key}_mean"] = sum(values) / len(values) if values else None
        summary[f"{key}_std"] = 0.0
    return {"runs": runs, "summary": {"vms": [summary]}}


def said(report: dict[str, Any]) -> str:
    return " ".join(" ".join(str(p) for p in conclusion(report)).split())


def test_the_demo_quotes_medians_and_ranges_when_runs_differ_tenfold() -> None:
    # One seed ran to a 300 s horizon, two finished in about 10 s: a mean of cpu_s would be
    # 106.1, which describes no run.
    text = said(demo_report([300.0, 9.6, 8.8], [300.0, 10.2, 9.1], [None, 10.2, 9.1]))
    assert "received 9.600 s (median; 8.800 s to 300.000 s) of CPU" in text
    assert "The runs lasted 9.100 to 300.000 s" in text
    assert "finished its job in 2 of 3 runs, at 9.650 s" in text
    assert "106.1" not in text
    # Figures that agree are still means: half of cpu_s spun in every run.
    assert "burned 50% of it spinning" in text


def test_the_demo_quotes_means_when_the_seeds_agree() -> None:
    text = said(demo_report([9.0, 9.6, 8.8], [10.0, 10.2, 9.1], [10.0, 10.2, 9.1]))
    assert "Over the 3 runs (seeds 1 to 3;" in text
    assert "spin received 9.133 s of CPU" in text
    assert "(median;" not in text


def test_a_zero_beside_a_count_is_spread_apart() -> None:
    from vsched.demo import across_runs, spread_apart

    assert spread_apart([0.0, 3.0])
    assert not spread_apart([0.0, 0.0])
    assert not spread_apart([5.0])
    assert spread_apart([1.0, 10.5]) and not spread_apart([1.0, 10.0])
    assert across_runs([0.0, 3.0, 8.0], str) == "3.0 (median; 0.0 to 8.0)"
    assert across_runs([2.0, 4.0], str) == "3.0"


def test_sweep_summaries_say_which_runs_did_not_finish() -> None:
    rows: list[dict[str, Any]] = [
        {"vm.spin.completion_s": 1.0, "vm.spin.finished": True},
        {"vm.spin.completion_s": None, "vm.spin.finished": False},
        {"vm.spin.completion_s": 3.0, "vm.spin.finished": True},
    ]
    metric = "vm.spin.completion_s"
    assert unfinished_runs(rows, metric) == 1
    assert summarize([r[metric] for r in rows], 1) == "2 ± 1.4 (1 unfinished)"
    assert summarize([None, None], 2) == "unfinished in all 2 runs"
    # A metric with no completion behind it still counts plain gaps as missing.
    assert unfinished_runs(rows, "host.utilization") == 0
    assert summarize([0.5, None], 0) == "0.5 ± 0 (1 missing)"
