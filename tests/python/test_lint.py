"""The style is part of the project's contract: pyproject.toml configures ruff (`[tool.ruff]`),
and the tree is kept clean under it, lint and format alike. CI runs only the test suites, so
without this test the style would drift a commit at a time; this test keeps it from slipping."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    """`ruff ARGS` over the repository as its pyproject.toml configures it (`--no-cache`: a test
    run leaves no .ruff_cache behind)."""
    command = [sys.executable, "-m", "ruff", *args, "--no-cache", "--config", str(ROOT / "pyproject.toml")]
    # Run from the root, so that the paths in ruff's report are relative to it.
    return subprocess.run([*command, str(ROOT)], cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_check_finds_nothing() -> None:
    result = ruff("check")
    assert result.returncode == 0, (
        f"ruff check failed (exit status {result.returncode}):\n{result.stdout}{result.stderr}"
    )


def test_ruff_format_would_change_nothing() -> None:
    result = ruff("format", "--check")
    assert result.returncode == 0, (
        f"ruff format --check failed (exit status {result.returncode}):\n{result.stdout}{result.stderr}"
    )
