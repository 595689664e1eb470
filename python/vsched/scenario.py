"""`vsched.Scenario`: a scenario as Python data, built in code rather than written as TOML.

A `Scenario` is a `dict` holding the scenario's TOML document as Python values: tables are
dicts, arrays of tables (`[[vm]]`) lists of dicts, and keys and values are those of
docs/scenario.md::

    scenario = vsched.Scenario(
        name="two-vms",
        host={"pcpus": 2},
        scheduler={"name": "credit"},
        vm=[
            {"name": "spin", "vcpus": 2, "workload": {"kind": "spinlock", "iterations": 2000}},
            {"name": "hog", "vcpus": 2, "workload": {"kind": "cpu_hog"}},
        ],
        run={"horizon_s": 10, "until": "all_done"},
    )
    scenario["host"]["pcpus"] = 4
    report = vsched.run(scenario, seed=1, reps=3)

It is checked exactly as a scenario file is: `to_toml()` renders it as TOML text (with the
core's writer, the one that writes the variants of a sweep), and that text goes through the
core's validation, so an error names the same field path as for a file
(`vm[0].workload.iterations: ...`). Python values TOML cannot hold (None, a NaN, a key that
is not a string, an integer beyond 64 bits, a set...) are refused while rendering, with a
one-line `ScenarioError` naming their path in the same notation.

Rendering loses the comments of a scenario read with `from_file` or `from_toml`, and the
order of keys within a table (the core writes them sorted); neither changes what the
scenario computes.
"""

from __future__ import annotations

import copy
import json
import math
import numbers
import os
import sys
from collections.abc import Mapping
from typing import Any

import vsched
from vsched import _core

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

# TOML's integers are signed 64-bit.
_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1

# Deepest nesting of tables and arrays accepted: far more than any scenario uses (a VM's
# workload phases are four levels down), and it keeps a table that contains itself from
# recursing for ever.
MAX_DEPTH = 32

_VALUE_KINDS = "a number, string, boolean, array or table"


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _error(path: str, message: str) -> vsched.ScenarioError:
    return vsched.ScenarioError(f"{path or 'scenario'}: {message}")


def _plain(value: Any, path: str, depth: int = 0) -> Any:
    """`value` as plain JSON data (dict, list, str, int, float, bool), or `ScenarioError`
    naming `path` (e.g. `vm[0].workload.iterations`) if TOML cannot hold it. Integer and real
    numbers of other types (numpy's, pandas') become int and float."""
    if depth > MAX_DEPTH:
        raise _error(path, f"expected tables and arrays nested at most {MAX_DEPTH} levels deep")
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _error(path, "expected text, got a string holding a lone surrogate") from None
        return value
    if isinstance(value, numbers.Integral):
        number = int(value)
        if not _I64_MIN <= number <= _I64_MAX:
            raise _error(
                path, f"expected an integer from {_I64_MIN} to {_I64_MAX} (TOML's limit), got {number}"
            )
        return number
    if isinstance(value, numbers.Real):
        real = float(value)
        if not math.isfinite(real):
            raise _error(path, f"expected a finite number, got {real}")
        return real
    if isinstance(value, Mapping):
        table = {}
        for key, child in value.items():
            if not isinstance(key, str):
                raise _error(path, f"expected string keys, got the key {key!r} ({type(key).__name__})")
            table[key] = _plain(child, _child(path, key), depth + 1)
        return table
    if isinstance(value, (list, tuple)):
        return [_plain(element, f"{path}[{index}]", depth + 1) for index, element in enumerate(value)]
    got = "None" if value is None else type(value).__name__
    raise _error(path, f"expected {_VALUE_KINDS}, got {got}")


def scenario_toml(data: Mapping[str, Any]) -> str:
    """The TOML text of a scenario given as Python data (see the module notes); raises
    `ScenarioError` naming the path of a value TOML cannot hold. The text is not validated."""
    if not isinstance(data, Mapping):
        raise vsched.ScenarioError(f"scenario: expected a table (a dict), got {type(data).__name__}")
    plain = _plain(data, "")
    text: str = _core.scenario_toml(json.dumps(plain, ensure_ascii=False))
    return text


class Scenario(dict[str, Any]):
    """A scenario as Python data: a `dict` of its TOML tables (see the module notes).

    `Scenario(data, **fields)` copies `data` (deeply: changing the scenario never changes the
    dicts it was built from), then sets `fields` as top-level keys. Accepted wherever a
    scenario is: `vsched.run`, `vsched.validate`, `vsched.run_sweep`.
    """

    def __init__(self, data: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        super().__init__(copy.deepcopy(dict(data or {})))
        self.update(copy.deepcopy(fields))

    @classmethod
    def from_toml(cls, text: str) -> Scenario:
        """The scenario of TOML `text`; raises `ScenarioError` (with the line and column) if
        it is not TOML. Its content is not validated yet: see `validate`."""
        vsched._check_text(text)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            # The core's parser words the error as for a file run directly.
            _core.validate(text)
            raise vsched.ScenarioError(f"malformed TOML: {error}") from None
        return cls(data)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Scenario:
        """The scenario in the TOML file at `path` (as `vsched.read_scenario` reads it)."""
        return cls.from_toml(vsched.read_scenario(vsched._check_path("scenario", path)))

    def to_toml(self) -> str:
        """The scenario as TOML text, as the core writes it (keys sorted, no comments)."""
        return scenario_toml(self)

    def validate(self, *, max_memory: int = 0) -> None:
        """Raise `ScenarioError` if the scenario is invalid (as `vsched.validate`)."""
        vsched.validate(self, max_memory=max_memory)

    def with_overrides(
        self, overrides: Mapping[str, Any] | None = None, *, policy: str | None = None
    ) -> Scenario:
        """A new scenario with `[scheduler]` replaced by `policy` at its default parameters
        when given, then each dotted key of `overrides` set to its value, by the rules of
        `vsched sweep --set` (`{"scheduler.tslice_ms": 10, "vm.spin.vcpus": 2}`)."""
        from vsched.runs import apply_overrides

        text = apply_overrides(self.to_toml(), list((overrides or {}).items()), policy)
        return Scenario.from_toml(text)

    def copy(self) -> Scenario:
        """A deep copy."""
        return Scenario(self)

    def __repr__(self) -> str:
        return f"Scenario({dict.__repr__(self)})"
