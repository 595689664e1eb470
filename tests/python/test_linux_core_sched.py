"""Linux core scheduling (`[scheduler] core_sched = "vm"`) through the Python API and the CLI:
its figures reach the report, no core runs two VMs beyond a reschedule's latency, the trace
has the forced-idle tracks, and bad values are refused naming the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

import vsched

from helpers import CliResult

Cli = Callable[..., CliResult]

LOCK_PAIRS = Path(__file__).resolve().parents[2] / "scenarios" / "core-sched" / "linux-lock-pairs.toml"
BRIEF = {"run.horizon_s": 0.2, "run.until": "horizon"}


def _run(**overrides: object) -> dict:
    return vsched.run(LOCK_PAIRS, reps=1, overrides={**BRIEF, **overrides})["runs"][0]


@pytest.mark.parametrize("policy", ["cfs", "eevdf", "kvm-dy", "kvm-eevdf"])
def test_core_scheduling_reports_forced_idle_and_keeps_vms_apart(policy: str) -> None:
    on = _run(**{"scheduler.name": policy})
    off = _run(**{"scheduler.name": policy, "scheduler.core_sched": "off"})
    assert "core_sched.forced_idle_ns" in on["host"]["policy_counters"]
    for vm in on["vms"]:
        assert vm["policy_metrics"]["core_forceidle_sum_s"] >= 0.0
    # Two VMs share a core only while a reschedule IPI is on its way (tens of µs in all);
    # without core scheduling, for a large part of the run.
    assert on["host"]["smt_cross_vm_s"] * 100 < off["host"]["smt_cross_vm_s"]
    assert not any(k.startswith("core_sched.") for k in off["host"]["policy_counters"])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"scheduler.core_sched": "on"}, '"off", "vm"'),
        ({"scheduler.kvm_version": "5.4"}, "5.14"),
    ],
)
def test_bad_core_sched_is_refused(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(vsched.ScenarioError, match="core_sched") as e:
        _run(**overrides)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_the_trace_has_forced_idle_tracks(cli: Cli, tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    result = cli("run", LOCK_PAIRS, "--reps", "1", "--set", "run.horizon_s=0.05", "--trace", trace)
    assert result.exit_code == 0, result.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    forced = [e for e in events if e.get("ph") == "C" and e.get("name") == "forced idle"]
    assert forced, "no forced idle counter events"
    assert {v for e in forced for v in e["args"].values()} <= {0, 1}
