"""Type stubs of the compiled core (crates/vsched-py); use the `vsched` package instead."""

from collections.abc import Sequence
from os import PathLike
from typing import Callable

DEFAULT_SCENARIO: str
DEFAULT_BASELINE_SCENARIO: str

class ScenarioError(ValueError): ...
class PolicyError(RuntimeError): ...

def run(
    scenario_toml: str,
    seed: int | None = None,
    reps: int | None = None,
    policy: str | None = None,
    trace: str | PathLike[str] | None = None,
    trace_limit: int = 0,
    progress: Callable[[int, int, float, float], None] | None = None,
    check: bool = False,
    max_memory: int = 0,
) -> str: ...
def validate(scenario_toml: str, max_memory: int = 0) -> None: ...
def apply_overrides(
    scenario_toml: str, policy: str | None = None, overrides: Sequence[tuple[str, str]] = ()
) -> str: ...
def policies() -> str: ...
def workloads() -> str: ...
def bench(sim_s: float | None = None) -> str: ...
def paper_scenarios() -> dict[str, str]: ...
