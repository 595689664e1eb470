"""Property-based tests over generated scenarios (scenario_gen.py: valid scenarios built from
the registry, then mutated): whatever the input,

- validation raises `ScenarioError` only, with a one-line message;
- what validation refuses, a run refuses; what it accepts, a run does not refuse;
- a run gives the same report twice (apart from `wall_s`), and the report's invariants hold
  (report_checks.py);
- on the command line, `vsched validate` and `vsched run --json` exit 0, 1 or 2, fail with
  one line on stderr (no traceback, no panic), and print the report the API gives.

Bounded and derandomized for CI (well under a minute on 2 cores); the long searches are
scripts/fuzz_campaign.py and the cargo-fuzz target in fuzz/ (docs/hardening.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, TypeVar

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from report_checks import canonical, error_line_problem, report_problems
from scenario_gen import Case, HypothesisSource, RandomSource, generate

import vsched
from vsched import _core

T = TypeVar("T")

FIXED = settings(
    derandomize=True,  # the same examples on every run: CI stays deterministic
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
# Examples of the in-process test (the command-line test runs a twentieth as many):
# VSCHED_FUZZ_EXAMPLES=5000 searches longer than CI does.
EXAMPLES = int(os.environ.get("VSCHED_FUZZ_EXAMPLES", "300"))
# The longest a single run may take before it counts as a hang (shorter horizons than this
# are the generator's rule: 0.05 to 0.5 simulated seconds).
RUN_BUDGET_S = 20.0


@st.composite
def scenario_cases(draw: Callable[[Any], Any]) -> Case:
    return generate(HypothesisSource(draw))


def no_panic(call: Callable[[], T]) -> T:
    """`call()`, with a Rust panic (PyO3's PanicException, a BaseException) turned into a
    test failure that Hypothesis can shrink."""
    try:
        return call()
    except (Exception, KeyboardInterrupt, SystemExit):
        raise
    except BaseException as error:
        raise AssertionError(f"the core panicked: {type(error).__name__}: {error}") from None


def validate(case: Case, tmp: Path) -> None:
    """The Python API's validate; a file when the case is not UTF-8, as the API reads files."""
    text = case.text
    if text is None:
        path = tmp / "case.toml"
        path.write_bytes(case.data)
        no_panic(lambda: vsched.validate(path))
    elif "\n" in text:
        no_panic(lambda: vsched.validate(text))
    else:  # one line of text would be taken for a path; the core takes text
        no_panic(lambda: _core.validate(text))


def run(text: str) -> str:
    """One repetition in-process, failing the test if it runs longer than RUN_BUDGET_S."""
    started = time.monotonic()

    def progress(rep: int, reps: int, sim_s: float, horizon_s: float) -> None:
        if time.monotonic() - started > RUN_BUDGET_S:
            raise TimeoutError(
                f"run still going after {RUN_BUDGET_S} s wall clock ({sim_s}/{horizon_s} s simulated)"
            )

    return no_panic(lambda: _core.run(text, reps=1, progress=progress))


def assert_one_line(message: str) -> None:
    problem = error_line_problem(message)
    assert problem is None, f"{problem}: {message!r}"


@settings(FIXED, max_examples=EXAMPLES, deadline=timedelta(seconds=2 * RUN_BUDGET_S + 10))
@given(case=scenario_cases())
def test_validate_and_run_in_process(case: Case) -> None:
    event(f"case: {case.kind}")  # pytest --hypothesis-show-statistics shows the mix
    with tempfile.TemporaryDirectory() as tmp:
        try:
            validate(case, Path(tmp))
        except vsched.ScenarioError as error:
            event("refused")
            assert_one_line(str(error))
            if case.text is not None:
                with pytest.raises(vsched.ScenarioError):
                    run(case.text)
            return
    assert case.text is not None, "a file that is not UTF-8 was accepted"
    try:
        report_text = run(case.text)
    except vsched.PolicyError as error:  # a policy bug: exit 1, still one line
        assert_one_line(str(error))
        return
    except vsched.ScenarioError as error:
        pytest.fail(f"validate accepted the scenario, but run refused it: {error}")
    event("ran")
    assert report_problems(json.loads(report_text)) == []
    assert canonical(run(case.text)) == canonical(report_text), "same scenario and seed, different report"


def vsched_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vsched", *args], capture_output=True, text=True, timeout=2 * RUN_BUDGET_S + 30
    )


def assert_clean_exit(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode in (0, 1, 2), f"exit {result.returncode}: {result.stderr[-2000:]}"
    if result.returncode != 0:
        assert_one_line(result.stderr)
        assert result.stderr.startswith("error: "), result.stderr


@settings(FIXED, max_examples=max(1, EXAMPLES // 20), deadline=timedelta(seconds=4 * RUN_BUDGET_S + 60))
@given(case=scenario_cases())
def test_command_line(case: Case) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "case.toml"
        path.write_bytes(case.data)
        validated = vsched_cli("validate", str(path))
        assert_clean_exit(validated)
        ran = vsched_cli("run", str(path), "--reps", "1", "--json")
        assert_clean_exit(ran)
    event(f"case: {case.kind}, vsched run exit {ran.returncode}")
    assert validated.returncode in (0, 2), validated.stderr
    if validated.returncode == 0:
        assert ran.returncode != 2, f"vsched validate said valid, vsched run refused it: {ran.stderr}"
    else:
        assert ran.returncode == 2, f"vsched validate refused it, vsched run exited {ran.returncode}"
    if ran.returncode == 0:
        assert case.text is not None
        assert report_problems(json.loads(ran.stdout)) == []
        assert canonical(ran.stdout) == canonical(run(case.text)), "the CLI's report differs from the API's"


def test_the_generator_reaches_the_simulator() -> None:
    # The properties above are only as good as the scenarios: most unmutated ones must be
    # valid (and so run), and mutated ones must be refused for many different reasons.
    cases = [generate(RandomSource.of(0, i)) for i in range(300)]
    valid_kind = [case for case in cases if case.kind == "valid"]
    accepted = 0
    for case in valid_kind:
        try:
            _core.validate(case.data.decode())
            accepted += 1
        except vsched.ScenarioError:
            pass
    assert len(valid_kind) > 60 and accepted >= 0.6 * len(valid_kind), (accepted, len(valid_kind))
    refusals = set()
    for case in cases:
        if case.kind != "valid" and case.text is not None:
            try:
                _core.validate(case.text)
            except vsched.ScenarioError as error:
                refusals.add(str(error).split(":")[0])
    assert len(refusals) >= 30, sorted(refusals)
