"""vsched: a laboratory for hypervisor vCPU scheduling.

A deterministic discrete-event simulator (written in Rust) runs scheduling policies over
simulated hosts whose guests really synchronize, so lock-holder preemption, skew and
fragmentation emerge from the schedule. This package is its Python face::

    import vsched
    report = vsched.run("scenarios/lhp-demo.toml", seed=1, reps=3)
    for vm in report["summary"]["vms"]:
        print(vm["name"], vm["completion_s_mean"], vm["completion_s_std"])

A scenario is given as a path (a `pathlib.Path`, or a one-line `str`), as TOML text (a `str`
holding at least one newline), or as Python data: a `vsched.Scenario` or any dict of its
tables (see `vsched.scenario`). `run` returns a `Report`, the report's dict with its runs as
tables (`report.vms()`, `report.hosts()`; see `vsched.frames`). Bad input raises `ScenarioError`, whose
message is the one line the command line prints; a policy that makes an unusable decision
(a bug in the policy, not in the input) raises `PolicyError`, and a bug in vsched itself (a
panic in the Rust core) raises `InternalError`, both with one-line messages. The scenario
format is described in docs/scenario.md; the report's fields in the crate `vsched-model`
(`metrics.rs`).

A policy may be written in Python: subclass `vsched.Policy` (see `vsched.policy` and
docs/python-policies.md) and pass the class as `policy=`, or name it `path/to/file.py:Class`.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Union

from vsched import _core
from vsched import policy as _policy
from vsched._core import (
    DEFAULT_BASELINE_SCENARIO,
    DEFAULT_SCENARIO,
    InternalError,
    PolicyError,
    ScenarioError,
)
from vsched.policy import (
    CounterOf,
    Cx,
    Decision,
    DomainInfo,
    FifoQueue,
    Policy,
    VcpuState,
    VmType,
    VtimeQueue,
    YieldReason,
)

__all__ = [
    "__version__",
    "DEFAULT_BASELINE_SCENARIO",
    "DEFAULT_SCENARIO",
    "CounterOf",
    "Cx",
    "Decision",
    "DomainInfo",
    "FifoQueue",
    "InternalError",
    "Policy",
    "PolicyError",
    "ProgressCallback",
    "Report",
    "Scenario",
    "ScenarioError",
    "ScenarioLike",
    "SweepResults",
    "VcpuState",
    "VmType",
    "VtimeQueue",
    "YieldReason",
    "bench",
    "bench_scale",
    "scale_scenario",
    "bench_scenario",
    "policies",
    "read_scenario",
    "run",
    "run_json",
    "run_sweep",
    "validate",
    "workloads",
]

ScenarioLike = Union[str, "os.PathLike[str]", Mapping[str, Any]]
"""A scenario file path, the scenario's TOML text (any `str` containing a newline), or the
scenario as Python data (a `Scenario`, or a dict of its tables)."""

ProgressCallback = Callable[[int, int, float, float], None]
"""Called as `progress(rep, reps, sim_s, horizon_s)` at most every 100 ms of a run; `rep`
counts from 0 and `sim_s` is the simulated time reached in that repetition."""

_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1

MAX_SCENARIO_BYTES = 16 * 1024 * 1024
"""The largest scenario file `read_scenario` reads (16 MiB): far above any real scenario,
low enough that a wrong path (a disk image, /dev/zero) is refused rather than read."""


def _read_bounded(path: Path) -> bytes:
    """The bytes of `path`, refusing more than MAX_SCENARIO_BYTES. A regular file's size is
    checked before reading; anything else (a pipe, a device) is read up to one byte past the
    limit, so that an endless one is refused rather than read for ever."""
    limit = MAX_SCENARIO_BYTES
    with path.open("rb") as file:
        status = os.fstat(file.fileno())
        regular = stat.S_ISREG(status.st_mode)
        if regular and status.st_size > limit:
            raise ScenarioError(
                f"{path}: {status.st_size} bytes, larger than the 16 MiB limit on a scenario file"
            )
        data = file.read(limit + 1)
    if len(data) > limit:
        if regular:  # it grew while being read
            raise ScenarioError(f"{path}: larger than the 16 MiB limit on a scenario file")
        raise ScenarioError(
            f"{path}: not a regular file, and more than the 16 MiB limit on a scenario file "
            "was read from it without reaching its end"
        )
    return data


def _position(text: str, index: int) -> str:
    """`line L, column C` of the character at `index` of `text` (both counting from 1); only
    the column in a text of one line."""
    if "\n" not in text:
        return f"column {index + 1}"
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"line {line}, column {column}"


def _check_text(text: str, label: str | None = None) -> None:
    """Raise `ScenarioError` if `text` cannot be TOML whatever its content: a NUL character
    (TOML forbids it) or a lone surrogate (not a character, so not UTF-8 text). The message
    gives the line and column, after `label` when given (e.g. a file name)."""
    where = f"{label}: " if label else ""
    nul = text.find("\0")
    if nul >= 0:
        raise ScenarioError(f"{where}{_position(text, nul)}: a NUL character, which TOML does not allow")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        code = ord(text[error.start])
        raise ScenarioError(
            f"{where}{_position(text, error.start)}: a lone surrogate U+{code:04X}, which is not a "
            "character (expected UTF-8 text)"
        ) from None


def _check_path(option: str, path: str | os.PathLike[str], hint: str = "") -> Path:
    """`path` as a `Path`, or `ScenarioError` naming `option` if no file can have that name
    (a NUL character, a lone surrogate)."""
    try:
        name = os.fsencode(path)
    except UnicodeEncodeError:
        raise ScenarioError(f"{option}: not a usable file path (a lone surrogate){hint}") from None
    if b"\0" in name:
        raise ScenarioError(f"{option}: not a usable file path (a NUL character){hint}")
    return Path(os.fsdecode(name))


def read_scenario(scenario: ScenarioLike) -> str:
    """The TOML text of `scenario`: text is returned as is, a path is read as UTF-8, Python
    data is rendered (`Scenario.to_toml`).

    Raises `ScenarioError` if a one-line str names no file, `OSError` if a file cannot be
    read, and `ScenarioError` if it is not UTF-8 text, is larger than 16 MiB (`MAX_SCENARIO_BYTES`),
    or holds a NUL character; text with a NUL or a lone surrogate raises `ScenarioError` too,
    and so does data holding a value TOML cannot (naming its path).
    """
    if isinstance(scenario, Mapping):
        return scenario_toml(scenario)
    if isinstance(scenario, str) and "\n" in scenario:
        _check_text(scenario)
        return scenario
    # A one-line str is taken for a path: say so, since it may have been meant as text.
    path = _check_path("scenario", scenario, "; TOML text is recognized by its newline")
    if isinstance(scenario, str) and not path.exists():
        raise ScenarioError(
            f"scenario: {scenario!r} is neither TOML text (text has at least one newline) "
            "nor the path of an existing file"
        )
    data = _read_bounded(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ScenarioError(f"{path}: not UTF-8 text (line {line}, byte {error.start})") from None
    _check_text(text, str(path))
    return text


def _check_int(option: str, value: int | None, low: int, high: int) -> None:
    """Range-check an option the core takes as an unsigned integer, so that the user gets a
    `ScenarioError` naming it rather than an `OverflowError` from the conversion."""
    if value is not None and not low <= value <= high:
        raise ScenarioError(f"{option}: expected an integer from {low} to {high}, got {value}")


def _check_option_text(option: str, value: str | None) -> None:
    if value is not None:
        _check_text(value, option)


def _check_max_memory(value: int) -> None:
    """`max_memory` is bytes, 0 for the core's default budget."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(f"max_memory: expected a number of bytes, got {value!r}")
    _check_int("max_memory", value, 0, _U64_MAX)


