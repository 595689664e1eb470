"""The command line's finish: its version, help that reads as prose at any width with flags
shown as flags, tables that a pipe receives whole, one label per Python policy, one colour per
policy in every figure, a styled report.html, and what start-up does not import."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

import matplotlib.pyplot as pyplot
import pytest
import typer

import vsched
from vsched import figures, reproduce
from vsched.catalog.model import Case, Figure, FigureResult
from vsched.cli import app

from helpers import CliResult

Cli = Callable[..., CliResult]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"
# The console script's code, run by this interpreter: `vsched ARGS...` in a fresh process.
CONSOLE_SCRIPT = "import sys; from vsched_entry import main; sys.argv[0] = 'vsched'; main()"


def vsched_process(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`vsched ARGS...` in a new process whose stdout is a pipe, COLUMNS unset."""
    environment = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-c", CONSOLE_SCRIPT, *map(str, args)],
        capture_output=True,
        text=True,
        env=environment,
        cwd=cwd,
        check=False,
    )


def test_version_comes_from_the_package_metadata(cli: Cli) -> None:
    installed = metadata.version("vsched")
    assert vsched.__version__ == installed
    result = cli("--version")
    assert result.exit_code == 0
    assert result.stdout == f"vsched {installed}\n"


COMMANDS = [[], *[[name] for name in typer.main.get_command(app).commands]]  # type: ignore[attr-defined]


def docstring_paragraphs(command: list[str]) -> list[str]:
    group = typer.main.get_command(app)
    callback = group.commands[command[0]].callback if command else None  # type: ignore[attr-defined]
    text = inspect.getdoc(callback) if callback is not None else app.info.help
    assert isinstance(text, str)
    return [" ".join(paragraph.split()) for paragraph in text.split("\n\n")]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "vsched")
@pytest.mark.parametrize("columns", [80, 200])
def test_help_reads_as_prose_and_shows_flags_as_flags(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, command: list[str], columns: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    result = cli(*command, "--help")
    assert result.exit_code == 0, result.stderr
    assert "--help" in result.stdout
    assert "<bool>" not in result.stdout  # a flag takes no value
    if columns == 200:
        # Each paragraph short enough for one line is on one line: the source's line breaks
        # are not the help's.
        lines = [" ".join(line.split()) for line in result.stdout.splitlines()]
        for paragraph in docstring_paragraphs(command):
            if len(paragraph) < 180:
                assert any(paragraph in line for line in lines), paragraph


def test_a_flag_is_still_a_flag(cli: Cli, tiny_scenario: Path) -> None:
    result = cli("run", tiny_scenario, "--json", "--check")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["scenario"] == "tiny"


def test_piped_tables_keep_their_width_and_are_never_cut() -> None:
    result = vsched_process("policies")
    assert result.returncode == 0, result.stderr
    assert "…" not in result.stdout
    # A parameter's row is one line, however long its meaning: rich's 80 columns would wrap it.
    widest = max(len(line) for line in result.stdout.splitlines())
    assert widest > 120
    meaning = vsched.policies()[1]["params"][0]["doc"]
    assert any(meaning in line for line in result.stdout.splitlines())


def test_a_python_policy_has_one_label_from_the_command_line_and_the_api(
    tmp_path: Path, tiny_scenario: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(EXAMPLES / "round_robin.py", tmp_path / "round_robin.py")
    from_cli = vsched_process(
        "run", tiny_scenario, "--json", "--policy", "round_robin.py:RoundRobin", cwd=tmp_path
    )
    assert from_cli.returncode == 0, from_cli.stderr
    label = json.loads(from_cli.stdout)["policy"]

    monkeypatch.chdir(tmp_path)
    spec = importlib.util.spec_from_file_location("round_robin_for_labels", tmp_path / "round_robin.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    from_class = vsched.run(tiny_scenario, policy=module.RoundRobin)
    from_name = vsched.run(tiny_scenario, policy="round_robin.py:RoundRobin")
    assert label == from_class["policy"] == from_name["policy"] == "round_robin.py:RoundRobin"
    assert set(from_class.vms()["policy"]) == {label}


def drawn_colours(result: FigureResult, stem: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Each legend entry's bar colour in the figure `draw` makes of `result`."""
    kept: list[Any] = []
    monkeypatch.setattr(pyplot, "close", kept.append)
    figures.draw(result, "seed000", stem)
    handles, labels = kept[0].axes[0].get_legend_handles_labels()
    return {label: tuple(handle.patches[0].get_facecolor()) for handle, label in zip(handles, labels)}


def bar_figure(policies: list[str]) -> FigureResult:
    cases = tuple(
        Case(x, policy.upper(), "seed000/x.toml", policy) for x in ("1", "2") for policy in policies
    )
    figure = Figure("f", "Fig. 1", "test", "x", "y", cases, metric=lambda row: None, claims=())
    return FigureResult(figure, {(c.x, c.series): [1.0, 2.0] for c in cases})


def test_a_policy_has_one_colour_in_every_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = drawn_colours(bar_figure(["credit", "cs", "bcs"]), tmp_path / "a", monkeypatch)
    second = drawn_colours(bar_figure(["bcs", "credit"]), tmp_path / "b", monkeypatch)
    assert first["CREDIT"] == second["CREDIT"] and first["BCS"] == second["BCS"]
    assert len(set(first.values())) == 3  # and distinct within a figure
    registered = [entry["name"] for entry in vsched.policies()]
    assert len({figures.policy_colour(name) for name in registered}) == len(registered)


def test_report_html_is_styled_by_its_own_stylesheet() -> None:
    page = reproduce.html("# Report\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n")
    head = page.split("</head>")[0]
    assert "<style>" in head and "table" in head and "nth-child(even)" in head
    assert "<link" not in page and "http" not in page  # nothing fetched from elsewhere
    assert "<table>" in page


STARTUP_PROBE = """
import sys
from vsched.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(" ".join(sorted(sys.modules)), file=sys.stderr)
"""
# What a small run does not need: each takes longer to load than such a run takes.
NOT_FOR_A_RUN = ["pandas", "pyarrow", "matplotlib", "numpy", "psutil", "vsched.runs", "vsched.real"]


def modules_after(*args: object) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", STARTUP_PROBE, *map(str, args)], capture_output=True, text=True, check=False
    )
    return set(result.stderr.splitlines()[-1].split())


def test_import_vsched_loads_no_command_line_or_table_library() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import sys, vsched; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = set(result.stdout.split())
    assert "vsched" in loaded
    assert not loaded & {"typer", "rich", "pydantic", "vsched.sweep", *NOT_FOR_A_RUN}


@pytest.mark.parametrize("args", [["run", "--help"], ["run", "SCENARIO"]], ids=["run --help", "run"])
def test_vsched_run_loads_only_what_a_run_needs(args: list[str], tiny_scenario: Path) -> None:
    loaded = modules_after(*[tiny_scenario if arg == "SCENARIO" else arg for arg in args])
    assert "vsched.cli" in loaded
    assert not loaded & set(NOT_FOR_A_RUN)
