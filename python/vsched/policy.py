"""Scheduling policies written in Python: subclass `Policy`, run it with
`vsched run SCENARIO --policy path/to/file.py:ClassName` or `vsched.run(scenario, policy=ClassName)`.

The callbacks are the Rust `Policy` trait's (crates/vsched-model/src/policy.rs), one to one by
name and arguments, and `cx` offers the Rust `Cx`'s methods (crates/vsched-model/src/cx.rs)
under the same names; the engine, the validation of decisions and the report are the same
as for a policy written in Rust. docs/python-policies.md has a complete example and the
contract of each callback.

A policy class is named `FILE.py:CLASS`. In a scenario's `[scheduler] name`, a relative FILE
is relative to the scenario file's directory; given as `--policy` (or `policy=` in the API),
to the current directory. The `[scheduler]` table's other keys are passed to the class as
keyword arguments. The file is loaded anew for every run, so an edit takes effect at the
next run.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import ClassVar

from vsched._core import (
    CounterOf,
    Cx,
    Decision,
    DomainInfo,
    FifoQueue,
    Paravirt,
    Rng,
    ScenarioError,
    VcpuState,
    VmType,
    VtimeQueue,
    YieldReason,
)

__all__ = [
    "CounterOf",
    "Cx",
    "Decision",
    "DomainInfo",
    "FifoQueue",
    "Paravirt",
    "Policy",
    "Rng",
    "VcpuState",
    "VmType",
    "VtimeQueue",
    "YieldReason",
]

HYPERVISORS = ("generic", "xen", "kvm")
"""What `Policy.hypervisor` may be (the Rust `Hypervisor`)."""

REQUIRED_CALLBACKS = ("vcpu_insert", "wake", "pick_next")
"""The callbacks without a default, as in the Rust trait."""


class Policy:
    """A vCPU scheduling policy: subclass it and define at least `vcpu_insert`, `wake` and
    `pick_next`. Every other callback does nothing by default (and is not called unless the
    subclass defines it). `here` below is the pCPU the callback runs on, if any
    (`cx.here()`); ids are the host's, from 0.

    The methods `tick_period_ns`, `ticks_aligned`, `ple_window_grow`, `preempt_delay_ns`,
    `timer_slop_ns` and `supports_vm_lifecycle` are read once, when an instance is built
    (before `init`): return constants. `__init__` receives the scenario's `[scheduler]` keys
    other than `name` as keyword arguments.
    """

    hypervisor: ClassVar[str] = "generic"
    """The hypervisor this policy is the scheduler of: "generic" (a bare host), "xen" (the host
    boots a Domain-0 with one vCPU per pCPU) or "kvm"."""

    def admit(self, pcpus: int, domains: list[DomainInfo]) -> str | None:
        """Before the run: None if the policy can run these domains on `pcpus` pCPUs, else a
        one-line reason (the scenario is refused with it)."""
        return None

    def init(self, cx: Cx) -> None:
        """Once, when the host and its domains exist, before any vCPU is inserted: set up
        per-pCPU and per-domain state and the first timers."""

    def tick_period_ns(self) -> int | None:
        """The period of the per-pCPU `tick`, or None for a tickless policy."""
        return None

    def ticks_aligned(self) -> bool:
        """Whether every pCPU's tick falls at the same instants (Linux) or drifts (Xen)."""
        return False

    def ple_window_grow(self) -> int:
        """How the PLE window grows at each pause-loop exit: 1 fixed (Xen), 2 KVM's."""
        return 1

    def preempt_delay_ns(self) -> int:
        """How long a reschedule is put off inside a guest's marked critical section (0: never)."""
        return 0

    def timer_slop_ns(self) -> int:
        """How late timers may fire, in ns (Xen's timer_slop is 50 µs)."""
        return 0

    def supports_vm_lifecycle(self) -> bool:
        """Whether the policy handles VMs created and destroyed during a run."""
        return False

    def vcpu_insert(self, cx: Cx, v: int) -> None:
        """`v` was created runnable: queue it; the policy owns it until `pick_next` returns it."""
        raise NotImplementedError("every policy defines vcpu_insert")

    def vcpu_remove(self, cx: Cx, v: int) -> None:
        """`v`'s VM is being destroyed (`v` is offline, not running): dequeue and forget it."""

    def wake(self, cx: Cx, v: int) -> None:
        """`v` was blocked and is runnable again: queue it; kick a pCPU if it should run soon."""
        raise NotImplementedError("every policy defines wake")

    def sleep(self, cx: Cx, v: int) -> None:
        """`v` blocked while running on `here`; `pick_next(here, v)` follows. Do not queue it."""

    def yield_(self, cx: Cx, v: int, why: YieldReason) -> None:
        """`v`, running on `here`, yields (`why`); it keeps running unless the policy calls
        `cx.resched(here)` (or `cx.resched_here()`)."""

    def pick_next(self, cx: Cx, pcpu: int, prev: int | None) -> Decision:
        """`pcpu` needs a decision; `prev` ran on it (maybe no longer runnable). Return
        `Decision.run(v, slice_ns)` with a runnable vCPU not running elsewhere (or `prev`), or
        `Decision.idle()`; keep a runnable `prev` that is not returned queued."""
        raise NotImplementedError("every policy defines pick_next")

    def tick(self, cx: Cx, pcpu: int) -> None:
        """The periodic tick on `pcpu` (see `tick_period_ns`)."""

    def timer(self, cx: Cx, id: int) -> None:
        """A timer set with `cx.set_timer(at, id)` fired."""

    def vm_type_changed(self, cx: Cx, d: int, old: VmType) -> None:
        """Domain `d` changed type (it was `old`; `cx.domain(d).vm_type` is the new one)."""

    def check(self, cx: Cx) -> str | None:
        """The policy's invariants, checked after every event with `--check`: None if they
        hold, else what is broken. `cx` may only be read here."""
        return None