def run_json(
    scenario: ScenarioLike,
    *,
    seed: int | None = None,
    reps: int | None = None,
    policy: str | type[Policy] | None = None,
    trace: str | os.PathLike[str] | None = None,
    trace_limit: int = 0,
    progress: ProgressCallback | None = None,
    check: bool = False,
    max_memory: int = 0,
    overrides: Mapping[str, Any] | None = None,
) -> str:
    """Run `scenario` and return the JSON report exactly as the core wrote it.

    `seed` and `reps` override the scenario's `[run]` table; repetition i runs with seed
    `seed + i`. `policy` runs the scenario under that policy, at its default parameters,
    instead of its `[scheduler]`: a registered policy's name, a Python policy's
    `path/to/file.py:ClassName` (relative to the current directory) or a `vsched.Policy`
    subclass. A failure of a Python policy raises `PolicyError` with the policy's exception
    as its `__cause__` and its traceback as `policy_traceback`. `trace` names a file to receive
    the first repetition as Chrome trace-event JSON (docs/traces.md), holding at most
    `trace_limit` events (0 = the core's default bound). `check`
    runs the simulator's invariant checks after every event (slower; for suspicious runs), and
    `max_memory` is the memory budget in bytes the scenario's estimate must fit (0: the
    core's default). `overrides` sets dotted scenario keys for this run, after `policy`, as
    `vsched run --set` does: `{"scheduler.tslice_ms": 10, "vm.spin.vcpus": 2}`. A policy given
    by name takes its parameters with it: `policy="credit(tslice_ms=10)"`. Same scenario and
    seed give the same text, except for wall-clock fields such as `wall_s`.
    """
    _check_int("seed", seed, 0, _U64_MAX)
    _check_int("reps", reps, 1, _U32_MAX)
    _check_int("trace_limit", trace_limit, 0, _U64_MAX)
    if isinstance(policy, str):
        _check_option_text("policy", policy)
    _check_max_memory(max_memory)
    if trace is not None:
        _check_path("trace", trace)
    policy_name, policy_class, policy_dir = _policy.run_arguments(scenario, policy)
    return _core.run(
        _with_overrides(read_scenario(scenario), overrides),
        seed=seed,
        reps=reps,
        policy=policy_name,
        trace=None if trace is None else os.fspath(trace),
        trace_limit=trace_limit,
        progress=progress,
        check=bool(check),
        max_memory=max_memory,
        policy_class=policy_class,
        policy_dir=policy_dir,
    )


