"""The store of finished runs (`OUT/runs.jsonl`) survives damage: a line that is not a run is
skipped, reported in one warning line and kept aside, and resuming neither loses nor doubles
a good run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pyarrow.parquet as pq
import pytest

from vsched.runs import Job, Store, make_jobs, run_jobs

from helpers import TINY_SCENARIO, CliResult

Cli = Callable[..., CliResult]

# Each is one line of runs.jsonl (without its newline) that holds no run.
DAMAGED_LINES = [
    ("empty object", b"{}"),
    ("array", b"[1,2]"),
    ("not UTF-8", b'{"key": "\xff"}'),
    ("lone 0xff byte", b"\xff"),
    ("truncated", b'{"key": "0123456789abcdef0123", "scenario": "tiny", "pol'),
    (
        "right keys, wrong types",
        b'{"key": 17, "scenario": "tiny", "policy": "", "overrides": "[]", "seed": "one"}',
    ),
    (
        "seed of the wrong type",
        b'{"key": "0123456789abcdef0123", "scenario": "tiny", "policy": "", "overrides": "[]", "seed": 1.5}',
    ),
    (
        "a metric that is an object",
        b'{"key": "k", "scenario": "t", "policy": "", "overrides": "[]", '
        b'"seed": 1, "host.utilization": {"x": 1}}',
    ),
    ("JSON null", b"null"),
    ("nested 5000 deep", b"[" * 5000 + b"]" * 5000),
]


def tiny_jobs() -> list[Job]:
    return make_jobs("tiny", TINY_SCENARIO, None, [], range(1, 4))


def store_of_three_runs(path: Path) -> list[bytes]:
    """Run three tiny jobs into the store `path`; its lines."""
    with Store(path) as store:
        run_jobs(tiny_jobs(), store)
    lines = path.read_bytes().splitlines()
    assert len(lines) == 3
    return lines


@pytest.mark.parametrize("damage", [case[1] for case in DAMAGED_LINES], ids=[c[0] for c in DAMAGED_LINES])
def test_a_damaged_line_is_skipped_reported_and_kept_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: bytes
) -> None:
    path = tmp_path / "runs.jsonl"
    good = store_of_three_runs(path)
    path.write_bytes(b"\n".join([good[0], damage, good[1], good[2]]) + b"\n")

    with Store(path) as store:
        assert sorted(store.rows) == sorted(json.loads(line)["key"] for line in good)
        assert store.damaged_lines == [2]
        rows = run_jobs(tiny_jobs(), store)

    assert capsys.readouterr().err.splitlines() == [
        f"warning: {path}: skipped 1 damaged line (line 2), moved to {path}.damaged; "
        "the runs they held are run again"
    ]
    # Nothing was run again: the good lines are the whole store, as they were.
    assert path.read_bytes().splitlines() == good
    assert [row["key"] for row in rows] == [json.loads(line)["key"] for line in good]
    assert (tmp_path / "runs.jsonl.damaged").read_bytes() == damage + b"\n"
    # Reported once: the store is clean now.
    with Store(path) as store:
        assert store.damaged_lines == []
    assert capsys.readouterr().err == ""


def test_a_damaged_run_is_run_again_and_no_run_is_lost_or_doubled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.jsonl"
    good = store_of_three_runs(path)
    lost_key = json.loads(good[1])["key"]
    damaged = [b"{}", good[1][: len(good[1]) // 2], b"\xff\xfe", b'{"key": 1}']
    # The second run cut in half, junk around it, the first run twice, and no final newline.
    path.write_bytes(b"\n".join([good[0], damaged[0], damaged[1], good[0], damaged[2], good[2], damaged[3]]))

    with Store(path) as store:
        assert lost_key not in store.rows
        rows = run_jobs(tiny_jobs(), store)

    warning = capsys.readouterr().err.splitlines()
    assert warning == [
        f"warning: {path}: skipped 4 damaged lines (lines 2, 3, 5, 7), moved to {path}.damaged; "
        "the runs they held are run again"
    ]
    lines = path.read_bytes().splitlines()
    keys = [json.loads(line)["key"] for line in lines]
    assert sorted(keys) == sorted(json.loads(line)["key"] for line in good)
    assert len(set(keys)) == 3
    # The runs that were intact stayed as they were; the damaged one was redone, the same run.
    assert lines[:2] == [good[0], good[2]]
    assert json.loads(lines[2])["key"] == lost_key
    redone = {k: v for k, v in json.loads(lines[2]).items() if k != "wall_s"}
    assert redone == {k: v for k, v in json.loads(good[1]).items() if k != "wall_s"}
    assert [row["key"] for row in rows] == [json.loads(line)["key"] for line in good]
    assert (tmp_path / "runs.jsonl.damaged").read_bytes().splitlines() == damaged


def test_the_warning_lists_at_most_ten_line_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_bytes(b"{}\n" * 13)
    with Store(path) as store:
        assert store.rows == {} and store.damaged_lines == list(range(1, 14))
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {path}: skipped 13 damaged lines (lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 3 more), "
        f"moved to {path}.damaged; the runs they held are run again"
    ]


def test_a_sweep_resumes_over_a_damaged_store(cli: Cli, tmp_path: Path) -> None:
    """The command line, end to end: before, resuming crashed with a KeyError, TypeError or
    UnicodeDecodeError traceback."""
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    out = tmp_path / "sweep"
    args = ("sweep", scenario, "--set", "scheduler.tslice_ms=10,30", "--reps", "2", "-j", "1", "--out", out)
    assert cli(*args).exit_code == 0
    store = out / "runs.jsonl"
    good = store.read_bytes().splitlines()
    assert len(good) == 4
    store.write_bytes(
        b"\n".join([b"{}", good[0], b"[1,2]", good[1], b"\xff", good[2][:40], b'{"key": 3, "seed": "x"}'])
        + b"\n"
    )

    result = cli(*args)

    assert result.exit_code == 0, result.stderr
    assert "Traceback" not in result.stderr
    warnings = [line for line in result.stderr_lines if line.startswith("warning:")]
    assert warnings == [
        f"warning: {store}: skipped 5 damaged lines (lines 1, 3, 5, 6, 7), moved to {store}.damaged; "
        "the runs they held are run again"
    ]
    assert "2 of 4 runs already stored: resuming" in result.stderr
    keys = [json.loads(line)["key"] for line in store.read_bytes().splitlines()]
    assert len(keys) == 4 and len(set(keys)) == 4
    assert sorted(keys) == sorted(json.loads(line)["key"] for line in good)
    table = pq.read_table(out / "results.parquet").to_pylist()
    assert sorted(row["key"] for row in table) == sorted(keys)
