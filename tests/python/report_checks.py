"""What must hold of any run of any scenario: the properties the fuzz test and the fuzz
campaign check (scenario_gen.py makes the scenarios).

- `error_line_problem`: an error is one non-empty line, without a traceback or a panic.
- `report_problems`: the invariants of a JSON report (docs/scenario.md, "Output";
  crates/vsched-model/src/metrics.rs defines each field).
- `without_wall_clock`: the report minus its wall-clock fields, which determinism leaves out.
"""

from __future__ import annotations

import json
import math
from typing import Any

# Rounding slack: times are nanosecond integers turned into seconds, shares are ratios.
EPS = 1e-6


def error_line_problem(message: str) -> str | None:
    """What is wrong with an error message (or an error's stderr), or None if it is one line."""
    if "Traceback" in message:
        return "traceback"
    if "panicked" in message:
        return "panic"
    lines = message.splitlines()
    if len(lines) != 1 or not lines[0].strip():
        return f"expected one non-empty line, got {len(lines)} lines"
    return None


WALL_CLOCK_FIELDS = frozenset({"wall_s"})


def without_wall_clock(value: Any) -> Any:
    """The report with every `wall_s` removed, at any depth."""
    if isinstance(value, dict):
        return {k: without_wall_clock(v) for k, v in value.items() if k not in WALL_CLOCK_FIELDS}
    if isinstance(value, list):
        return [without_wall_clock(v) for v in value]
    return value


