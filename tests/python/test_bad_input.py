"""Bad input never shows a traceback: one line `error: ...` naming the field, exit code 2,
and the Python API raises `vsched.ScenarioError` with the same message."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

import vsched

from helpers import TINY_SCENARIO, CliResult

Cli = Callable[..., CliResult]


def with_replaced(old: str, new: str) -> str:
    """TINY_SCENARIO with the first `old` replaced by `new`."""
    assert old in TINY_SCENARIO
    return TINY_SCENARIO.replace(old, new, 1)


def line_of(text: str, fragment: str) -> int:
    """1-based number of the first line of `text` containing `fragment`."""
    return next(number for number, line in enumerate(text.splitlines(), 1) if fragment in line)


def error_message(result: CliResult) -> str:
    """The message of a well-formed error result: exit 2, nothing on stdout, one stderr line."""
    assert result.exit_code == 2, result
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert len(result.stderr_lines) == 1, result.stderr
    line = result.stderr_lines[0]
    assert line.startswith("error: ")
    return line[len("error: ") :]


MALFORMED = with_replaced('name = "hog"', 'name = = "hog"')

# (id, scenario text, fragments the message must contain)
BAD_SCENARIOS = [
    ("unknown key", with_replaced("pcpus = 2", "pcpus = 2\ncolour = 1"), ["host.colour", "unknown"]),
    (
        "unknown workload param",
        with_replaced("iterations = 200", "iterationz = 200"),
        ["vm[0].workload", "iterationz"],
    ),
    ("wrong type", with_replaced("pcpus = 2", 'pcpus = "two"'), ["host.pcpus"]),
    (
        "wrong param type",
        with_replaced("iterations = 200", 'iterations = "many"'),
        ["vm[0].workload.iterations"],
    ),
    ("zero pcpus", with_replaced("pcpus = 2", "pcpus = 0"), ["host.pcpus"]),
    ("negative weight", with_replaced("vcpus = 2", "vcpus = 2\nweight = -5"), ["vm[0].weight"]),
    ("cap above 100 x vcpus", with_replaced("vcpus = 2", "vcpus = 2\ncap = 201"), ["vm[0].cap"]),
    (
        "unknown policy",
        with_replaced('name = "credit"', 'name = "fifo"'),
        ["scheduler.name", "fifo", "rr", "credit"],
    ),
    ("unknown workload", with_replaced('kind = "cpu_hog"', 'kind = "hogg"'), ["vm[1].workload.kind", "hogg"]),
    ("malformed TOML", MALFORMED, [f"line {line_of(MALFORMED, 'name = = ')}"]),
    (
        "event names an unknown VM",
        TINY_SCENARIO + '[[event]]\nat_s = 0.1\nvm = "nobody"\ntype = "CON"\n',
        ["event[0].vm", "nobody", "locker"],
    ),
    (
        "event after the horizon",
        TINY_SCENARIO + '[[event]]\nat_s = 9\nvm = "hog"\ntype = "CON"\n',
        ["event[0].at_s"],
    ),
    (
        "event with a bad type",
        TINY_SCENARIO + '[[event]]\nat_s = 0.1\nvm = "hog"\ntype = "GANG"\n',
        ["event[0].type"],
    ),
    (
        "CON VM wider than the host under a co-scheduler",
        with_replaced('name = "credit"', 'name = "pcs"').replace(
            'vcpus = 2\n[vm.workload]\nkind = "cpu_hog"',
            'vcpus = 3\ntype = "CON"\n[vm.workload]\nkind = "cpu_hog"',
        ),
        ["scheduler.name", "pcs", "hog", "3 vCPUs"],
    ),
    (
        "VM created after the horizon",
        with_replaced("vcpus = 2", "vcpus = 2\nstart_s = 99"),
        ["vm[0].start_s"],
    ),
    (
        "VM destroyed before it exists",
        with_replaced("vcpus = 2", "vcpus = 2\nstart_s = 0.3\nstop_s = 0.2"),
        ["vm[0].stop_s"],
    ),
    (
        "VM lifecycle under a policy without it",
        with_replaced('name = "credit"', 'name = "pcs"').replace("vcpus = 2", "vcpus = 2\nstop_s = 0.4", 1),
        ["vm[0].stop_s", "pcs", "credit"],
    ),
    ("PLE growth of zero", with_replaced("pcpus = 2", "pcpus = 2\nple_grow = 0"), ["host.ple_grow"]),
    (
        "unknown host clocks",
        with_replaced("pcpus = 2", 'pcpus = 2\nclocks = "synced"'),
        ["host.clocks", "lockstep"],
    ),
    (
        "unknown hardware era",
        with_replaced("pcpus = 2", 'pcpus = 2\nhardware = "pentium"'),
        ["host.hardware", "nehalem-2010"],
    ),
    ("negative exit cost", with_replaced("pcpus = 2", "pcpus = 2\nvm_exit_us = -1"), ["host.vm_exit_us"]),
    (
        "posted_interrupts not a boolean",
        with_replaced("pcpus = 2", 'pcpus = 2\nposted_interrupts = "yes"'),
        ["host.posted_interrupts"],
    ),
    (
        "negative timer slop",
        with_replaced("pcpus = 2", "pcpus = 2\ntimer_slop_us = -1"),
        ["host.timer_slop_us"],
    ),
    ("huge timer slop", with_replaced("pcpus = 2", "pcpus = 2\ntimer_slop_us = 1e9"), ["host.timer_slop_us"]),
    (
        "start spread past an hour",
        with_replaced("pcpus = 2", "pcpus = 2\nworkload_start_spread_ms = 1e12"),
        ["host.workload_start_spread_ms"],
    ),
    (
        "sockets that do not divide pcpus",
        with_replaced("pcpus = 2", "pcpus = 2\nsockets = 3"),
        ["host.sockets"],
    ),
    ("zero sockets", with_replaced("pcpus = 2", "pcpus = 2\nsockets = 0"), ["host.sockets"]),
    (
        "halt polling on a Xen host",
        with_replaced("pcpus = 2", "pcpus = 2\nhalt_poll_ns = 200000"),
        ["host.halt_poll_ns", "KVM"],
    ),
    (
        "guest haltpoll on a Xen host",
        with_replaced("vcpus = 2", "vcpus = 2\nguest_haltpoll = true"),
        ["vm[0].guest_haltpoll", "KVM"],
    ),
    (
        "negative halt_poll_ns",
        with_replaced('name = "credit"', 'name = "kvm-eevdf"').replace(
            "pcpus = 2", "pcpus = 2\nhalt_poll_ns = -1"
        ),
        ["host.halt_poll_ns"],
    ),
    (
        "halt_poll_ns beyond KVM's unsigned int",
        with_replaced('name = "credit"', 'name = "kvm-eevdf"').replace(
            "pcpus = 2", "pcpus = 2\nhalt_poll_ns = 5000000000"
        ),
        ["host.halt_poll_ns", "4294967295"],
    ),
    (
        "a guest haltpoll parameter without guest haltpoll",
        with_replaced('name = "credit"', 'name = "kvm-eevdf"').replace(
            "vcpus = 2", "vcpus = 2\nguest_halt_poll_ns = 100000", 1
        ),
        ["vm[0].guest_halt_poll_ns", "guest_haltpoll = true"],
    ),
    ("odd pcpus with SMT", with_replaced("pcpus = 2", "pcpus = 3\nthreads_per_core = 2"), ["host.sockets"]),
    ("zero fill buffers", with_replaced("pcpus = 2", "pcpus = 2\nfill_buffers = 0"), ["host.fill_buffers"]),
    ("negative L2", with_replaced("pcpus = 2", "pcpus = 2\nl2_kib = -1"), ["host.l2_kib"]),
    (
        "negative working set",
        with_replaced('kind = "cpu_hog"', 'kind = "cpu_hog"\nworking_set_kb = -5'),
        ["vm[1].workload.working_set_kb"],
    ),
    (
        "working set not an integer",
        with_replaced('kind = "cpu_hog"', 'kind = "cpu_hog"\nworking_set_kb = "big"'),
        ["vm[1].workload.working_set_kb"],
    ),
    (
        "PLE maximum below the window",
        with_replaced("pcpus = 2", "pcpus = 2\nple_window_max_cycles = 100"),
        ["host.ple_window_max_cycles"],
    ),
    (
        "pv_spinlocks not a boolean",
        with_replaced("vcpus = 2", 'vcpus = 2\npv_spinlocks = "yes"'),
        ["vm[0].pv_spinlocks"],
    ),
    (
        "pv TLB flush without steal time",
        with_replaced("vcpus = 2", "vcpus = 2\npv_tlb_flush = true"),
        ["vm[0].pv_tlb_flush", "pv_steal_time"],
    ),
    (
        "pv sched_yield without steal time",
        with_replaced("vcpus = 2", "vcpus = 2\npv_sched_yield = true"),
        ["vm[0].pv_sched_yield", "pv_steal_time"],
    ),
    (
        "slice request below Linux's clamp",
        with_replaced("vcpus = 2", "vcpus = 2\nsched_slice_us = 50"),
        ["vm[0].sched_slice_us", "100..=100000"],
    ),
    (
        "preemption delay too long",
        with_replaced("pcpus = 2", "pcpus = 2\npreempt_delay_us = 1e6"),
        ["host.preempt_delay_us"],
    ),
    (
        "kernbench with no jobs",
        with_replaced('kind = "cpu_hog"', 'kind = "kernbench"\njobs = 0'),
        ["vm[1].workload.jobs"],
    ),
    ("zero hosts", TINY_SCENARIO + "[cluster]\nhosts = 0\n", ["cluster.hosts"]),
    ("unknown clocks", TINY_SCENARIO + '[cluster]\nclocks = "synced"\n', ["cluster.clocks", "aligned"]),
    ("VM on a missing host", with_replaced("vcpus = 2", "vcpus = 2\nhost = 1"), ["vm[0].host", "0..1"]),
    ("negative latency", TINY_SCENARIO + "[network]\nlatency_us = -1\n", ["network.latency_us"]),
    ("zero bandwidth", TINY_SCENARIO + "[network]\nbandwidth_gbps = 0\n", ["network.bandwidth_gbps"]),
    ("tiny MTU", TINY_SCENARIO + "[network]\nmtu_bytes = 10\n", ["network.mtu_bytes"]),
    ("unknown network key", TINY_SCENARIO + "[network]\nlatency = 1\n", ["network.latency", "unknown"]),
    (
        "dom0 weight zero",
        with_replaced("dom0_vcpus = 0", "dom0_vcpus = 1\ndom0_weight = 0"),
        ["host.dom0_weight"],
    ),
    ("negative disk seek", with_replaced("pcpus = 2", "pcpus = 2\ndisk_seek_ms = -1"), ["host.disk_seek_ms"]),
    (
        "zero disk bandwidth",
        with_replaced("pcpus = 2", "pcpus = 2\ndisk_mb_per_s = 0"),
        ["host.disk_mb_per_s"],
    ),
    (
        "negative blkback cost",
        with_replaced("pcpus = 2", "pcpus = 2\nblkback_request_us = -5"),
        ["host.blkback_request_us"],
    ),
    (
        "negative dom0 wake rate",
        with_replaced("pcpus = 2", "pcpus = 2\ndom0_idle_wakes_per_s = -1"),
        ["host.dom0_idle_wakes_per_s"],
    ),
    (
        "host threads under a Xen policy",
        with_replaced("pcpus = 2", "pcpus = 2\nhost_threads = true"),
        ["host.host_threads", "credit"],
    ),
    (
        "negative kernel-thread run",
        with_replaced('name = "credit"', 'name = "cfs"').replace(
            "pcpus = 2", "pcpus = 2\nkthread_run_us = -1"
        ),
        ["host.kthread_run_us"],
    ),
    (
        "timer irq not a number",
        with_replaced("pcpus = 2", 'pcpus = 2\ntimer_irq_us = "short"'),
        ["host.timer_irq_us"],
    ),
    (
        "unknown guest tick",
        with_replaced('name = "hog"\n', 'name = "hog"\nguest_tick = "never"\n'),
        ["vm[1].guest_tick", "never"],
    ),
    ("guest HZ of zero", with_replaced('name = "hog"\n', 'name = "hog"\nguest_hz = 0\n'), ["vm[1].guest_hz"]),
    (
        "disk request of negative size",
        with_replaced('kind = "cpu_hog"', 'kind = "disk"\nrequest_kb = -4'),
        ["vm[1].workload.request_kb"],
    ),
    (
        "unknown Xen release",
        with_replaced("pcpus = 2", 'pcpus = 2\nxen_version = "4.0.1"'),
        ["host.xen_version", '"4.0"'],
    ),
    (
        "unknown Xen release for the scheduler",
        with_replaced('name = "credit"', 'name = "credit"\nxen_version = "5"'),
        ["scheduler.xen_version", '"current"'],
    ),
    (
        "unknown Linux release",
        with_replaced("pcpus = 2", 'pcpus = 2\nkvm_version = "5.10"'),
        ["host.kvm_version", '"6.12.y"'],
    ),
    (
        "a CFS policy on an EEVDF release",
        with_replaced('name = "credit"', 'name = "kvm-dy"\nkvm_version = "6.12"'),
        ["scheduler.kvm_version", "CFS", '"6.1"'],
    ),
    (
        "balance scheduling on CFS with an EEVDF release",
        with_replaced('name = "credit"', 'name = "balance-cfs"\nkvm_version = "6.12"'),
        ["scheduler.kvm_version", "CFS", '"6.1"'],
    ),
    (
        "balance scheduling on EEVDF with a parameter of Credit's",
        with_replaced('name = "credit"', 'name = "balance-eevdf"\ntslice_ms = 30'),
        ["scheduler.tslice_ms"],
    ),
    (
        "a paravirtual feature the host's release lacks",
        with_replaced('name = "credit"', 'name = "kvm-dy"\nkvm_version = "4.19"').replace(
            "vcpus = 2\n", "vcpus = 2\npv_steal_time = true\npv_sched_yield = true\n", 1
        ),
        ["vm[0].pv_sched_yield", "Linux >= 5.2", '"4.19"'],
    ),
    (
        "every vCPU idle",
        with_replaced("vcpus = 2", "vcpus = 2\nidle_vcpus = 2"),
        ["vm[0].idle_vcpus", "fewer"],
    ),
    (
        "VM named like a driver domain",
        with_replaced("dom0_vcpus = 0", "").replace('name = "hog"', 'name = "dom0"'),
        ["vm[1].name", "dom0", "host.dom0_vcpus = 0"],
    ),
    (
        "virtual cluster on a missing host",
        TINY_SCENARIO
        + (
            '[[virtual_cluster]]\nname = "vc"\nvcpus = 1\nhosts = [0, 3]\n'
            '[virtual_cluster.workload]\nkind = "npb-ep"\n'
        ),
        ["virtual_cluster[0].hosts", "3"],
    ),
    (
        "virtual cluster hosts out of order",
        TINY_SCENARIO
        + (
            '[cluster]\nhosts = 2\n[[virtual_cluster]]\nname = "vc"\nvcpus = 1\nhosts = [1, 0]\n'
            '[virtual_cluster.workload]\nkind = "npb-ep"\n'
        ),
        ["virtual_cluster[0].hosts", "increasing"],
    ),
    (
        "bad NPB parameter",
        TINY_SCENARIO
        + (
            '[[virtual_cluster]]\nname = "vc"\nvcpus = 1\n'
            '[virtual_cluster.workload]\nkind = "npb-is"\niterations = 0\n'
        ),
        ["virtual_cluster[0].workload.iterations"],
    ),
    (
        "unknown runtime",
        with_replaced('kind = "cpu_hog"', 'kind = "bsp"\nruntime = "x"'),
        ["vm[1].workload.runtime", '"pthreads", "libgomp", "iomp", "openmpi", "mpich2"', '"x"'],
    ),
    (
        "runtime not a string",
        with_replaced('kind = "cpu_hog"', 'kind = "bsp"\nruntime = 3'),
        ["vm[1].workload.runtime", "a string"],
    ),
    (
        "MPI program on a threads runtime",
        TINY_SCENARIO
        + (
            '[[virtual_cluster]]\nname = "vc"\nvcpus = 1\n'
            '[virtual_cluster.workload]\nkind = "npb-cg"\nruntime = "libgomp"\n'
        ),
        ["virtual_cluster[0].workload.runtime", '"openmpi", "mpich2"'],
    ),
    (
        "unknown wait override",
        with_replaced('kind = "cpu_hog"', 'kind = "bsp"\nruntime = "libgomp"\nwait = "yield"'),
        ["vm[1].workload.wait", '"spin-then-block"'],
    ),
    (
        "spin limit without spin-then-block",
        with_replaced('kind = "cpu_hog"', 'kind = "npb-ep"\nspin_limit_us = 100'),
        ["vm[1].workload.spin_limit_us", "spin-then-block"],
    ),
]


@pytest.mark.parametrize(
    ("text", "fragments"), [case[1:] for case in BAD_SCENARIOS], ids=[case[0] for case in BAD_SCENARIOS]
)
def test_bad_scenario_is_one_line_naming_the_field(
    cli: Cli, tmp_path: Path, text: str, fragments: list[str]
) -> None:
    scenario = tmp_path / "bad.toml"
    scenario.write_text(text, encoding="utf-8")

    message = error_message(cli("run", scenario))

    for fragment in fragments:
        assert fragment in message
    assert error_message(cli("validate", scenario)) == message
    with pytest.raises(vsched.ScenarioError) as raised:
        vsched.run(text)
    assert str(raised.value) == message
    with pytest.raises(vsched.ScenarioError) as raised:
        vsched.validate(scenario)
    assert str(raised.value) == message


def test_unknown_workload_lists_every_valid_one(cli: Cli, tmp_path: Path) -> None:
    scenario = tmp_path / "bad.toml"
    scenario.write_text(with_replaced('kind = "cpu_hog"', 'kind = "hogg"'), encoding="utf-8")

    message = error_message(cli("run", scenario))

    for workload in vsched.workloads():
        assert workload["name"] in message


def test_unknown_policy_lists_every_valid_one(cli: Cli, tmp_path: Path) -> None:
    scenario = tmp_path / "bad.toml"
    scenario.write_text(with_replaced('name = "credit"', 'name = "fifo"'), encoding="utf-8")

    message = error_message(cli("run", scenario))

    for policy in vsched.policies():
        assert policy["name"] in message


def test_scenario_error_is_a_value_error() -> None:
    assert issubclass(vsched.ScenarioError, ValueError)
    assert vsched.ScenarioError.__module__ == "vsched"


def test_missing_scenario_file(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "x.toml"
    assert error_message(cli("run", missing)) == f"SCENARIO: no such file '{missing}'"
    assert error_message(cli("validate", missing)) == f"SCENARIO: no such file '{missing}'"
    with pytest.raises(FileNotFoundError):
        vsched.run(missing)


def test_scenario_that_is_a_directory(cli: Cli, tmp_path: Path) -> None:
    assert "is a directory" in error_message(cli("run", tmp_path))


def test_scenario_that_is_not_utf8(cli: Cli, tmp_path: Path) -> None:
    scenario = tmp_path / "binary.toml"
    scenario.write_bytes(b"name = \xff\xfe\n")
    assert "not UTF-8" in error_message(cli("run", scenario))


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        (["--reps", "abc"], "--reps"),
        (["--reps", "0"], "reps"),
        (["--seed", "-1"], "seed"),
        (["--trace", "never-written.json", "--trace-limit", "-5"], "trace_limit"),
        (["--bogus"], "--bogus"),
        (["--policy", "fifo"], "--policy"),
    ],
)
def test_bad_option(cli: Cli, tiny_scenario: Path, options: list[str], fragment: str) -> None:
    assert fragment in error_message(cli("run", tiny_scenario, *options))


def test_missing_argument_and_unknown_command(cli: Cli) -> None:
    assert "SCENARIO" in error_message(cli("run"))
    assert "frob" in error_message(cli("frob"))


def test_bad_bench_length(cli: Cli) -> None:
    assert "--sim-s" in error_message(cli("bench", "--sim-s", "-1"))
    assert "--copies: expected an integer in 1..=64, got 65" in error_message(cli("bench", "--copies", "65"))


def test_bad_scenario_bench(cli: Cli, tiny_scenario: Path) -> None:
    assert "--runs: expected an integer in 1..=100000, got 0" in error_message(
        cli("bench", tiny_scenario, "--runs", "0")
    )
    assert error_message(cli("bench", "--runs", "3")).startswith("--runs: applies to a SCENARIO file")
    assert "--copies: expected an integer in 1..=64, got 65" in error_message(
        cli("bench", tiny_scenario, "--copies", "65")
    )
    assert error_message(cli("bench", tiny_scenario, "--sim-s", "1")).startswith("--sim-s: applies to")
    assert "SCENARIO" in error_message(cli("bench", tiny_scenario.with_name("missing.toml")))
    with pytest.raises(vsched.ScenarioError, match="--runs: expected an integer"):
        vsched.bench_scenario(tiny_scenario, runs=True)


def test_bad_scale_bench(cli: Cli, tiny_scenario: Path) -> None:
    # The scale comparisons run fixed scenarios: options that change a scenario are refused.
    refused = (([tiny_scenario], "SCENARIO"), (["--sim-s", "1"], "--sim-s"), (["--copies", "2"], "--copies"))
    for options, option in refused:
        message = error_message(cli("bench", "--scale", *options))
        assert message.startswith(f"{option}: does not apply to --scale"), message
    runs_error = error_message(cli("bench", "--scale", "--runs", "0"))
    assert "--runs: expected an integer in 1..=1000, got 0" in runs_error
    with pytest.raises(vsched.ScenarioError, match="--runs: expected an integer"):
        vsched.bench_scale(runs=True)


def test_trace_limit_without_trace(cli: Cli, tiny_scenario: Path) -> None:
    assert "--trace-limit" in error_message(cli("run", tiny_scenario, "--trace-limit", "10"))


def test_trace_that_cannot_be_written(cli: Cli, tiny_scenario: Path, tmp_path: Path) -> None:
    unwritable = tmp_path / "no-such-dir" / "trace.json"
    assert str(unwritable) in error_message(cli("run", tiny_scenario, "--trace", unwritable))


def test_out_that_is_a_file(cli: Cli, tiny_scenario: Path) -> None:
    assert "--out" in error_message(cli("run", tiny_scenario, "--out", tiny_scenario))


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("not json at all", "is not JSON ("),
        ('{"events": []}', "traceEvents"),
        (
            '{"traceEvents": [{"ph": "X", "tid": 0, "name": "a.v0", "ts": "soon", "dur": 1}]}',
            "traceEvents[0].ts",
        ),
        ('{"traceEvents": []}', "no run intervals"),
    ],
)
def test_unusable_trace(cli: Cli, tmp_path: Path, content: str, fragment: str) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(content, encoding="utf-8")
    assert fragment in error_message(cli("plot-trace", trace, "-o", tmp_path / "g.png"))
    assert not (tmp_path / "g.png").exists()


def test_missing_trace_file(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "t.json"
    assert error_message(cli("plot-trace", missing)) == f"TRACE: no such file '{missing}'"


def test_console_script_process_prints_no_traceback(tmp_path: Path) -> None:
    """The real entry point, in its own process, as a user runs it."""
    scenario = tmp_path / "bad.toml"
    scenario.write_text(with_replaced("pcpus = 2", "pcpus = 0"), encoding="utf-8")
    for arguments in (["run", str(scenario)], ["run", str(tmp_path / "x.toml")], ["run", "--reps"]):
        process = subprocess.run(
            [sys.executable, "-m", "vsched", *arguments], capture_output=True, text=True, check=False
        )
        assert process.returncode == 2
        assert process.stdout == ""
        assert len(process.stderr.splitlines()) == 1, process.stderr
        assert process.stderr.startswith("error: ")


@pytest.mark.parametrize("policy", [p["name"] for p in vsched.policies()])
def test_a_vm_created_mid_run_runs_or_is_refused_with_exit_2(cli: Cli, tmp_path: Path, policy: str) -> None:
    """Every policy either runs a VM created and destroyed during the run (it says so in
    `vsched policies --json` as `vm_lifecycle`) or refuses the scenario: exit 2, one line
    naming the field and listing the policies that would run it."""
    text = with_replaced(
        'vcpus = 2\n[vm.workload]\nkind = "cpu_hog"',
        'vcpus = 2\nstart_s = 0.1\nstop_s = 0.3\n[vm.workload]\nkind = "cpu_hog"',
    )
    scenario = tmp_path / "lifecycle.toml"
    scenario.write_text(text)
    info = next(p for p in vsched.policies() if p["name"] == policy)
    result = cli("run", scenario, "--policy", policy, "--json")
    if info["vm_lifecycle"]:
        assert result.exit_code == 0, result
        hog = next(vm for vm in json.loads(result.stdout)["runs"][0]["vms"] if vm["name"] == "hog")
        assert (hog["created_s"], hog["destroyed_s"]) == (0.1, 0.3)
        assert hog["cpu_s"] > 0
    else:
        message = error_message(result)
        assert message.startswith(f"vm[1].start_s: policy {policy} does not support VMs created or destroyed")
        assert "credit" in message