# The end of a policy's name where its parameters start: `credit(tslice_ms=10)`.
_NAME_END = re.compile(r"[A-Za-z0-9_-]+$")


def split_params(spec: str) -> tuple[str, str]:
    """A policy given with its parameters, `NAME(KEY=VALUE, ...)`, as (NAME, "(KEY=VALUE, ...)");
    (spec, "") without them. The core's rule (crates/vsched/src/policy_spec.rs): they start at
    the first `(` that follows a whole name, so a parenthesis in a file's path is not one."""
    for index, char in enumerate(spec):
        if char == "(" and _NAME_END.search(spec[:index].rsplit(":", 1)[-1]):
            return spec[:index].strip(), spec[index:]
    return spec, ""


def split_policies(text: str) -> list[str]:
    """A comma-separated list of policies (`--policy credit(tslice_ms=10),cfs`), split at the
    commas outside parentheses, brackets and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for index, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def is_python_policy(name: str) -> bool:
    """Whether a policy name names a Python class (`FILE.py:CLASS`, perhaps with parameters)
    rather than a registered policy: the core's rule, a `:` in the name."""
    return ":" in split_params(name)[0]


def policy_name(policy_class: type[Policy]) -> str:
    """The name a class given as an object runs under, and the report shows: `FILE.py:CLASS`,
    FILE relative to the current directory, as `vsched run --policy FILE.py:CLASS` names it
    there, so that one policy has one label whether it is run by the command line or through
    the API; `MODULE:CLASS` for a class without a source file (defined in a notebook)."""
    source = getattr(sys.modules.get(policy_class.__module__), "__file__", None)
    if isinstance(source, str) and source.endswith(".py"):
        try:
            return f"{os.path.relpath(source)}:{policy_class.__qualname__}"
        except ValueError:  # on another drive than the current directory
            return f"{source}:{policy_class.__qualname__}"
    return f"{policy_class.__module__}:{policy_class.__qualname__}"


def split_name(name: str) -> tuple[str, str]:
    """`FILE.py:CLASS` as (FILE, CLASS); ScenarioError if it has not that form."""
    path, _, class_name = name.rpartition(":")
    if not path.endswith(".py") or not class_name.isidentifier():
        raise ScenarioError(f"{name!r}: expected a Python policy as path/to/file.py:ClassName")
    return path, class_name


def absolute_name(name: str, base_dir: str | os.PathLike[str]) -> str:
    """`name` with its file made absolute against `base_dir` (any other name as it is), so
    that it means the same file in a process with another current directory. A malformed
    name is left as it is, for the core to refuse naming the field."""
    if not is_python_policy(name):
        return name
    base, params = split_params(name)
    try:
        path, class_name = split_name(base)
    except ScenarioError:
        return name
    return f"{Path(base_dir, path).resolve()}:{class_name}{params}"


def file_digest(name: str) -> str:
    """SHA-256 of the file an absolute `FILE.py:CLASS` name names ("" for another name or a
    file that cannot be read): part of a job's identity, so that editing the policy reruns it."""
    if not is_python_policy(name):
        return ""
    import hashlib  # here, not at start-up: it loads OpenSSL

    try:
        return hashlib.sha256(Path(split_name(split_params(name)[0])[0]).read_bytes()).hexdigest()
    except (OSError, ScenarioError):
        return ""


