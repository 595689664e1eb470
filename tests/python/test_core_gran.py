"""Xen core scheduling (`[host] sched_gran`) through the Python API: its counters reach the
report, no core is shared between VMs, and bad values are refused naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

import vsched

LOCK_PAIRS = Path(__file__).resolve().parents[2] / "scenarios" / "core-sched" / "lock-pairs.toml"
BRIEF = {"run.horizon_s": 0.2, "run.until": "horizon"}


def test_core_granularity_reports_its_counters_and_never_mixes_vms() -> None:
    host = vsched.run(LOCK_PAIRS, reps=1, overrides=BRIEF)["runs"][0]["host"]
    counters = host["policy_counters"]
    assert counters["sched_gran.rendezvous"] > 0
    assert "sched_gran.rendezvous_wait_ns" in counters
    assert host["smt_cross_vm_s"] == 0.0


def test_cpu_granularity_has_no_rendezvous() -> None:
    overrides = {**BRIEF, "host.sched_gran": "cpu"}
    host = vsched.run(LOCK_PAIRS, reps=1, overrides=overrides)["runs"][0]["host"]
    assert not any(k.startswith("sched_gran.") for k in host["policy_counters"])
    assert host["smt_cross_vm_s"] > 0.0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"host.sched_gran": "thread"}, 'expected "cpu", "core" or "socket"'),
        ({"scheduler.name": "rr"}, "credit and credit2 only"),
        ({"scheduler.xen_version": "4.1"}, "4.13"),
    ],
)
def test_bad_granularities_are_refused(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(vsched.ScenarioError, match="host.sched_gran") as e:
        vsched.run(LOCK_PAIRS, reps=1, overrides=overrides)
    assert message in str(e.value)
    assert "\n" not in str(e.value)
