"""`policies`, `workloads`, `bench` (the standard benchmark and a scenario file), `demo`, and the
progress callback of the Python API."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

import pytest

import vsched

from helpers import TINY_SCENARIO, CliResult

Cli = Callable[..., CliResult]


def test_policies_json_lists_every_policy(cli: Cli) -> None:
    result = cli("policies", "--json")

    assert result.exit_code == 0
    policies = json.loads(result.stdout)
    assert policies == vsched.policies()
    coscheduling = {"cosched", "cds", "hybrid", "cs", "pcs", "bcs", "vds", "balance"}
    assert {"rr", "credit"} | coscheduling <= {policy["name"] for policy in policies}
    for policy in policies:
        assert policy["description"]
        for param in policy["params"]:
            assert set(param) == {"name", "default", "min", "max", "doc"}
            if isinstance(param["default"], (bool, str)):
                assert param["min"] is None and param["max"] is None
            else:
                assert param["min"] <= param["default"] <= param["max"]


def test_policy_option_overrides_the_scenario(tiny_scenario: Path) -> None:
    credit = vsched.run(tiny_scenario)
    rr = vsched.run(tiny_scenario, policy="rr")
    assert credit["policy"] == "credit"
    assert rr["policy"] == "rr"
    assert credit["runs"][0]["host"] != rr["runs"][0]["host"]


def test_workloads_json_lists_the_foundation_workloads(cli: Cli) -> None:
    result = cli("workloads", "--json")

    assert result.exit_code == 0
    workloads = json.loads(result.stdout)
    assert {"cpu_hog", "idle", "spinlock", "bsp", "web"} <= {workload["name"] for workload in workloads}
    spinlock = next(workload for workload in workloads if workload["name"] == "spinlock")
    assert {"iterations", "compute_us", "cs_us", "locks", "lock_kind"} <= {
        param["name"] for param in spinlock["params"]
    }


def test_readable_catalogues(cli: Cli) -> None:
    policies = cli("policies")
    workloads = cli("workloads")

    assert policies.exit_code == workloads.exit_code == 0
    assert "credit" in policies.stdout and "tslice_ms" in policies.stdout
    assert "spinlock" in workloads.stdout and "cs_us" in workloads.stdout


def test_bench(cli: Cli) -> None:
    result = cli("bench", "--json", "--sim-s", "0.2")

    assert result.exit_code == 0
    figures = json.loads(result.stdout)
    assert figures["sim_s"] == pytest.approx(0.2)
    assert figures["events"] > 0
    assert figures["events_per_s"] > 0 and figures["sim_s_per_wall_s"] > 0
    # The bare loop ran as many events, at the simulator's mean queue length.
    assert figures["queue_len_mean"] > 0 and figures["bare_loop_events_per_s"] > 0
    # Descheduled vCPUs leave stale guest timers behind: some pops find nothing to do.
    assert 0 < figures["skipped_pops"] < figures["events"]
    assert figures["vs_bare_loop"] == pytest.approx(
        figures["events_per_s"] / figures["bare_loop_events_per_s"]
    )
    readable = cli("bench", "--sim-s", "0.2")
    assert "events_per_s" in readable.stdout and "vs_bare_loop" in readable.stdout


def test_bench_copies_repeat_the_vms(cli: Cli) -> None:
    one = json.loads(cli("bench", "--json", "--sim-s", "0.05").stdout)
    three = json.loads(cli("bench", "--json", "--sim-s", "0.05", "--copies", "3").stdout)
    # Four guest VMs of 8 vCPUs per copy, beside Domain-0's 8.
    assert (one["copies"], one["vcpus"]) == (1, 40)
    assert (three["copies"], three["vcpus"]) == (3, 104)


def test_bench_times_a_scenario_file_over_its_runs(cli: Cli, tiny_scenario: Path) -> None:
    figures = json.loads(cli("bench", tiny_scenario, "--runs", "3", "--json").stdout)

    # Every run is the same simulation (the scenario's seed): the report's event count.
    assert figures["runs"] == 3
    assert figures["events"] == vsched.run(tiny_scenario)["runs"][0]["events"] > 0
    assert 0 < figures["wall_s_min"] <= figures["wall_s_median"] <= figures["wall_s_max"]
    assert figures["ns_per_event"] == pytest.approx(figures["wall_s_median"] * 1e9 / figures["events"])
    # The bare loop ran at the simulator's queue length: the yardstick `vsched bench` uses.
    assert figures["queue_len_mean"] >= 1 and figures["bare_loop_ns_per_event"] > 0
    assert figures["vs_bare_loop"] == pytest.approx(
        figures["bare_loop_ns_per_event"] / figures["ns_per_event"]
    )
    assert vsched.bench_scenario(TINY_SCENARIO, runs=1)["runs"] == 1
    readable = cli("bench", tiny_scenario, "--runs", "2")
    assert "2 runs" in readable.stdout
    # --copies repeats the file's VMs, as it does the standard scenario's.
    doubled = json.loads(cli("bench", tiny_scenario, "--runs", "1", "--copies", "2", "--json").stdout)
    assert (figures["copies"], doubled["copies"]) == (1, 2)
    assert (figures["vcpus"], doubled["vcpus"]) == (4, 8)  # two 2-vCPU VMs, no Domain-0
    for figure in ("wall_s_median", "queue_len_mean", "bare_loop_ns_per_event", "vs_bare_loop"):
        assert figure in readable.stdout


def test_demo_runs_and_explains(cli: Cli) -> None:
    result = cli("demo")

    assert result.exit_code == 0, result.stderr
    report = vsched.run(vsched.DEFAULT_SCENARIO)
    for vm in report["runs"][0]["vms"]:
        assert vm["name"] in result.stdout
    for explained in ("lock-holder preemption", "spin_s", "steal_s", "lock_holder_preemptions"):
        assert explained in result.stdout

    # The slowdown against the baseline is computed from the two reports, seed by seed.
    # A run that does not finish (a ticket-lock convoy) is a lower bound: the horizon.
    def spin(run: dict[str, Any]) -> dict[str, Any]:
        return next(vm for vm in run["vms"] if vm["workload"] == "spinlock")

    baseline = vsched.run(vsched.DEFAULT_BASELINE_SCENARIO)
    text = " ".join(result.stdout.split())
    for run, alone_run in zip(report["runs"], baseline["runs"], strict=True):
        crowded, alone = spin(run)["completion_s"], spin(alone_run)["completion_s"]
        if crowded is None:
            assert f"more than {run['sim_s'] / alone:.0f}x (seed {run['seed']}, unfinished)" in text
        else:
            assert f"{crowded / alone:.1f}x (seed {run['seed']})" in text
    # The fair-share slowdown is the report's own: the CPU the VM keeps busy alone (a pCPU per
    # vCPU) over the share of the host it is entitled to here.
    entitled = sum(spin(run)["entitled_share"] for run in report["runs"]) / len(report["runs"])
    fair = min(spin(report["runs"][0])["vcpus"], report["pcpus"]) / report["pcpus"] / entitled
    assert f"(entitled_share, {entitled:.1%}) would make it about {fair:.1f}x slower" in text
    # The legend explains the fields the table shows (spin_share among them), no others.
    assert "spin_share" in text and "entitled_share" in text
    assert "lock_waiter_preemptions" not in text
    # Every seed of the demo finishes (its lock is glibc's test-and-set spinlock: no convoy).
    assert all(spin(run)["completion_s"] is not None for run in report["runs"])
    # The suggested Gantt chart is a window around a preempted lock holder of the first run.
    assert "To see a preempted lock holder: in seed 1's run, spin.v" in text
    assert re.search(r"vsched plot-trace t\.json --start-ms \d+ --end-ms \d+ -o gantt\.png", text)


def test_the_demo_finds_a_preempted_holder_in_a_trace(tmp_path: Path) -> None:
    from vsched.demo import gantt_window, preempted_holders

    def track(tid: int, name: str) -> dict[str, object]:
        return {"ph": "M", "name": "thread_name", "pid": 2, "tid": tid, "args": {"name": name}}

    def ran(vcpu: str, ts: float, dur: float, cat: str = "run") -> dict[str, object]:
        return {"ph": "X", "pid": 0, "tid": 0, "name": vcpu, "cat": cat, "ts": ts, "dur": dur, "args": {}}

    def preempted(tid: int, ts: float) -> dict[str, object]:
        return {"ph": "i", "pid": 2, "tid": tid, "name": "lock-holder preemption", "ts": ts, "s": "t"}

    events = [
        track(10, "spin.v0"),
        track(11, "spin.v1"),
        track(12, "other.v0"),
        preempted(12, 500.0),  # another VM's: not asked for
        preempted(10, 1_000.0),  # spin.v0 at 1 ms, nobody spins meanwhile
        ran("spin.v0", 2_000.0, 100.0),  # back at 2 ms
        preempted(10, 10_000.0),  # spin.v0 again at 10 ms
        ran("spin.v1", 10_500.0, 4_000.0, "spin"),  # its sibling spins 4 ms
        ran("spin.v1", 20_000.0, 9_000.0, "spin"),  # and 1 ms more before v0 is back
        ran("spin.v0", 21_000.0, 100.0),
    ]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": events}), encoding="utf-8")

    holders = list(preempted_holders(trace, {"spin"}))
    assert [(h.vcpu, h.preempted_ms, h.resumed_ms, h.siblings_spin_ms) for h in holders] == [
        ("spin.v0", 1.0, 2.0, 0.0),
        ("spin.v0", 10.0, 21.0, 5.0),
    ]
    # The window shows the one that made a sibling spin, with 5 ms on either side.
    window = gantt_window(iter(holders))
    assert window is not None and window[1:] == (5.0, 26.0)
    assert gantt_window(iter([])) is None


def test_demo_says_no_lock_holder_was_preempted_only_when_none_was() -> None:
    from vsched.demo import conclusion

    def said(holder: int, waiter: int) -> bool:
        vm = {
            "name": "spin",
            "vcpus": 4,
            "cpu_s": 2.0,
            "spin_s": 1.0,
            "steal_s": 1.0,
            "completion_s": 3.0,
            "runs_finished": 1,
            "lock_holder_preemptions": holder,
            "lock_waiter_preemptions": waiter,
        }
        report = {"runs": [{"sim_s": 4.0, "vms": [vm]}], "summary": {"vms": [{}]}}
        return any("No lock holder was preempted" in str(p) for p in conclusion(report))

    assert said(0, 0)
    assert not said(3, 0)
    assert not said(0, 5)


def test_demo_prints_its_scenario(cli: Cli, tmp_path: Path) -> None:
    result = cli("demo", "--print-scenario")

    assert result.exit_code == 0
    assert result.stdout == vsched.DEFAULT_SCENARIO
    saved = tmp_path / "demo.toml"
    saved.write_text(result.stdout, encoding="utf-8")
    vsched.validate(saved)


# A lock-heavy VM alone for a simulated minute: about half a second of wall-clock time, long
# enough for progress reports, which come at most every 100 ms.
PROGRESS_SCENARIO = (
    TINY_SCENARIO.replace('kind = "cpu_hog"', 'kind = "idle"')
    .replace("iterations = 200", "iterations = 1000000000")
    .replace("horizon_s = 0.5", "horizon_s = 60")
)


def test_progress_reports_rep_and_simulated_time() -> None:
    calls: list[tuple[int, int, float, float]] = []

    vsched.run(PROGRESS_SCENARIO, reps=2, progress=lambda *args: calls.append(args))

    assert calls, "the run was too short to report progress"
    for rep, reps, sim_s, horizon_s in calls:
        assert reps == 2 and 0 <= rep < 2
        assert horizon_s == 60
        assert 0 <= sim_s <= horizon_s
    assert calls == sorted(calls)  # time only moves forward


def test_exception_in_progress_callback_stops_the_run() -> None:
    class Stop(Exception):
        pass

    def stop(rep: int, reps: int, sim_s: float, horizon_s: float) -> None:
        raise Stop(f"stopped at {sim_s}")

    with pytest.raises(Stop):
        vsched.run(PROGRESS_SCENARIO, progress=stop)


def test_progress_must_be_callable() -> None:
    with pytest.raises(TypeError):
        vsched.run(TINY_SCENARIO, progress=42)  # type: ignore[arg-type]


def test_help_shows_table_names_in_brackets(cli: Cli) -> None:
    # Rich takes `[scheduler]` for markup unless it is escaped; the help once read
    # "instead of the scenario's ." (issue 19's small frictions).
    result = cli("run", "--help")
    assert result.exit_code == 0
    assert "[scheduler]" in result.stdout


def test_one_line_text_that_names_no_file_is_a_scenario_error() -> None:
    with pytest.raises(vsched.ScenarioError, match="neither TOML text .* nor the path of an existing file"):
        vsched.run("not toml [")