def canonical(report_text: str) -> str:
    """The report text reduced to what the same scenario and seed must reproduce exactly."""
    return json.dumps(without_wall_clock(json.loads(report_text)), sort_keys=True)


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")

    def number(self, where: str, value: Any, low: float = 0.0, high: float = math.inf) -> bool:
        """`value` is a finite number in [low, high], up to rounding."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(where, f"expected a number, got {value!r}")
            return False
        if not math.isfinite(value) or value < low - EPS or value > high + EPS * max(1.0, abs(high)):
            self.fail(where, f"expected a number in [{low}, {high}], got {value!r}")
            return False
        return True

    def optional(self, where: str, value: Any, low: float = 0.0, high: float = math.inf) -> None:
        if value is not None:
            self.number(where, value, low, high)

    def count(self, where: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            self.fail(where, f"expected a count (integer >= 0), got {value!r}")


def _check_vm(c: _Checker, where: str, vm: dict[str, Any], sim_s: float, host_pcpus: int) -> None:
    vcpus = vm.get("vcpus")
    if not isinstance(vcpus, int) or vcpus < 1:
        c.fail(f"{where}.vcpus", f"expected an integer >= 1, got {vcpus!r}")
        return
    # null: the VM was due after the run ended, so it never existed (nor ran).
    created = vm.get("created_s")
    c.optional(f"{where}.created_s", created, 0.0, sim_s)
    if created is None:
        c.number(f"{where}.cpu_s (never created)", vm.get("cpu_s"), 0.0, 0.0)
    destroyed = vm.get("destroyed_s")
    c.optional(
        f"{where}.destroyed_s", destroyed, created if isinstance(created, (int, float)) else 0.0, sim_s
    )
    lifetime = 0.0 if created is None else sim_s
    if isinstance(created, (int, float)):
        end = destroyed if isinstance(destroyed, (int, float)) else sim_s
        lifetime = max(0.0, end - created)
    c.optional(f"{where}.completion_s", vm.get("completion_s"), 0.0, lifetime)
    # A vCPU holds a pCPU, or waits for one, or is blocked: never more than its lifetime.
    vcpu_time = vcpus * lifetime
    cpu_s: Any = vm.get("cpu_s")
    spin_s, steal_s = vm.get("spin_s"), vm.get("steal_s")
    if c.number(f"{where}.cpu_s", cpu_s, 0.0, min(vcpu_time, host_pcpus * sim_s)):
        c.number(f"{where}.spin_s", spin_s, 0.0, cpu_s)
    c.number(f"{where}.steal_s", steal_s, 0.0, vcpu_time)
    if (
        isinstance(cpu_s, (int, float))
        and isinstance(steal_s, (int, float))
        and cpu_s + steal_s > vcpu_time + EPS
    ):
        c.fail(where, f"cpu_s + steal_s = {cpu_s + steal_s} exceeds vcpus x lifetime = {vcpu_time}")
    for share in ("cpu_share", "weight_share", "entitled_share"):
        c.number(f"{where}.{share}", vm.get(share), 0.0, 1.0)
    # Entitled to what it asked for at most: a pCPU per vCPU running or runnable.
    entitled = vm.get("entitled_share")
    if isinstance(entitled, (int, float)) and isinstance(cpu_s, (int, float)) and isinstance(steal_s, float):
        asked = (cpu_s + steal_s) / (host_pcpus * sim_s) if sim_s > 0 else 0.0
        if entitled > asked + EPS:
            c.fail(f"{where}.entitled_share", f"{entitled} exceeds what it asked for, {asked}")
    finished = vm.get("finished")
    if finished not in (None, True, False) or (finished is True) != (vm.get("completion_s") is not None):
        c.fail(f"{where}.finished", f"{finished!r} does not match completion_s {vm.get('completion_s')!r}")
    for share in ("spin_share",):
        c.optional(f"{where}.{share}", vm.get(share), 0.0, 1.0)
    for key in ("wake_latency_us_mean", "throughput_rps", "latency_ms_mean", "latency_ms_p99"):
        c.optional(f"{where}.{key}", vm.get(key))
    for key, value in vm.items():
        if isinstance(value, int) and not isinstance(value, bool):  # counts, weight, cap, host
            c.count(f"{where}.{key}", value)
    skews = [vm.get(f"costart_skew_us_{q}") for q in ("p50", "p99")]
    for q, skew in zip(("p50", "p99"), skews):
        c.optional(f"{where}.costart_skew_us_{q}", skew)
    quantiles = vm.get("costart_skew_us_quantiles")
    if quantiles is not None and (
        not isinstance(quantiles, list) or any(b < a for a, b in zip(quantiles, quantiles[1:]))
    ):
        c.fail(f"{where}.costart_skew_us_quantiles", f"expected a non-decreasing list, got {quantiles!r}")


def _check_host(c: _Checker, where: str, host: dict[str, Any], sim_s: float) -> None:
    pcpus = host.get("pcpus")
    if not isinstance(pcpus, int) or pcpus < 1:
        c.fail(f"{where}.pcpus", f"expected an integer >= 1, got {pcpus!r}")
        return
    c.number(f"{where}.utilization", host.get("utilization"), 0.0, 1.0)
    c.number(f"{where}.frag_idle_s", host.get("frag_idle_s"), 0.0, pcpus * sim_s)
    c.number(f"{where}.cache_refill_s", host.get("cache_refill_s"), 0.0)
    c.number(f"{where}.co_launches_per_s", host.get("co_launches_per_s"), 0.0)
    c.optional(f"{where}.fairness", host.get("fairness"), 0.0, 1.0)
    for key in (
        "context_switches",
        "ipis",
        "migrations",
        "sched_invocations",
        "ple_exits",
        "co_launches",
        "co_ipis",
    ):
        c.count(f"{where}.{key}", host.get(key))
    if host.get("co_ipis", 0) > host.get("ipis", 0):
        c.fail(where, "co_ipis exceeds ipis")
    counters = host.get("policy_counters")
    if not isinstance(counters, dict):
        c.fail(f"{where}.policy_counters", f"expected a table, got {counters!r}")
    else:
        for name, value in counters.items():
            c.count(f"{where}.policy_counters.{name}", value)


def report_problems(report: dict[str, Any], reps: int = 1) -> list[str]:
    """Every broken invariant of a `vsched run --json` report (empty if none)."""
    c = _Checker()
    horizon: Any = report.get("horizon_s")
    if not c.number("horizon_s", horizon, 0.0):
        return c.problems
    runs = report.get("runs")
    if not isinstance(runs, list) or len(runs) != reps:
        return [f"runs: expected {reps} runs, got {runs!r:.80}"]
    n_hosts = report.get("hosts", 1)
    for r, run in enumerate(runs):
        at = f"runs[{r}]"
        c.count(f"{at}.events", run.get("events"))
        sim_s = run.get("sim_s")
        if not c.number(f"{at}.sim_s", sim_s, 0.0, horizon):
            continue
        hosts = run.get("hosts") or [run.get("host")]
        if not all(isinstance(h, dict) for h in hosts):
            c.fail(f"{at}.hosts", "expected host tables")
            continue
        if len(hosts) != n_hosts:
            c.fail(f"{at}.hosts", f"expected {n_hosts} hosts, got {len(hosts)}")
        for h, host in enumerate(hosts):
            _check_host(c, f"{at}.hosts[{h}]", host, sim_s)
        _check_host(c, f"{at}.host", run["host"], sim_s)
        total_pcpus = sum(h.get("pcpus", 0) for h in hosts)
        if run["host"].get("pcpus") != total_pcpus:
            c.fail(
                f"{at}.host.pcpus",
                f"expected the sum over hosts {total_pcpus}, got {run['host'].get('pcpus')}",
            )
        vms = run.get("vms")
        if not isinstance(vms, list):
            c.fail(f"{at}.vms", "expected a list")
            continue
        busy = [0.0] * len(hosts)
        weight_share = [0.0] * len(hosts)
        entitled = [0.0] * len(hosts)
        for v, vm in enumerate(vms):
            where = f"{at}.vms[{v}]({vm.get('name')})"
            h = vm.get("host", 0)
            if not isinstance(h, int) or not 0 <= h < len(hosts):
                c.fail(f"{where}.host", f"expected a host index below {len(hosts)}, got {h!r}")
                continue
            _check_vm(c, where, vm, sim_s, hosts[h]["pcpus"])
            if isinstance(vm.get("cpu_s"), (int, float)):
                busy[h] += vm["cpu_s"]
            if isinstance(vm.get("weight_share"), (int, float)):
                weight_share[h] += vm["weight_share"]
            if isinstance(vm.get("entitled_share"), (int, float)):
                entitled[h] += vm["entitled_share"]
        for h, host in enumerate(hosts):
            capacity = host["pcpus"] * sim_s
            if busy[h] > capacity + EPS:
                c.fail(
                    f"{at}.hosts[{h}]", f"its VMs' cpu_s sum to {busy[h]}, above pcpus x sim_s = {capacity}"
                )
            if weight_share[h] > 1.0 + EPS:
                c.fail(f"{at}.hosts[{h}]", f"its VMs' weight_share sum to {weight_share[h]}")
            if entitled[h] > 1.0 + EPS:
                c.fail(f"{at}.hosts[{h}]", f"its VMs' entitled_share sum to {entitled[h]}")
        names = [vm.get("name") for vm in vms]
        if len(set(names)) != len(names):
            c.fail(f"{at}.vms", f"expected unique names, got {names!r:.200}")
        for k, cluster in enumerate(run.get("virtual_clusters") or []):
            c.optional(f"{at}.virtual_clusters[{k}].completion_s", cluster.get("completion_s"), 0.0, sim_s)
        io = run.get("io")
        if io is not None:
            for key in ("disk_requests", "disk_bytes", "disk_completed"):
                c.count(f"{at}.io.{key}", io.get(key))
            if io.get("disk_completed", 0) > io.get("disk_requests", 0):
                c.fail(f"{at}.io", "more disk requests completed than issued")
            c.number(f"{at}.io.disk_busy_s", io.get("disk_busy_s"), 0.0)
            for key in ("disk_latency_ms_mean", "disk_wait_ms_mean"):
                c.optional(f"{at}.io.{key}", io.get(key))
        network = run.get("network")
        if network is not None:
            for key in ("messages", "bytes", "packets", "driver_passes"):
                c.count(f"{at}.network.{key}", network.get(key))
            c.optional(f"{at}.network.message_latency_us_mean", network.get("message_latency_us_mean"))
    summary = report.get("summary")
    if not isinstance(summary, dict) or not isinstance(summary.get("vms"), list):
        c.fail("summary", "expected a table with vms")
    elif runs and isinstance(runs[0].get("vms"), list):
        if [vm.get("name") for vm in summary["vms"]] != [vm.get("name") for vm in runs[0]["vms"]]:
            c.fail("summary.vms", "expected the runs' VMs in the same order")
        for vm in summary["vms"]:
            finished = vm.get("runs_finished")
            if not isinstance(finished, int) or not 0 <= finished <= reps:
                c.fail(
                    f"summary.vms({vm.get('name')}).runs_finished", f"expected 0..={reps}, got {finished!r}"
                )
        if reps == 1:
            for vm_run, vm_sum in zip(runs[0]["vms"], summary["vms"]):
                for key in ("cpu_s", "spin_s", "steal_s"):
                    if vm_sum.get(f"{key}_mean") != vm_run.get(key) or vm_sum.get(f"{key}_std") not in (
                        0,
                        0.0,
                    ):
                        c.fail(
                            f"summary.vms({vm_run.get('name')}).{key}", "one run: expected its value, std 0"
                        )
    return c.problems