def _with_overrides(text: str, overrides: Mapping[str, Any] | None) -> str:
    """`text` with the dotted keys of `overrides` set (`vsched run --set`). A Python policy named
    by a `scheduler.name` override is found from the current directory, as `--policy` is."""
    if not overrides:
        return text
    from vsched.runs import apply_overrides

    if not isinstance(overrides, Mapping):
        raise ScenarioError(f"overrides: expected a dict of dotted keys and values, got {overrides!r}")
    cwd = os.getcwd()
    pairs = [
        (
            key,
            _policy.absolute_name(value, cwd)
            if key == "scheduler.name" and isinstance(value, str)
            else value,
        )
        for key, value in overrides.items()
    ]
    return apply_overrides(text, pairs)


def run(
    scenario: ScenarioLike,
    *,
    seed: int | None = None,
    reps: int | None = None,
    policy: str | type[Policy] | None = None,
    trace: str | os.PathLike[str] | None = None,
    trace_limit: int = 0,
    progress: ProgressCallback | None = None,
    check: bool = False,
    max_memory: int = 0,
    overrides: Mapping[str, Any] | None = None,
) -> Report:
    """Run `scenario` and return the report: `runs[]` (one per repetition, each with `seed`,
    `events`, `wall_s`, `vms[]` and `host`) and `summary` (means and standard deviations, per
    VM and for the host), a dict whose methods `runs()`, `vms()` and `hosts()` give them as
    tables (see `vsched.frames`).

    Arguments as for `run_json`.
    """
    report = Report(
        json.loads(
            run_json(
                scenario,
                seed=seed,
                reps=reps,
                policy=policy,
                trace=trace,
                trace_limit=trace_limit,
                progress=progress,
                check=check,
                max_memory=max_memory,
                overrides=overrides,
            )
        )
    )
    return report


def validate(scenario: ScenarioLike, *, max_memory: int = 0) -> None:
    """Check `scenario` without running it; raises `ScenarioError` if it is invalid or its
    estimated memory exceeds `max_memory` bytes (0: the core's default budget)."""
    _check_max_memory(max_memory)
    _core.validate(
        read_scenario(scenario), max_memory=max_memory, policy_dir=_policy.policy_dir(scenario, None)
    )


def policies() -> list[dict[str, Any]]:
    """The scheduling policies: each with `name`, `description`, `hypervisor`, `base` (the
    policy it is built on, or None) and `params[]` (`name`, `default`, `doc`)."""
    entries: list[dict[str, Any]] = json.loads(_core.policies())
    return entries


def workloads() -> list[dict[str, Any]]:
    """The guest workloads: each with `name`, `description` and `params[]` (`name`,
    `default`, `doc`)."""
    entries: list[dict[str, Any]] = json.loads(_core.workloads())
    return entries


