"""`vsched run --jobs N`: repetitions in parallel processes give the report of a serial run,
byte for byte apart from wall-clock times, and the trace of its first repetition."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

import pytest

from helpers import TINY_SCENARIO, CliResult

Cli = Callable[..., CliResult]

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"


def without_wall_s(text: str) -> str:
    """The report's text with each `wall_s` value blanked, nothing else touched."""
    masked, count = re.subn(r'"wall_s":[-+.0-9eE]+', '"wall_s":0', text)
    assert count > 0
    return masked


@pytest.mark.parametrize(
    "options",
    [
        ["--reps", "4"],
        ["--reps", "3", "--seed", "7", "--policy", "rr"],
        # A policy written in Python: each worker loads it, and the combined report names it.
        ["--reps", "2", "--policy", str(EXAMPLES / "round_robin.py") + ":RoundRobin"],
    ],
)
def test_parallel_repetitions_give_the_serial_report_byte_for_byte(
    cli: Cli, tmp_path: Path, options: list[str]
) -> None:
    # The demo scenario: its fairness and shares have full-precision floats, the figures a
    # careless JSON round trip would change in the last digit.
    scenario = SCENARIOS / "lhp-demo.toml"
    serial = cli("run", scenario, "--json", *options, "--trace", tmp_path / "serial.json")
    parallel = cli("run", scenario, "--json", *options, "--jobs", "3", "--trace", tmp_path / "parallel.json")
    assert serial.exit_code == 0 and parallel.exit_code == 0, parallel.stderr
    assert without_wall_s(parallel.stdout) == without_wall_s(serial.stdout)
    # The trace is the first repetition's, as in a serial run.
    assert (tmp_path / "parallel.json").read_bytes() == (tmp_path / "serial.json").read_bytes()


def test_the_scenario_s_seed_and_reps_apply_when_not_given(cli: Cli, tiny_scenario: Path) -> None:
    # TINY_SCENARIO sets run.seed = 3 and leaves reps at the default; here reps = 2.
    path = tiny_scenario.with_name("two.toml")
    path.write_text(TINY_SCENARIO.replace("seed = 3\n", "seed = 3\nreps = 2\n"))
    serial = cli("run", path, "--json")
    parallel = cli("run", path, "--json", "--jobs", "2")
    assert parallel.exit_code == 0, parallel.stderr
    assert without_wall_s(parallel.stdout) == without_wall_s(serial.stdout)
    assert '"seed":3' in parallel.stdout and '"reps":2' in parallel.stdout


def test_bad_options_fail_as_in_a_serial_run(cli: Cli, tiny_scenario: Path, tmp_path: Path) -> None:
    assert cli("run", tiny_scenario, "--jobs", "0").stderr_lines == [
        "error: --jobs: expected at least 1, got 0"
    ]
    for options in (["--policy", "fifo"], ["--reps", "100001"]):
        serial = cli("run", tiny_scenario, *options)
        parallel = cli("run", tiny_scenario, *options, "--jobs", "2")
        assert (
            (parallel.exit_code, parallel.stderr) == (serial.exit_code, serial.stderr) == (2, serial.stderr)
        )
    unwritable = tmp_path / "missing" / "trace.json"
    serial = cli("run", tiny_scenario, "--trace", unwritable)
    parallel = cli("run", tiny_scenario, "--trace", unwritable, "--jobs", "2")
    assert parallel.exit_code == serial.exit_code == 2
    assert parallel.stderr_lines[0].startswith("error: --trace: No such file or directory")
