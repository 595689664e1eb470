"""What docs/parallel.md runs: `vsched bench --scale-scenario lu-Nhosts-credit` prints a valid
cluster of the size asked, `parallel_estimate.py` computes `N c / (C c + W B)` from a census,
and both refuse bad input in one line with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import vsched

REPO = Path(__file__).resolve().parents[2]


def run_script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(REPO / "scripts" / name), *args]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_the_generated_cluster_has_the_hosts_asked_for() -> None:
    command = [sys.executable, "-m", "vsched", "bench", "--scale-scenario", "lu-6hosts-credit"]
    process = subprocess.run(command, capture_output=True, text=True, check=False)
    assert process.returncode == 0, process.stderr
    assert process.stdout == vsched.scale_scenario("lu-6hosts-credit")
    scenario = vsched.Scenario.from_toml(process.stdout)
    scenario.validate()
    assert scenario["cluster"]["hosts"] == 6
    assert [c["hosts"] for c in scenario["virtual_cluster"]] == [[0, 1], [2, 3], [4, 5]]
    assert [vm["host"] for vm in scenario["vm"]] == list(range(6))


def test_the_estimate_is_the_formula(tmp_path: Path) -> None:
    window = {"lookahead_ns": 10_000, "windows": 10, "by_cores": [{"cores": 8, "critical_events": 50}]}
    census = tmp_path / "census.jsonl"
    line = json.dumps({"scenario": "s", "events": 100, "lookaheads": [window]})
    census.write_text(line + "\n", encoding="utf-8")
    process = run_script("parallel_estimate.py", str(census), "--c-ns", "500", "--barrier-ns", "0,1000")
    assert process.returncode == 0, process.stderr
    # 100 * 500 / (50 * 500) = 2; with 10 barriers of 1 µs, 50,000 / 35,000 = 1.43.
    assert process.stdout.strip().endswith("P=8: 2.00 / 1.43")


def test_a_cluster_of_odd_size_is_refused_in_one_line() -> None:
    command = [sys.executable, "-m", "vsched", "bench", "--scale-scenario", "lu-3hosts-credit"]
    process = subprocess.run(command, capture_output=True, text=True, check=False)
    assert process.returncode == 2 and process.stdout == ""
    assert process.stderr.splitlines() == [process.stderr.strip()], process.stderr
    assert "or lu-Nhosts-credit for an even N in 2..=1024" in process.stderr


@pytest.mark.parametrize(
    ("script", "args", "fragment"),
    [
        ("parallel_estimate.py", ["no-such.jsonl"], "census: expected JSON lines"),
        ("parallel_estimate.py", ["x.jsonl", "--barrier-ns", "1,fast"], "--barrier-ns: expected numbers"),
        ("parallel_estimate.py", ["x.jsonl", "--c-ns", "nan"], "--c-ns: expected a positive number"),
        ("parallel_estimate.py", ["x.jsonl", "--lookahead-us", "ten"], "argument --lookahead-us"),
    ],
)
def test_bad_input_is_one_line(script: str, args: list[str], fragment: str) -> None:
    process = run_script(script, *args)
    assert process.returncode == 2
    assert process.stdout == ""
    assert process.stderr.splitlines() == [process.stderr.strip()], process.stderr
    assert process.stderr.startswith(f"error: {fragment}"), process.stderr