def _check_count(option: str, value: object, most: int) -> None:
    """`value` is an integer in 1..=`most` (a bool is not), or a `ScenarioError` naming
    `option`: the core's own check, made before a value the binding cannot convert."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise ScenarioError(f"{option}: expected an integer in 1..={most}, got {value!r}")


def bench(sim_s: float | None = None, copies: int = 1) -> dict[str, Any]:
    """Run the standard benchmark scenario for `sim_s` simulated seconds (default: the
    core's), its VMs repeated `copies` times (1 to 64), then the bare event loop for as many
    events, and return the figures: among them `events_per_s`, `sim_s_per_wall_s`,
    `ns_per_event` and `vs_bare_loop` (the simulator's events per second over the loop's)."""
    _check_count("--copies", copies, _core.MAX_BENCH_COPIES)
    figures: dict[str, Any] = json.loads(_core.bench(sim_s, copies))
    return figures


def bench_scenario(scenario: ScenarioLike, runs: int = 10, copies: int = 1) -> dict[str, Any]:
    """Run `scenario`, its VMs repeated `copies` times (1 to 64, as `bench` does the standard
    scenario's), `runs` times (1 to `MAX_BENCH_RUNS`) with its own seed, one core, and
    return the wall-clock time of one run: `wall_s_median`, `wall_s_min`, `wall_s_max`, with
    `events`, `ns_per_event` and `sim_s_per_wall_s` at the median. Every run is the same
    simulation, so only its time varies: the way to time a scenario that runs in milliseconds.
    Each run is followed by the bare event loop at the run's mean queue length
    (`queue_len_mean`): `bare_loop_ns_per_event` is its median, `vs_bare_loop` the simulator's
    speed over it, as `vsched bench` reports for the standard scenario.
    Registered policies only (a Python policy's speed is its interpreter's)."""
    _check_count("--runs", runs, _core.MAX_BENCH_RUNS)
    _check_count("--copies", copies, _core.MAX_BENCH_COPIES)
    figures: dict[str, Any] = json.loads(_core.bench_scenario(read_scenario(scenario), runs, copies))
    return figures


def bench_scale(runs: int = 3) -> dict[str, Any]:
    """Run the scale comparisons of `vsched bench --scale` (a host of 512 pCPUs against one of
    8, 2,048 vCPUs on 8 pCPUs against 32, a 256-host cluster against an 8-host one), `runs`
    rounds (1 to `MAX_SCALE_RUNS`) with the runs of all scenarios interleaved, and return
    `scenarios` (each one's `events`, median `cpu_ns_per_event`, the run thread's CPU time,
    and `wall_ns_per_event`) and `ratios` (each comparison's large over small CPU time per
    event, beside issue 59's `target`)."""
    _check_count("--runs", runs, _core.MAX_SCALE_RUNS)
    figures: dict[str, Any] = json.loads(_core.bench_scale(runs))
    return figures


def scale_scenario(name: str) -> str:
    """The TOML text of a scenario of `vsched bench --scale` (`hogs-512p-2048v-credit`, ...),
    or of its cluster at any even number of hosts up to 1,024 (`lu-128hosts-credit`), to run,
    profile or measure on its own. Raises ScenarioError naming `--scale-scenario` otherwise."""
    return _core.scale_scenario(name)


def __getattr__(name: str) -> Any:
    """What `import vsched` leaves out until it is used, so that the package and the command
    line start fast: `run_sweep` (multiprocessing, pyarrow) and `__version__` (package
    metadata)."""
    if name == "run_sweep":
        from vsched.sweep import run_sweep

        return run_sweep
    if name == "__version__":
        return _version()
    raise AttributeError(f"module 'vsched' has no attribute {name!r}")


def _version() -> str:
    """The installed distribution's version, from its metadata: the one source of the version
    that `vsched --version` prints (pyproject.toml takes it from the Rust crate's)."""
    from importlib import metadata

    try:
        return metadata.version("vsched")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


# At the end: these modules use the helpers above.
from vsched.frames import Report, SweepResults  # noqa: E402
from vsched.scenario import Scenario, scenario_toml  # noqa: E402

if TYPE_CHECKING:
    from vsched.sweep import run_sweep as run_sweep

    __version__: str
