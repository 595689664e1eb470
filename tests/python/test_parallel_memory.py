"""Runs in parallel are budgeted together: `--jobs` runs at once need that many times a run's
estimated memory, and fewer run at once when the machine's available memory (here set with
VSCHED_MEMORY_AVAILABLE) cannot hold them, said in one line. Before, each run was checked
alone: a sweep of runs estimated at 3.4 GiB ran two at once on a machine with 4 GiB free,
and one was killed for lack of memory."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Callable

import pytest

from vsched import _core
from vsched.parallel_memory import MEMORY_VARIABLE, human
from vsched.runs import Job, Row, RunSettings, make_jobs, run_local

from helpers import TINY_SCENARIO, CliResult, without_wall_clock

Cli = Callable[..., CliResult]
# Room for two runs of the tiny scenario (each estimated at a little over 64 MiB), not three.
ROOM = "150M"


def estimate() -> int:
    return int(_core.validate(TINY_SCENARIO))


def lowered(workers: int, fitting: int) -> str:
    each = estimate()
    return (
        f"warning: --jobs: {workers} runs at once would need about {human(workers * each)} "
        f"(each estimated at {human(each)}), more than the {human(150 << 20)} of memory available; "
        f"running {fitting} at a time"
    )


def test_the_room_holds_two_runs_of_the_tiny_scenario() -> None:
    assert 2 * estimate() <= 150 << 20 < 3 * estimate()


def whose(job: Job, settings: RunSettings) -> Row:
    return {"key": job.key, "pid": os.getpid()}


def test_fewer_workers_run_when_the_memory_holds_fewer_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(MEMORY_VARIABLE, ROOM)
    jobs = make_jobs("tiny", TINY_SCENARIO, None, [], range(1, 9))

    rows = list(run_local(jobs, 4, RunSettings(), whose))

    assert capsys.readouterr().err.splitlines() == [lowered(4, 2)]
    assert len(rows) == 8 and len({row["pid"] for row in rows}) <= 2


def test_enough_memory_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(MEMORY_VARIABLE, "64G")
    jobs = make_jobs("tiny", TINY_SCENARIO, None, [], range(1, 5))
    assert len(list(run_local(jobs, 4, RunSettings(), whose))) == 4
    assert capsys.readouterr().err == ""


def test_a_sweep_says_it_runs_fewer_at_once(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MEMORY_VARIABLE, ROOM)
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)

    result = cli("sweep", scenario, "--reps", "6", "-j", "4", "--out", tmp_path / "out")

    assert result.exit_code == 0, result.stderr
    assert [line for line in result.stderr_lines if line.startswith("warning:")] == [lowered(4, 2)]


def test_run_jobs_says_it_runs_fewer_at_once_and_reports_the_same(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    serial = cli("run", scenario, "--reps", "4", "--json")
    monkeypatch.setenv(MEMORY_VARIABLE, ROOM)

    parallel = cli("run", scenario, "--reps", "4", "-j", "3", "--json")

    assert parallel.exit_code == 0, parallel.stderr
    assert [line for line in parallel.stderr_lines if line.startswith("warning: --jobs")] == [lowered(3, 2)]
    assert without_wall_clock(json.loads(parallel.stdout)) == without_wall_clock(json.loads(serial.stdout))


def test_a_bad_memory_variable_is_one_line(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MEMORY_VARIABLE, "lots")
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    result = cli("run", scenario, "--reps", "2", "-j", "2")
    assert result.exit_code == 2
    assert result.stderr_lines == [
        f"error: {MEMORY_VARIABLE}: expected a size such as 8G, 512M or bytes, got 'lots'"
    ]
    assert re.fullmatch(r"\d+(\.\d)? [KMG]iB", human(3 << 29))
