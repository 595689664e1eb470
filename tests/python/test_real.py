"""`vsched real`: scenarios on real vCPUs (docs/real-vcpus.md).

Three groups: bad input, refused on any machine with one line and exit 2; the command on the
fake backend (`VSCHED_REAL_BACKEND=fake`: vCPUs as busy host threads), which runs anywhere;
and runs on real KVM vCPUs, skipped (not failed) where this machine cannot run them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

import vsched
import vsched.real
import vsched.trace_reader

from helpers import CliResult

Cli = Callable[..., CliResult]

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios" / "real"
UNAVAILABLE = vsched.real.unavailable_reason()
needs_kvm = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"no real vCPUs here: {UNAVAILABLE}")

HOG_AND_SPIN = """\
name = "two"
[host]
pcpus = 1
dom0_vcpus = 0
[scheduler]
name = "rr"
[[vm]]
name = "spin"
vcpus = 1
[vm.workload]
kind = "spinlock"
mode = "user"
[[vm]]
name = "hog"
vcpus = 1
[vm.workload]
kind = "cpu_hog"
[run]
horizon_s = 60
until = "all_done"
"""


def scenario_file(tmp_path: Path, text: str = HOG_AND_SPIN, old: str = "", new: str = "") -> Path:
    if old:
        assert old in text
        text = text.replace(old, new, 1)
    path = tmp_path / "scenario.toml"
    path.write_text(text, encoding="utf-8")
    return path


def refusal(result: CliResult) -> str:
    """The one line of a refusal: exit 2, nothing on stdout, no traceback."""
    assert result.exit_code == 2, result
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert len(result.stderr_lines) == 1, result.stderr
    assert result.stderr_lines[0].startswith("error: ")
    return result.stderr_lines[0][len("error: ") :]


# ---- Bad input, on any machine ----


def test_a_missing_kvm_device_is_one_line(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VSCHED_KVM_DEVICE", "/nonexistent")
    message = refusal(cli("real", scenario_file(tmp_path)))
    assert message.startswith("real vCPUs need KVM, and /nonexistent cannot be opened"), message


def test_a_workload_the_machine_cannot_run_is_named(cli: Cli, tmp_path: Path) -> None:
    path = scenario_file(tmp_path, old='kind = "spinlock"\nmode = "user"', new='kind = "web"')
    assert refusal(cli("real", path)).startswith("vm[0].workload"), path.read_text()


def test_more_pcpus_than_host_cpus_are_refused(cli: Cli, tmp_path: Path) -> None:
    usable = len(os.sched_getaffinity(0))
    path = scenario_file(tmp_path, old="pcpus = 1", new=f"pcpus = {usable + 1}")
    assert refusal(cli("real", path)) == (
        f"host.pcpus: expected at most {usable}, the host CPUs this process may use (each pCPU is one of"
        f" them), got {usable + 1}"
    )


def test_more_vcpus_than_the_machine_takes_are_refused_naming_the_vm(cli: Cli, tmp_path: Path) -> None:
    # 32 vCPUs per host CPU at most (admission.rs): one 32-vCPU VM per host CPU fits, and
    # the next one crosses the bound.
    usable = len(os.sched_getaffinity(0))
    vms = "".join(
        f'[[vm]]\nname = "v{i}"\nvcpus = 32\n[vm.workload]\nkind = "cpu_hog"\n' for i in range(usable + 1)
    )
    text = f'[host]\npcpus = 1\ndom0_vcpus = 0\n[scheduler]\nname = "rr"\n{vms}[run]\nhorizon_s = 1\n'
    assert refusal(cli("real", scenario_file(tmp_path, text))) == (
        f"vm[{usable}].vcpus: expected at most {32 * usable} vCPUs in all on real vCPUs (32 per host CPU this"
        f" process may use, {usable} here), got {32 * (usable + 1)} with this VM's"
    )
    # A virtual cluster's VMs come after the [[vm]] tables and are named by their cluster.
    cluster = '[[virtual_cluster]]\nname = "c"\nvcpus = 32\nhosts = [0, 0]\n'
    cluster += '[virtual_cluster.workload]\nkind = "npb-ep"\n'
    first = 'vcpus = 32\n[vm.workload]\nkind = "cpu_hog"\n'
    text = '[host]\npcpus = 1\ndom0_vcpus = 0\n[scheduler]\nname = "rr"\n'
    text += "".join(f'[[vm]]\nname = "v{i}"\n{first}' for i in range(usable - 1)) + cluster
    assert refusal(cli("real", scenario_file(tmp_path, text))).startswith(
        "virtual_cluster[0].vcpus: expected at most"
    )


def test_more_guest_memory_than_the_machine_has_is_refused(cli: Cli, tmp_path: Path) -> None:
    available = next(
        int(line.split()[1]) * 1024
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemAvailable:")
    )
    vms = available // (16 << 30) + 2  # VMs of 16 GiB each (the largest --memory-per-vm) that do not fit
    body = "".join(f'[[vm]]\nname = "v{i}"\nvcpus = 1\n[vm.workload]\nkind = "cpu_hog"\n' for i in range(vms))
    text = f'[host]\npcpus = 1\ndom0_vcpus = 0\n[scheduler]\nname = "rr"\n{body}[run]\nhorizon_s = 1\n'
    message = refusal(cli("real", scenario_file(tmp_path, text), "--memory-per-vm", "16G"))
    assert message.startswith("--memory-per-vm: expected at most "), message
    assert f"the {vms} VMs' guest memory must fit in the " in message and message.endswith("got 16384 MiB")


SPIN_VM = 'vcpus = 1\n[vm.workload]\nkind = "spinlock"'
HOG_VM = 'vcpus = 1\n[vm.workload]\nkind = "cpu_hog"'


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("dom0_vcpus = 0\n", "", "host.dom0_vcpus: expected 0"),
        (SPIN_VM, SPIN_VM.replace("\n", "\npv_spinlocks = true\n", 1), "vm[0].pv_spinlocks: expected false"),
        (HOG_VM, HOG_VM.replace("\n", "\nstop_s = 1\n", 1), "vm[1].stop_s"),
        ("[run]", "[cluster]\nhosts = 2\n[run]", "cluster.hosts: expected 1"),
    ],
)
def test_what_real_vcpus_do_not_model_is_refused_naming_the_field(
    cli: Cli, tmp_path: Path, old: str, new: str, field: str
) -> None:
    # A host gets a driver domain by default under a Xen policy only; VMs destroyed mid-run
    # need a policy that handles them, as credit does.
    xen = field.startswith(("host.dom0", "vm[1].stop_s"))
    text = HOG_AND_SPIN.replace('name = "rr"', 'name = "credit"') if xen else HOG_AND_SPIN
    message = refusal(cli("real", scenario_file(tmp_path, text, old, new)))
    assert message.startswith(field), message


def test_python_policies_and_bad_options_are_refused(cli: Cli, tmp_path: Path) -> None:
    path = scenario_file(tmp_path)
    assert refusal(cli("real", path, "--policy", "mine.py:Mine")).startswith(
        "--policy: expected a compiled-in"
    )
    assert refusal(cli("real", path, "--baseline", path)) == "--baseline: only meaningful with --compare"
    assert refusal(cli("real", path, "--machine-costs")) == "--machine-costs: only meaningful with --compare"
    assert refusal(cli("real", path, "--deadline-s", "0")) == (
        "--deadline-s: expected a number of seconds in (0, 3600], got 0"
    )
    assert refusal(cli("real", path, "--memory-per-vm", "1k")).startswith(
        "--memory-per-vm: expected from 1 MiB"
    )
    assert refusal(cli("real", path, "--memory-per-vm", "lots")).startswith(
        "--memory-per-vm: expected a size"
    )
    assert refusal(cli("real", tmp_path / "missing.toml")).startswith("SCENARIO: no such file")


def _real_run(cpu_s: float, switches: int, migrations: int, ple_exits: int, lost_s: float) -> dict[str, Any]:
    """A real run of two VMs given `cpu_s` each, whose guests did not execute `lost_s` of it
    (all in the first VM), with 20 sends to another VM; its loop 300 µs late on average."""
    vms = [
        {"cpu_s": cpu_s, "guest_executed_s": cpu_s - lost_s, "ple_exits": ple_exits},
        {"cpu_s": cpu_s, "guest_executed_s": cpu_s, "ple_exits": 0},
    ]
    return {
        "host": {"context_switches": switches, "migrations": migrations},
        "vms": vms,
        "sends_between_vms": 20,
        "scheduler_late_us": {"mean": 300.0, "p99": 900.0, "max": 2000.0},
    }


def test_machine_costs_split_the_lost_time_into_switches_migrations_and_a_share_of_the_time() -> None:
    # Exits of 50 µs; the guests lose 4 % of the time given however scheduled, 200 µs per
    # switch and 300 µs more when it migrates: alone 4 switches in 2 s of CPU, beside a hog
    # 100 or 300 switches (half or a tenth of them migrating) in 4 s.
    def lost(cpu: float, switches: int, migrations: int, ple: int) -> float:
        return 0.04 * 2 * cpu + 200e-6 * switches + 300e-6 * migrations + 50e-6 * (ple + 20)

    def report(*runs: tuple[float, int, int, int]) -> dict[str, Any]:
        return {
            "real": {"ple_exit_us": 50.0, "ple_window_stretch": 20.0},
            "runs": [_real_run(*run, lost(*run)) for run in runs],
        }

    real = report((2.0, 100, 50, 0), (2.0, 300, 30, 100))
    alone = report((1.0, 4, 0, 0), (1.0, 4, 2, 0))
    losses = vsched.real.machine_losses([real, alone])
    assert losses is not None and losses.runs == 4
    assert losses.switch_us == pytest.approx(200.0)
    assert losses.migration_us == pytest.approx(300.0)
    assert losses.share == pytest.approx(0.04)
    costs = vsched.real.machine_costs(real, "[host]\npcpus = 2\n", losses)
    assert costs == {
        "host.context_switch_us": 200.0,
        "host.migration_us": 300.0,
        "host.timer_slop_us": 600.0,  # uniform in [0, 600 µs): 300 µs late on average
        "host.vm_exit_us": 50.0,
        "host.ple_handler_us": 0.0,
        "host.ple_window_cycles": 4096 * 20,
    }
    # Never below the scenario's own switch cost; no window with pause-loop exiting off.
    own = "[host]\ncontext_switch_us = 900.0\nple_window_cycles = 0\n"
    costs = vsched.real.machine_costs(real, own, losses)
    assert costs["host.context_switch_us"] == 900.0 and "host.ple_window_cycles" not in costs
    # A disturbed run is left out: other processes' time would count as lost.
    alone["runs"][1]["isolation"] = {"disturbed": True}
    alone["runs"][1]["vms"][0]["guest_executed_s"] = 0.0
    again = vsched.real.machine_losses([real, alone])
    assert again is not None and again.runs == 3 and again.switch_us == pytest.approx(200.0)


def test_machine_losses_stay_non_negative_and_need_a_switch() -> None:
    # Fewer losses with more switches: the switch cost is 0 and the share carries it all.
    real = {
        "real": {"ple_exit_us": 50.0},
        "runs": [_real_run(1.0, 400, 0, 0, 0.001 + 0.05), _real_run(1.0, 10, 0, 0, 0.001 + 0.08)],
    }
    losses = vsched.real.machine_losses([real])
    assert losses is not None and losses.switch_us == 0.0 and losses.migration_us == 0.0 and losses.share > 0
    # No run switched: nothing to measure a switch by.
    assert vsched.real.machine_losses([{"real": {}, "runs": [_real_run(1.0, 0, 0, 0, 0.1)]}, None]) is None


def test_a_run_that_did_not_finish_counts_beyond_every_finished_one() -> None:
    # Three runs of a VM alone finish in 1 s; beside a hog one finishes in 1.5 s and two do not.
    def report(*completions: float | None) -> dict[str, Any]:
        vm = {"name": "spin", "workload": "spinlock", "vcpus": 2}
        runs = [{"vms": [vm | {"completion_s": c, "finished": c is not None}]} for c in completions]
        return {"scenario": "s", "policy": "p", "seed": 1, "reps": len(runs), "runs": runs}

    alone, hog = report(1.0, 1.0, 1.0), report(1.5, None, None)
    result = vsched.real.comparison(alone, hog, alone, alone)
    slowdown = result["vms"][0]["figures"]["slowdown"]
    # Real: the median run did not finish, not the one that did; no ratio to compare.
    assert slowdown["real"] == {"median": None, "min": 1.5, "max": None, "runs": 3, "unfinished": 2}
    assert slowdown["sim"]["median"] == 1.0 and slowdown["real_over_sim"] is None
    spread = vsched.real.Spread.from_json(slowdown["real"])
    assert spread.text("slowdown") == "unfinished [1.500–unfinished]"
    # A workload that never ends has no completion at all, which is not "unfinished".
    never = vsched.real.Spread.of([None, None])
    assert never.as_json() == {"median": None, "min": None, "max": None, "runs": 0, "unfinished": 0}


def test_non_negative_least_squares_is_exact_on_exact_data_and_clamps_otherwise() -> None:
    rows = [(1.0, 0.0), (0.0, 1.0), (1.0, 1.0)]
    assert vsched.real.nonnegative_least_squares(rows, [2.0, 3.0, 5.0]) == pytest.approx([2.0, 3.0])
    # The unconstrained optimum (-1, 2) is infeasible: the best with the first at 0.
    assert vsched.real.nonnegative_least_squares(rows, [-1.0, 2.0, 1.0]) == pytest.approx([0.0, 1.5])


# ---- The command on the fake backend, on any machine ----


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VSCHED_REAL_BACKEND", "fake")


@pytest.mark.usefixtures("fake")
def test_real_prints_the_tables_of_run(cli: Cli, tmp_path: Path) -> None:
    result = cli("real", scenario_file(tmp_path), "--reps", "2")
    assert result.exit_code == 0, result
    # The title wraps with the table's width.
    title = " ".join(result.stdout.split("\n\n")[0].split())
    assert title.startswith("two: VMs (mean ± std over 2 runs, seeds 1..2, policy rr)"), title
    for fragment in ("cpu_share", "utilization"):
        assert fragment in result.stdout
    assert "ran on real vCPUs (fake):" in result.stdout


@pytest.mark.usefixtures("fake")
def test_real_json_has_the_schema_of_run_json(cli: Cli, tmp_path: Path) -> None:
    path = scenario_file(tmp_path)
    real = json.loads(cli("real", path, "--json", "--seed", "5").stdout)
    simulated = json.loads(cli("run", path, "--json", "--seed", "5").stdout)
    assert set(real) == set(simulated) | {"backend", "real"}
    assert real["backend"] == "fake" and real["runs"][0]["seed"] == 5
    assert set(real["runs"][0]["vms"][0]) == set(simulated["runs"][0]["vms"][0]) | {"guest_executed_s"}
    assert set(real["runs"][0]["host"]) == set(simulated["runs"][0]["host"])
    spin = real["runs"][0]["vms"][0]
    # The fake's vCPU finishes after 100 ms of CPU; it shared one pCPU with the hog.
    assert spin["finished"] is True and 0.1 <= spin["completion_s"] < 10
    assert spin["guest_ticks"] is None and real["runs"][0]["host"]["cache_refill_s"] is None
    assert spin["ple_exits"] == 0, "counted by the guest; the fake's never spin"
    # What other processes took of the run's host CPUs, and whether that disturbed it.
    isolation = real["runs"][0]["isolation"]
    assert set(isolation) == {"others_cpu_s", "others_share", "disturbed", "disturbed_above"}
    assert isolation["others_cpu_s"] >= 0 and isolation["disturbed_above"] == 0.05


@pytest.mark.usefixtures("fake")
def test_compare_sets_the_simulator_beside_real_vcpus(cli: Cli, tmp_path: Path) -> None:
    hog = SCENARIOS / "spinlock-hog.toml"
    alone = SCENARIOS / "spinlock-alone.toml"
    # What a comparison holds, whatever else runs on this machine (--allow-disturbed).
    result = cli("real", hog, "--compare", "--baseline", alone, "--reps", "2", "--json", "--allow-disturbed")
    assert result.exit_code == 0, result
    comparison: dict[str, Any] = json.loads(result.stdout)
    assert (comparison["scenario"], comparison["baseline"], comparison["reps"]) == (
        "real-spinlock-hog",
        "real-spinlock-alone",
        2,
    )
    spin = comparison["vms"][0]["figures"]
    assert set(spin) == {"completion_s", "cpu_share", "spin_share", "slowdown"}
    simulated = json.loads(cli("run", hog, "--json", "--reps", "2").stdout)
    completions = [run["vms"][0]["completion_s"] for run in simulated["runs"]]
    # The simulator's side is the simulator's report of the same seeds.
    assert spin["completion_s"]["sim"]["min"] == min(completions)
    assert spin["completion_s"]["sim"]["max"] == max(completions)
    real = spin["completion_s"]["real"]
    assert real["runs"] == 2 and spin["completion_s"]["real_over_sim"] == pytest.approx(
        real["median"] / spin["completion_s"]["sim"]["median"]
    )
    assert spin["slowdown"]["real"]["median"] > 0
    table = cli("real", hog, "--compare", "--baseline", alone, "--reps", "2", "--allow-disturbed").stdout
    for fragment in ("simulator against real vCPUs (fake backend)", "slowdown", "real/sim", "spin_share"):
        assert fragment in table
    # The shipped scenarios keep the KVM host's threads out of the simulator, as the runner's
    # policy never sees them; a scenario that lets a KVM policy add them is told so.
    assert comparison["sim_host_threads"] is False and "host's threads" not in table
    kvm = tmp_path / "kvm.toml"
    kvm.write_text(hog.read_text(encoding="utf-8").replace("host_threads = false", ""), encoding="utf-8")
    noted = cli("real", kvm, "--compare", "--reps", "1", "--policy", "cfs", "--allow-disturbed").stdout
    assert "the simulator ran the KVM host's threads" in " ".join(noted.split()), noted


@pytest.mark.usefixtures("fake")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_vcpus_start_on_the_pcpus_the_simulator_starts_them_on(cli: Cli, tmp_path: Path, seed: int) -> None:
    # At its VM's start the runner wakes the vCPUs that halted waiting for it in the order the
    # simulator does; under CFS that order decides which vCPUs share a pCPU (on seed 2, waking
    # spin.v0 first put both spin vCPUs on one pCPU, where a ticket lock convoys).
    def first_pcpus(command: str, trace: Path) -> dict[str, int]:
        hog = SCENARIOS / "spinlock-hog.toml"
        result = cli(command, hog, "--policy", "cfs", "--seed", str(seed), "--reps", "1", "--trace", trace)
        assert result.exit_code == 0, result
        first: dict[str, int] = {}
        for interval in sorted(vsched.trace_reader.load_trace(trace).intervals, key=lambda i: i.start_ms):
            # Past the halts of vCPUs given a pCPU before their VM's start (µs long): 0.1 ms.
            if interval.end_ms - interval.start_ms > 0.1:
                first.setdefault(interval.vcpu_label, interval.pcpu)
        return first

    real, simulated = first_pcpus("real", tmp_path / "real.json"), first_pcpus("run", tmp_path / "sim.json")
    assert real == simulated and real["spin.v0"] != real["spin.v1"]


@pytest.mark.usefixtures("fake")
def test_a_real_run_writes_a_trace_that_plot_trace_reads(cli: Cli, tmp_path: Path) -> None:
    # The first repetition's schedule, in `vsched run --trace`'s format: the pCPU runs one
    # vCPU at a time, and every VM appears.
    trace = tmp_path / "real.json"
    result = cli("real", scenario_file(tmp_path), "--reps", "2", "--trace", trace)
    assert result.exit_code == 0, result
    assert f"wrote {trace}" in result.stdout
    schedule = vsched.trace_reader.load_trace(trace)
    assert {i.vm for i in schedule.intervals} == {"spin", "hog"}
    # Timestamps are float microseconds (docs/traces.md), so an end and the next start may
    # differ by a rounding error; 1 ns is far below any real switch. The scenario has 1 pCPU.
    assert {i.pcpu for i in schedule.intervals} == {0}
    for pcpu in (0,):
        row = sorted((i.start_ms, i.end_ms) for i in schedule.intervals if i.pcpu == pcpu)
        assert row and all(a[1] <= b[0] + 1e-6 for a, b in zip(row, row[1:])), f"pCPU {pcpu} overlaps"
    assert cli("real", scenario_file(tmp_path), "--trace", trace, "--compare").stderr_lines == [
        "error: --trace: not with --compare (trace one run of one world at a time)"
    ]
    assert cli("real", scenario_file(tmp_path), "--trace-limit", "5").stderr_lines == [
        "error: --trace-limit: only meaningful with --trace FILE"
    ]


# Bounds on waiting for a child process, so that a hung test fails instead of hanging: far
# above what the steps take even at a load of 20 on 2 cores (seconds at most), since they
# assert nothing about speed.
STARTED_WITHIN_S = 300
STOPPED_WITHIN_S = 120


def wait_until_the_fake_vcpus_run(run: subprocess.Popen[str]) -> None:
    """Returns once `run` has started the fake backend's vCPU threads (`fake-vcpu-<n>`): the
    command is past its start-up, which takes SIGINT back if it started ignored, and a run
    is under way. Fails the test if the process ends first."""
    tasks = Path(f"/proc/{run.pid}/task")
    give_up = time.monotonic() + STARTED_WITHIN_S
    while time.monotonic() < give_up:
        if run.poll() is not None:
            pytest.fail(f"the run ended (exit {run.returncode}) before its vCPUs started")
        names = []
        with contextlib.suppress(OSError):  # the process or a thread ended meanwhile
            for task in tasks.iterdir():
                names.append((task / "comm").read_text(encoding="utf-8").strip())
        if any(name.startswith("fake-vcpu-") for name in names):
            return
        time.sleep(0.05)
    pytest.fail(f"no vCPU thread started within {STARTED_WITHIN_S} s")


def interrupt_a_real_run(tmp_path: Path, ignore_sigint: bool) -> tuple[int, str, str]:
    """Starts `vsched real` on two hogs (on the fake backend: it would last its 600 s
    deadline), sends it SIGINT once its vCPUs run, and returns its exit code, stdout and
    stderr; fails the test if the run goes on. With `ignore_sigint`, the child starts with
    SIGINT ignored, as a shell starts a script's background job (`vsched real ... &`)."""
    path = scenario_file(tmp_path, old='kind = "spinlock"\nmode = "user"', new='kind = "cpu_hog"')
    run = subprocess.Popen(
        [sys.executable, "-m", "vsched", "real", str(path), "--policy", "rr", "--deadline-s", "600"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "VSCHED_REAL_BACKEND": "fake"},
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None,
    )
    try:
        wait_until_the_fake_vcpus_run(run)
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=STOPPED_WITHIN_S)
    except subprocess.TimeoutExpired:
        pytest.fail("SIGINT was ignored: the run went on")
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    return run.returncode, out, err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals a child process")
def test_ctrl_c_stops_a_real_run_with_exit_130(tmp_path: Path) -> None:
    assert interrupt_a_real_run(tmp_path, ignore_sigint=False) == (130, "", "interrupted\n")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals a child process")
