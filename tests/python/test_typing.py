"""vsched is a typed package (it ships `py.typed`): its annotations are part of its interface,
and code that uses it type-checks against them. Strict mypy over the package and the tests,
as pyproject.toml configures it, is that contract; this test keeps it from slipping."""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_strict_finds_no_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    # The configured `files` are relative to the repository root.
    monkeypatch.chdir(ROOT)
    report, errors, status = api.run(["--config-file", str(ROOT / "pyproject.toml")])
    assert status == 0, f"mypy failed (exit status {status}):\n{report}{errors}"
