"""Fixtures: a tiny scenario file and an in-process runner of the `vsched` command line."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Callable

import pytest

from vsched.cli import main

from helpers import TINY_SCENARIO, CliResult

# The Ctrl-C tests start commands and send them SIGINT, as a terminal does to a foreground
# job. A test run started as a background job of a script (`bash .ci/run &`) has SIGINT
# ignored, which its children would inherit, and a command that starts with SIGINT ignored
# keeps ignoring it, as POSIX intends for background jobs: take it back for the children.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run `vsched ARGS...` in this process, as the console script would."""

    def invoke(*args: object) -> CliResult:
        with pytest.raises(SystemExit) as stopped:
            main([str(arg) for arg in args])
        captured = capsys.readouterr()
        code = stopped.value.code
        return CliResult(
            exit_code=code if isinstance(code, int) else 0, stdout=captured.out, stderr=captured.err
        )

    return invoke


@pytest.fixture
def tiny_scenario(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY_SCENARIO, encoding="utf-8")
    return path