def test_sigint_stops_a_real_run_started_with_sigint_ignored(tmp_path: Path) -> None:
    # Python installs no SIGINT handler of its own when it starts with the signal ignored.
    assert interrupt_a_real_run(tmp_path, ignore_sigint=True) == (130, "", "interrupted\n")


@pytest.mark.usefixtures("fake")
def test_a_comparison_most_of_whose_real_runs_were_disturbed_is_refused(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = vsched.real.run_json

    def busy_host(*args: Any, **kwargs: Any) -> str:
        report = json.loads(original(*args, **kwargs))
        for run in report["runs"]:
            run["isolation"]["disturbed"] = True
        return json.dumps(report)

    hog = SCENARIOS / "spinlock-hog.toml"
    monkeypatch.setattr(vsched.real, "run_json", busy_host)
    result = cli("real", hog, "--compare", "--reps", "2")
    assert result.exit_code == 1, result
    assert result.stderr_lines == [
        "error: 2 of 2 real runs were disturbed: other processes took more than 5% of their host CPUs"
        " (isolation.others_share in `vsched real --json`); compare on a quiet host"
    ]
    assert (
        vsched.real.disturbed([{"isolation": {"disturbed": True}}, {"isolation": {"disturbed": False}}, {}])
        == 1
    )
    allowed = cli("real", hog, "--compare", "--reps", "2", "--allow-disturbed")
    assert allowed.exit_code == 0, allowed
    assert "2 of 2 real runs disturbed" in allowed.stdout
    assert cli("real", hog, "--allow-disturbed").stderr_lines == [
        "error: --allow-disturbed: only meaningful with --compare"
    ]


# ---- On real vCPUs, where this machine has them ----

# Real vCPUs run only when the host gives their threads a CPU: a run that takes 2 s on a quiet
# host takes minutes at a load of 20 on 2 cores. A scenario's horizon is its wall-clock bound,
# so these tests run copies whose horizon and deadline allow for any load (an hour, the
# longest `--deadline-s` takes); they assert that the runs finish and what the policy decides,
# never how fast. Figures that depend on the host leaving the vCPU threads alone (how slow,
# how much spinning) are asserted only when no run was disturbed (isolation.disturbed: other
# processes took more than 5 % of the run's host CPUs).
PATIENT_S = 3600


def patient(tmp_path: Path, name: str) -> Path:
    """A copy of scenarios/real/`name` whose horizon is PATIENT_S."""
    text, count = re.subn(
        r"(?m)^horizon_s\s*=.*$", f"horizon_s = {PATIENT_S}", (SCENARIOS / name).read_text(encoding="utf-8")
    )
    assert count == 1, name
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def real_report(cli: Cli, scenario: Path, *options: object) -> dict[str, Any]:
    result = cli("real", scenario, "--json", "--deadline-s", PATIENT_S, *options)
    assert result.exit_code == 0, result
    report: dict[str, Any] = json.loads(result.stdout)
    assert report["backend"] == "kvm"
    return report


def undisturbed(*reports: dict[str, Any]) -> bool:
    return not any(run["isolation"]["disturbed"] for report in reports for run in report["runs"])


@needs_kvm
@pytest.mark.parametrize("policy", ["rr", "credit", "cosched"])
def test_policies_run_unchanged_on_real_vcpus(cli: Cli, tmp_path: Path, policy: str) -> None:
    scenario = patient(tmp_path, "spinlock-hog.toml")
    report = real_report(cli, scenario, "--policy", policy, "--reps", "1")
    spin, hog = report["runs"][0]["vms"]
    assert spin["finished"] is True, spin
    # How much of the host the VMs use is the policy's doing: both pCPUs busy under rr and
    # credit, one idle while the hog runs under gang scheduling (the CON VM waits for both).
    # Real vCPUs use what the simulator says within 0.1 of the host: stops, starts and the
    # scheduler's own wake-ups take a few % here (docs/real-vcpus.md, "Limits"). On a busy
    # host the scheduler thread's own lateness moves the shares, and only their bounds hold.
    simulated = vsched.run(scenario, policy=policy, reps=1)
    sim_spin, sim_hog = simulated["runs"][0]["vms"]
    used, sim_used = spin["cpu_share"] + hog["cpu_share"], sim_spin["cpu_share"] + sim_hog["cpu_share"]
    if undisturbed(report):
        assert abs(used - sim_used) < 0.1, (used, sim_used)
    else:
        assert 0 < used <= 1, used
    assert 0 < spin["spin_share"] < 1
    assert report["runs"][0]["host"]["context_switches"] > 0
    if policy == "cosched":
        assert spin["co_launches"] > 0, spin


@needs_kvm
def test_a_hog_beside_a_spinlock_vm_makes_it_spin_and_slow_down(cli: Cli, tmp_path: Path) -> None:
    hog = real_report(cli, patient(tmp_path, "spinlock-hog.toml"), "--reps", "3")
    alone = real_report(cli, patient(tmp_path, "spinlock-alone.toml"), "--reps", "3")
    beside, by_itself = hog["summary"]["vms"][0], alone["summary"]["vms"][0]
    assert beside["runs_finished"] == by_itself["runs_finished"] == 3
    # rr shares the 2 pCPUs among 3 vCPUs beside the hog, among 2 alone: the policy's
    # decision, which holds however busy the host is.
    assert beside["cpu_share_mean"] < by_itself["cpu_share_mean"]
    # The prototype's finding on these machines: 0.41-0.53x its alone rate, 53-58 % spinning
    # against 28 % alone. Here only the direction is asserted (the figures are the docs'),
    # and only on a quiet host: other work preempts the vCPU threads alone as well.
    if undisturbed(hog, alone):
        assert beside["completion_s_mean"] > 1.2 * by_itself["completion_s_mean"]
        assert beside["spin_share_mean"] > by_itself["spin_share_mean"]


@needs_kvm
def test_kernel_mode_spinning_raises_pause_loop_exits_that_the_policy_hears(cli: Cli) -> None:
    # Under kvm-dy each pause-loop exit is a directed-yield attempt (a yield or no target);
    # the guest counts its exits, and user-mode spinning raises none (as in the simulator).
    kernel = real_report(cli, SCENARIOS / "kernel-spinlock-hog.toml", "--policy", "kvm-dy", "--reps", "1")
    run = kernel["runs"][0]
    counters = run["host"]["policy_counters"]
    attempts = counters.get("kvm_dy.yields", 0) + counters.get("kvm_dy.no_target", 0)
    assert run["vms"][0]["ple_exits"] > 0 and attempts > 0, (run["vms"][0], counters)
    # Yields the runner dropped (the wait had ended when it read the exit) are the only
    # exits the policy did not hear.
    assert attempts <= run["host"]["ple_exits"]
    assert kernel["real"]["ple_window_stretch"] > 1
    user = real_report(cli, SCENARIOS / "spinlock-hog.toml", "--policy", "kvm-dy", "--reps", "1")
    assert user["runs"][0]["host"]["ple_exits"] == 0


@needs_kvm
def test_a_blocking_barrier_vm_halts_and_credit_boosts_its_woken_vcpus(cli: Cli, tmp_path: Path) -> None:
    # Its vCPUs halt at the barriers instead of spinning, the last arrival wakes them, and
    # Credit boosts each woken vCPU (BOOST is counted at the wake), as in the simulator.
    report = real_report(
        cli, patient(tmp_path, "blocking-barrier-hog.toml"), "--policy", "credit", "--reps", "1"
    )
    run = report["runs"][0]
    bsp = run["vms"][0]
    assert bsp["finished"] is True, bsp
    assert bsp["spin_share"] == 0, "a blocking barrier never spins"
    assert run["host"]["policy_counters"].get("credit.boosts", 0) > 100, run["host"]["policy_counters"]


@needs_kvm
def test_a_virtual_cluster_exchanges_messages_that_cvs_comm_counts(cli: Cli, tmp_path: Path) -> None:
    # The LU job's two VMs on this host pass their messages through the runner, which counts
    # each VM's packets as the simulator does (the same workload: the same messages, so the
    # same counts), and cvs-comm reads them.
    scenario = patient(tmp_path, "messages-hog.toml")
    report = real_report(cli, scenario, "--policy", "cvs-comm", "--reps", "1")
    run = report["runs"][0]
    cluster = [vm for vm in run["vms"] if vm["virtual_cluster"] == "lu"]
    assert [vm["finished"] for vm in cluster] == [True, True], cluster
    sim = json.loads(vsched.run_json(scenario, policy="cvs-comm", reps=1))
    sim_vms = {vm["name"]: vm for vm in sim["runs"][0]["vms"]}
    for vm in cluster:
        assert vm["rx_packets"] == sim_vms[vm["name"]]["rx_packets"] > 0, vm
        assert vm["messages_received"] == sim_vms[vm["name"]]["messages_received"] > 0, vm
    # The cluster's own row, as the simulator reports it: from its first VM's start to its
    # last VM's finish.
    (lu,) = run["virtual_clusters"]
    assert {k: lu[k] for k in ("name", "workload", "vms", "ranks")} == {
        k: sim["runs"][0]["virtual_clusters"][0][k] for k in ("name", "workload", "vms", "ranks")
    }
    assert lu["completion_s"] >= max(vm["completion_s"] for vm in cluster)
    # Whether cvs-comm ever chooses between the cluster's VMs by their packets depends on
    # which vCPUs meet in a run queue, which the host's timing decides (0 to 16 times a real
    # run, even undisturbed; 1 to 8 in the simulator's seeds 1-3), so it is not asserted here:
    # the packets it reads are (above).


@needs_kvm
def test_gang_scheduling_keeps_a_barrier_vm_from_spinning(cli: Cli, tmp_path: Path) -> None:
    scenario = patient(tmp_path, "barrier-hog.toml")
    rr = real_report(cli, scenario, "--reps", "2")
    gang = real_report(cli, scenario, "--reps", "2", "--policy", "cosched")
    assert rr["summary"]["vms"][0]["runs_finished"] == gang["summary"]["vms"][0]["runs_finished"] == 2
    assert all(run["vms"][0]["co_launches"] > 0 for run in gang["runs"])
    # Launched together, the barrier VM's vCPUs wait for each other less than under rr, as
    # long as the host runs the threads it was given (a busy host preempts one of a gang).
    if undisturbed(rr, gang):
        assert gang["summary"]["vms"][0]["spin_share_mean"] < rr["summary"]["vms"][0]["spin_share_mean"]


@needs_kvm
def test_compare_on_real_vcpus(cli: Cli, tmp_path: Path) -> None:
    result = cli(
        "real",
        patient(tmp_path, "barrier-hog.toml"),
        "--compare",
        "--baseline",
        patient(tmp_path, "barrier-alone.toml"),
        "--reps",
        "2",
        "--json",
        "--allow-disturbed",
        "--deadline-s",
        PATIENT_S,
    )
    assert result.exit_code == 0, result
    figures = json.loads(result.stdout)["vms"][0]["figures"]
    for key in ("completion_s", "cpu_share", "spin_share", "slowdown"):
        assert figures[key]["real"]["runs"] == 2 and figures[key]["real_over_sim"] is not None, key


@pytest.mark.usefixtures("fake")
def test_the_differential_suite_prints_a_row_per_policy_and_scenario(tmp_path: Path) -> None:
    # scripts/real_suite.py on the fake backend (its figures mean nothing: the fake runs no
    # guest code): one row per shipped scenario for the policy asked, and the summary line.
    out = tmp_path / "suite.json"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "real_suite.py"),
            "--reps",
            "1",
            "--policies",
            "rr",
            "--json",
            str(out),
            "--machine-costs",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("| scenario | policy | slowdown sim | slowdown real | real/sim |")
    rows = json.loads(out.read_text(encoding="utf-8"))
    assert [(r["scenario"], r["policy"]) for r in rows] == [
        ("barrier-hog", "rr"),
        ("blocking-barrier-hog", "rr"),
        ("kernel-spinlock-hog", "rr"),
        ("messages-hog", "rr"),
        ("spinlock-hog", "rr"),
    ]
    # Each compared row says what each world exercised; the simulator's LU cluster receives
    # packets from its other VM whatever the backend.
    messages = next(r for r in rows if r["scenario"] == "messages-hog")
    if "refused" not in messages:
        assert messages["vm"] == "lu.0"
        assert messages["mechanisms"]["sim"]["packets"] > 0
    # A pair is not compared when most of its real runs were disturbed, which a busy test
    # machine may do to the fake's runs too: the counts add up either way. With
    # --machine-costs, each compared row also has the simulator run with this machine's costs,
    # fitted over the suite's real runs, and the agreement of each is counted.
    counted = {}
    for line in lines:
        found = re.fullmatch(
            r"With (the simulator's defaults|this machine's costs|either): (\d+) of (\d+) compared pairs "
            r"agree within 15% \(slowdown, real over simulated\), (\d+) of all 5 \(\d+%\); in \d+ more, "
            r"neither world's median run finished\.",
            line,
        )
        if found:
            counted[found[1]] = (int(found[2]), int(found[3]), int(found[4]))
    assert set(counted) == {"the simulator's defaults", "this machine's costs", "either"}, lines[-5:]
    for agree, compared, of_all in counted.values():
        assert agree == of_all and agree <= compared <= 5
    for row in rows:
        if "refused" not in row:
            costs = row["machine"]["costs"]
            assert costs["host.context_switch_us"] >= 0 and costs["host.migration_us"] >= 0, costs
    # --replay runs the simulator side again against the real runs the JSON kept: the same rows.
    again = tmp_path / "again.json"
    replay = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "real_suite.py"), "--replay", str(out), "--policies", "rr"]
        + ["--json", str(again), "--machine-costs"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert replay.returncode == 0, replay.stderr
    assert json.loads(again.read_text(encoding="utf-8")) == rows
    bad = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "real_suite.py"), "--policies", "nope"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--policies: expected registered policies" in bad.stderr
