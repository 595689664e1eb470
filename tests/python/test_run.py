"""`vsched run`: the JSON document's shape, determinism, the tables and `--out`."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any, Callable

import pytest
from rich.console import Console

import vsched
from vsched.report import format_mean_std, report_tables

from helpers import TINY_SCENARIO, CliResult, without_wall_clock

Cli = Callable[..., CliResult]

VM_METRICS = (
    "completion_s",
    "cpu_s",
    "spin_s",
    "steal_s",
    "lock_holder_preemptions",
    "lock_waiter_preemptions",
)
HOST_METRICS = ("utilization", "frag_idle_s", "context_switches", "ipis", "fairness")


def run_json(cli: Cli, scenario: Path, *options: object) -> dict[str, Any]:
    result = cli("run", scenario, "--json", *options)
    assert result.exit_code == 0, result.stderr
    # Nothing but the warnings about unfinished workloads (the tiny locker is starved in
    # some seeds) goes to stderr.
    assert all(line.startswith("warning: ") for line in result.stderr.splitlines())
    report: dict[str, Any] = json.loads(result.stdout)  # stdout holds the document and nothing else
    return report


def test_json_document_shape(cli: Cli, tiny_scenario: Path) -> None:
    report = run_json(cli, tiny_scenario, "--reps", "2", "--seed", "11")

    assert [run["seed"] for run in report["runs"]] == [11, 12]
    for run in report["runs"]:
        assert isinstance(run["events"], int) and run["events"] > 0
        assert isinstance(run["wall_s"], float) and run["wall_s"] >= 0
        assert [vm["name"] for vm in run["vms"]] == ["locker", "hog"]
        for vm in run["vms"]:
            for metric in VM_METRICS:
                assert metric in vm
            assert vm["cpu_s"] >= vm["spin_s"] >= 0
            assert vm["steal_s"] >= 0
        for metric in HOST_METRICS:
            assert metric in run["host"]
        assert 0 <= run["host"]["utilization"] <= 1
    summary_vms = report["summary"]["vms"]
    assert [vm["name"] for vm in summary_vms] == ["locker", "hog"]
    for vm in summary_vms:
        assert "completion_s_mean" in vm and "completion_s_std" in vm
    # A CPU hog never finishes, so it has no completion time to average.
    assert summary_vms[1]["completion_s_mean"] is None


def test_summary_is_mean_and_std_of_the_runs(tmp_path: Path) -> None:
    scenario = TINY_SCENARIO.replace('kind = "cpu_hog"', 'kind = "idle"').replace(
        "seed = 3", 'seed = 3\nuntil = "all_done"'
    )
    report = vsched.run(scenario, reps=3)

    completions = [run["vms"][0]["completion_s"] for run in report["runs"]]
    assert all(isinstance(c, float) and 0 < c <= 0.5 for c in completions)
    locker = report["summary"]["vms"][0]
    mean = sum(completions) / 3
    assert locker["completion_s_mean"] == pytest.approx(mean)
    sample_std = (sum((c - mean) ** 2 for c in completions) / 2) ** 0.5
    assert locker["completion_s_std"] == pytest.approx(sample_std)


def test_cli_json_is_the_core_document(cli: Cli, tiny_scenario: Path) -> None:
    from_cli = run_json(cli, tiny_scenario, "--seed", "5")
    from_api = json.loads(vsched.run_json(tiny_scenario, seed=5))
    assert without_wall_clock(from_cli) == without_wall_clock(from_api)


def test_same_seed_same_report_other_seed_differs(cli: Cli, tiny_scenario: Path) -> None:
    first = without_wall_clock(run_json(cli, tiny_scenario, "--seed", "7", "--reps", "2"))
    second = without_wall_clock(run_json(cli, tiny_scenario, "--seed", "7", "--reps", "2"))
    other = without_wall_clock(run_json(cli, tiny_scenario, "--seed", "8", "--reps", "2"))

    assert first == second
    assert first["runs"] != other["runs"]


def test_byte_identical_text_apart_from_wall_clock() -> None:
    def masked(text: str) -> str:
        return re.sub(r'"wall_s":[0-9.eE+-]+', '"wall_s":0', text)

    first = vsched.run_json(TINY_SCENARIO, seed=9, reps=2)
    second = vsched.run_json(TINY_SCENARIO, seed=9, reps=2)
    assert first.count('"wall_s":') == 2
    assert masked(first) == masked(second)


def test_table_output(cli: Cli, tiny_scenario: Path) -> None:
    result = cli("run", tiny_scenario)

    assert result.exit_code == 0
    for expected in (
        "locker",
        "hog",
        "spinlock",
        "cpu_s",
        "steal_s",
        "entitled_share",
        "utilization",
    ):
        assert expected in result.stdout
    # Seed 3's locker neither spins nor is preempted holding its lock: rows 0 for every VM
    # are left out of the table (the JSON has them).
    assert "lock_holder_preemptions" not in result.stdout
    assert result.stderr == ""


def test_table_with_repetitions_shows_mean_and_std(cli: Cli, tiny_scenario: Path) -> None:
    result = cli("run", tiny_scenario, "--reps", "3")

    assert result.exit_code == 0
    assert "mean ± std over 3 runs" in result.stdout
    assert "±" in result.stdout.split("cpu_s", 1)[1].splitlines()[0]


def test_out_writes_results_and_summary(cli: Cli, tiny_scenario: Path, tmp_path: Path) -> None:
    out = tmp_path / "results" / "nested"
    result = cli("run", tiny_scenario, "--json", "--out", out)

    assert result.exit_code == 0
    assert (out / "results.json").read_text(encoding="utf-8") == result.stdout.rstrip("\n")
    summary = (out / "summary.txt").read_text(encoding="utf-8")
    assert "locker" in summary and "cpu_s" in summary
    assert "\x1b[" not in summary  # plain text, no terminal colours


def test_scenario_as_path_or_text(tiny_scenario: Path) -> None:
    from_path = vsched.run(tiny_scenario)
    from_str_path = vsched.run(str(tiny_scenario))
    from_text = vsched.run(TINY_SCENARIO)
    assert without_wall_clock(from_path) == without_wall_clock(from_text) == without_wall_clock(from_str_path)


def test_validate_accepts_a_good_scenario(cli: Cli, tiny_scenario: Path) -> None:
    vsched.validate(tiny_scenario)
    result = cli("validate", tiny_scenario)
    assert result.exit_code == 0
    assert "valid" in result.stdout


@pytest.mark.parametrize("width", [40, 60, 80, 200])
def test_tables_split_rather_than_clip(width: int) -> None:
    report = vsched.run(TINY_SCENARIO.replace("seed = 3", "seed = 3\nreps = 2"))
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None)

    console.print(report_tables(report, width))

    text = buffer.getvalue()
    assert "…" not in text
    for vm in report["summary"]["vms"]:
        assert vm["name"] in text
        assert format_mean_std("cpu_s", vm["cpu_s_mean"], vm["cpu_s_std"]) in text
