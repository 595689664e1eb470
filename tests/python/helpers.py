"""Test helpers shared by the test modules: tiny scenarios and report utilities."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Two VMs on two pCPUs for half a simulated second: enough to exercise locks, steal and
# preemption, small enough that a run takes milliseconds.
TINY_SCENARIO = """\
name = "tiny"

[host]
pcpus = 2
dom0_vcpus = 0   # the two VMs are the whole world (Credit's host would add a Domain-0)

[scheduler]
name = "credit"

[[vm]]
name = "locker"
vcpus = 2
[vm.workload]
kind = "spinlock"
iterations = 200
compute_us = 50
cs_us = 10

[[vm]]
name = "hog"
vcpus = 2
[vm.workload]
kind = "cpu_hog"

[run]
horizon_s = 0.5
seed = 3
"""

# Three vCPUs contending for a ticket lock on two pCPUs: about 0.2 s of wall time per run,
# long enough to interrupt a sweep or kill it mid-run.
SLOW_SCENARIO = """\
name = "slow"
[host]
pcpus = 2
[scheduler]
name = "credit"
[[vm]]
name = "locker"
vcpus = 3
[vm.workload]
kind = "spinlock"
iterations = 30000
[run]
horizon_s = 100
"""

WALL_CLOCK_FIELDS = frozenset({"wall_s"})


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def stderr_lines(self) -> list[str]:
        return self.stderr.splitlines()


def without_wall_clock(value: Any) -> Any:
    """The report with its wall-clock fields removed: what determinism promises to keep."""
    if isinstance(value, dict):
        return {key: without_wall_clock(item) for key, item in value.items() if key not in WALL_CLOCK_FIELDS}
    if isinstance(value, list):
        return [without_wall_clock(item) for item in value]
    return value