def load_class(name: str, base_dir: str) -> type[Policy]:
    """The class `FILE.py:CLASS` names, FILE relative to `base_dir`, loaded anew and checked
    (`check_class`). Every failure is a ScenarioError without the field, which the caller names."""
    path_text, class_name = split_name(name)
    path = Path(base_dir, path_text)
    if not path.is_file():
        raise ScenarioError(f"{path_text}: no such file (looked in {path.parent.resolve()})")
    import hashlib

    module_name = "vsched_policy_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ScenarioError(f"{path_text}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as an import would (dataclasses and pickle look it up).
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        raise ScenarioError(
            f"{path_text}: SyntaxError: {error.msg} ({_shown(error.filename)}, line {error.lineno})"
        ) from None
    except Exception as error:
        raise ScenarioError(f"{path_text}: loading it raised {_describe(error)}") from None
    found = getattr(module, class_name, None)
    if found is None:
        classes = sorted(
            n
            for n, v in vars(module).items()
            if isinstance(v, type) and issubclass(v, Policy) and v is not Policy
        )
        expected = (
            f"expected one of {', '.join(classes)}" if classes else "it defines no vsched.Policy subclass"
        )
        raise ScenarioError(f"{path_text}: no class {class_name!r}; {expected}")
    return check_class(found, f"{path_text}:{class_name}")


def check_class(candidate: object, label: str) -> type[Policy]:
    """`candidate` if it is a usable policy class, else ScenarioError naming `label`."""
    if not (isinstance(candidate, type) and issubclass(candidate, Policy)):
        shown = f"class {candidate.__qualname__}" if isinstance(candidate, type) else repr(candidate)
        raise ScenarioError(f"{label}: expected a subclass of vsched.Policy, got {shown}")
    missing = [name for name in REQUIRED_CALLBACKS if getattr(candidate, name) is getattr(Policy, name)]
    if missing:
        raise ScenarioError(f"{label}: does not define {', '.join(missing)}, which every policy must")
    if candidate.hypervisor not in HYPERVISORS:
        raise ScenarioError(
            f"{label}.hypervisor: expected one of {', '.join(HYPERVISORS)}, got {candidate.hypervisor!r}"
        )
    return candidate


def _resolve(name: str, base_dir: str, given: type[Policy] | None) -> type[Policy]:
    """The core's way in (crates/vsched-py/src/py_policy.rs): the class for scheduler `name`."""
    if given is not None:
        return check_class(given, name)
    return load_class(name, base_dir)


@cache
def _library_dirs() -> tuple[str, ...]:
    """Where the Python installation's own modules live: frames there are not the policy's code."""
    import sysconfig

    paths = sysconfig.get_paths()
    return tuple(
        {
            str(Path(p).resolve())
            for key in ("stdlib", "platstdlib", "purelib", "platlib")
            if (p := paths.get(key))
        }
    )


def _shown(filename: str | None) -> str:
    """A file name as short as it is clear: relative to the current directory if inside it."""
    if not filename:
        return "?"
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive
        return filename
    return filename if relative.startswith("..") else relative


def _policy_frame(tb: TracebackType | None) -> tuple[str, int] | None:
    """The innermost frame of `tb` in the user's code (not the Python installation's)."""
    found = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not str(Path(filename).resolve()).startswith(_library_dirs()) or found is None:
            found = (filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


def _describe(error: BaseException) -> str:
    """One line: `TypeError: message (file.py, line 12)`, the line the policy's own code
    raised at (or called what raised)."""
    message = " ".join(str(error).split())
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    frame = _policy_frame(error.__traceback__)
    return f"{text} ({_shown(frame[0])}, line {frame[1]})" if frame else text


def _traceback(error: BaseException) -> str:
    """The traceback of an exception a callback raised: the policy's frames only, since
    callbacks are called from the core, not from Python."""
    import traceback

    return "".join(traceback.format_exception(type(error), error, error.__traceback__))


def scenario_file(scenario: object) -> str | None:
    """The path a scenario given as a file names (a path, or a one-line str: see
    `vsched.read_scenario`); None for TOML text or a scenario built in Python."""
    if isinstance(scenario, os.PathLike) or (isinstance(scenario, str) and "\n" not in scenario):
        return os.fsdecode(scenario)
    return None


def policy_dir(scenario: object, policy: object) -> str:
    """The directory a relative policy file is found in: the scenario file's for the name in
    its `[scheduler]`, the current directory for a name given as `policy`, in TOML text or in
    a scenario built in Python (`vsched.Scenario`, a dict)."""
    path = scenario_file(scenario)
    if policy is None and path is not None:
        return str(Path(path).resolve().parent)
    return os.getcwd()


def run_arguments(
    scenario: object, policy: str | type[Policy] | None
) -> tuple[str | None, type[Policy] | None, str]:
    """The core's policy arguments (`policy`, `policy_class`, `policy_dir`) for a run of
    `scenario` (a path or TOML text) under `policy`: a name, a class, or None for the
    scenario's own."""
    if isinstance(policy, type):
        return policy_name(policy), policy, os.getcwd()
    if policy is not None and not isinstance(policy, str):
        raise ScenarioError(f"policy: expected a policy name or a vsched.Policy subclass, got {policy!r}")
    return policy, None, policy_dir(scenario, policy)
