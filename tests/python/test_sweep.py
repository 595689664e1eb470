"""`vsched sweep` and the run machinery under it: dotted-key overrides, one row per run in
Parquet, resuming an interrupted sweep with every run exactly once, and the Ray backend
giving the same rows as local processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pyarrow.parquet as pq
import pytest

import vsched
from vsched.runs import Store, apply_overrides, make_jobs, parse_value, run_jobs

from helpers import SLOW_SCENARIO, TINY_SCENARIO, CliResult, without_wall_clock

Cli = Callable[..., CliResult]


def test_overrides_reach_tables_and_array_elements_by_name_index_or_star() -> None:
    text = apply_overrides(
        TINY_SCENARIO,
        [
            ("scheduler.tslice_ms", 10),
            ("vm.locker.workload.cs_us", 20),
            ("vm.1.vcpus", 1),
            ("vm.*.weight", 512),
        ],
    )
    report = vsched.run(text, reps=1)
    assert report["runs"][0]["vms"][1]["vcpus"] == 1
    assert [vm["weight"] for vm in report["runs"][0]["vms"]] == [512, 512]
    assert "tslice_ms = 10" in text and "cs_us = 20" in text
    assert apply_overrides(TINY_SCENARIO, []) == TINY_SCENARIO


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("vm.nobody.vcpus", "vm.nobody.vcpus: no element 'nobody' in this array"),
        ("vm.locker", "vm.locker: expected a key inside a table"),
        ("host.pcpus.x", "host.pcpus.x: expected a key inside a table, 'pcpus' is not one"),
        ("host..pcpus", "host..pcpus: expected a dotted key"),
    ],
)
def test_a_bad_override_key_is_named(key: str, message: str) -> None:
    with pytest.raises(vsched.ScenarioError, match=message.replace(".", r"\.").replace("(", r"\(")):
        apply_overrides(TINY_SCENARIO, [(key, 1)])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "vm.locker.vcpus: expected a number, string, boolean, array or table, got null"),
        (float("nan"), "host.cpu_ghz: expected a finite number, got NaN"),
        (object(), "run.seed: expected a number, string, boolean, array or table, got object"),
    ],
)
def test_a_value_without_a_toml_form_is_named_by_its_key(value: object, message: str) -> None:
    key = message.partition(":")[0]
    with pytest.raises(vsched.ScenarioError) as raised:
        apply_overrides(TINY_SCENARIO, [(key, value)])
    assert str(raised.value) == message


def test_a_policy_replaces_the_scheduler_table_and_scheduler_overrides_still_apply() -> None:
    job = make_jobs("tiny", TINY_SCENARIO, "rr", [("scheduler.slice_us", 500)], [1])[0]
    assert '[scheduler]\nname = "rr"\nslice_us = 500\n' in job.text
    assert job.policy == "rr" and job.overrides == (("scheduler.slice_us", 500),)
    # Jobs are identified by what they compute: the policy and the overrides are in the text.
    keys = {
        make_jobs("tiny", TINY_SCENARIO, p, o, [1])[0].key
        for p in ("rr", "credit")
        for o in ([], [("host.pcpus", 1)])
    }
    assert len(keys) == 4


def test_values_are_read_as_toml_with_bare_words_as_strings() -> None:
    assert [parse_value(v) for v in ["10", "2.5", "true", '"credit"', "credit"]] == [
        10,
        2.5,
        True,
        "credit",
        "credit",
    ]


def test_a_sweep_writes_one_parquet_row_per_run_with_its_parameters(cli: Cli, tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    out = tmp_path / "sweep"
    result = cli(
        "sweep",
        scenario,
        "--set",
        "scheduler.tslice_ms=10,30",
        "--set",
        "vm.hog.vcpus=1,2",
        "--reps",
        "2",
        "--jobs",
        "1",
        "--out",
        out,
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert [(p["scheduler.tslice_ms"], p["vm.hog.vcpus"], p["runs"]) for p in summary["points"]] == [
        (10, 1, 2),
        (10, 2, 2),
        (30, 1, 2),
        (30, 2, 2),
    ]
    table = pq.read_table(out / "results.parquet").to_pylist()
    assert len(table) == 8 and len({row["key"] for row in table}) == 8
    assert sorted({(row["overrides"], row["seed"]) for row in table}) == sorted(
        (json.dumps([["scheduler.tslice_ms", t], ["vm.hog.vcpus", v]]), s)
        for t in (10, 30)
        for v in (1, 2)
        for s in (1, 2)
    )
    # The swept value reached the simulation: the hog VM has the vCPUs its row says.
    for row in table:
        assert row["vm.hog.vcpus"] == json.loads(row["overrides"])[1][1]


def test_a_sweep_rejects_a_variant_the_core_rejects_before_running_anything(cli: Cli, tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    result = cli("sweep", scenario, "--set", "host.pcpus=2,0", "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert result.stderr_lines == [
        "error: host.pcpus: expected an integer in 1..=4096, got 0 (with host.pcpus=0); "
        "--skip-infeasible lists and skips such points"
    ]
    assert (
        not (tmp_path / "out" / "runs.jsonl").exists() or (tmp_path / "out" / "runs.jsonl").read_text() == ""
    )


def test_an_unknown_policy_is_named_as_vsched_run_names_it(cli: Cli, tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    result = cli("sweep", scenario, "--policy", "rr,fifo", "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert len(result.stderr_lines) == 1
    assert result.stderr_lines[0].startswith(
        'error: --policy: unknown policy "fifo"; expected one of rr, credit, '
    )
    # The core checks the name once, for `vsched run --policy` and the sweep alike.
    assert cli("run", scenario, "--policy", "fifo").stderr_lines == result.stderr_lines
    assert not (tmp_path / "out" / "runs.jsonl").exists()


def stored_keys(path: Path) -> list[str]:
    keys = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            keys.append(json.loads(line)["key"])
    return keys


def test_an_interrupted_sweep_resumes_and_has_every_run_exactly_once(tmp_path: Path) -> None:
    # 16 runs on 2 worker processes; Ctrl-C (SIGINT) once a few have been stored, then a
    # write cut short is simulated by a partial line, as a kill -9 could leave.
    scenario = tmp_path / "resume.toml"
    scenario.write_text(SLOW_SCENARIO)
    out = tmp_path / "sweep"
    command = [
        sys.executable,
        "-m",
        "vsched",
        "sweep",
        str(scenario),
        "--set",
        "vm.locker.workload.cs_us=5,10,20,40",
        "--reps",
        "4",
        "--jobs",
        "2",
        "--out",
        str(out),
    ]
    store = out / "runs.jsonl"
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not store.exists() or len(stored_keys(store)) < 3):
        time.sleep(0.01)
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=60)
    interrupted = stored_keys(store)
    if first.returncode == 0:
        pytest.skip("the sweep finished before the interruption arrived; nothing to resume")
    assert first.returncode == 130, err
    assert "run the same command again to resume" in err
    assert 3 <= len(interrupted) < 16 and len(set(interrupted)) == len(interrupted)
    kept_lines = store.read_text().splitlines()
    with store.open("a") as file:
        file.write('{"key": "cut-sh')

    second = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert f"{len(interrupted)} of 16 runs already stored: resuming" in second.stderr
    keys = stored_keys(store)
    assert len(keys) == 16 and len(set(keys)) == 16
    # The runs finished before the interruption were kept as they were, not redone.
    assert store.read_text().splitlines()[: len(kept_lines)] == kept_lines
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert sorted(row["key"] for row in rows) == sorted(keys)

    third = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert third.returncode == 0 and "16 of 16 runs already stored" in third.stderr
    assert stored_keys(store) == keys


def test_the_ray_backend_returns_the_rows_of_local_runs(tmp_path: Path) -> None:
    jobs = [
        job
        for cs_us in (5, 20)
        for job in make_jobs(
            "resume", SLOW_SCENARIO, None, [("vm.locker.workload.cs_us", cs_us)], range(1, 3)
        )
    ]
    with Store(tmp_path / "local.jsonl") as local_store:
        local = run_jobs(jobs, local_store, workers=2)
    # Ray's workers inherit this environment; a 2-core machine gets a 2-CPU local instance.
    os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")
    with Store(tmp_path / "ray.jsonl") as ray_store:
        remote = run_jobs(jobs, ray_store, backend="ray")
    assert len(local) == len(remote) == 4
    assert [without_wall_clock(row) for row in remote] == [without_wall_clock(row) for row in local]
    assert len({row["vm.locker.completion_s"] for row in local}) > 1
