"""Scenario generator for property-based tests and the fuzz campaign.

One generator serves both: it draws every choice from a `Source`, which is either a
`random.Random` (`RandomSource`, the campaign: case i of seed s is `generate(RandomSource.of(s,
i))`, so any case can be regenerated alone) or Hypothesis's `draw` (`HypothesisSource`, the
pytest property test, which can then shrink a failing case choice by choice).

A case is built in two steps:
1. a *valid-looking* scenario built from the registry: the policies and their parameters
   from `vsched.policies()`, the workloads and theirs from `vsched.workloads()`, a host, VMs,
   virtual clusters with `[cluster]` and `[network]`, events and a short `[run]` (0.05 to
   0.5 simulated seconds). It respects the documented rules (docs/scenario.md), so most
   such scenarios are valid, but it does not promise it: validation decides.
2. then, in most cases, mutations: extreme values (0, -1, 2^31, 2^63 - 1, 1e300, nan, inf,
   -0.0, huge or unicode strings...), wrong types, unknown keys, missing keys, deep nesting,
   huge tables, duplicated tables and keys, truncated TOML, random garbage.

The scenario is held as a plain document (dicts, lists, scalars) until it is written out as
TOML text by `to_toml`, which writes anything the mutations produce (including values TOML
cannot hold, such as integers beyond 64 bits, which the parser must then refuse). Choices are
ordered simplest first, so that Hypothesis shrinks towards plain scenarios.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Callable, Protocol, TypeVar

T = TypeVar("T")

# ---------------------------------------------------------------------------------------
# Where choices come from


class Source(Protocol):
    """Every random choice the generator makes."""

    def integer(self, low: int, high: int) -> int: ...

    def real(self, low: float, high: float) -> float: ...


def chance(src: Source, p: float) -> bool:
    """True with probability about `p` (shrinks to False)."""
    return src.integer(0, 999) >= 1000 - round(p * 1000)


def pick(src: Source, options: Sequence[T]) -> T:
    """One of `options` (shrinks to the first)."""
    return options[src.integer(0, len(options) - 1)]


def weighted(src: Source, options: Sequence[tuple[int, T]]) -> T:
    """One of `options`, each given with its weight (shrinks to the first)."""
    roll = src.integer(0, sum(w for w, _ in options) - 1)
    for weight, option in options:
        if roll < weight:
            return option
        roll -= weight
    raise AssertionError("unreachable")


class RandomSource:
    """Choices from a seeded `random.Random`: the campaign's source."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    @classmethod
    def of(cls, seed: int, index: int) -> RandomSource:
        """The source of case `index` of a campaign with `seed`, independent of any other case."""
        return cls(random.Random(f"vsched-fuzz:{seed}:{index}"))

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def real(self, low: float, high: float) -> float:
        return self.rng.uniform(low, high)


class HypothesisSource:
    """Choices drawn through Hypothesis (`st.data()` or a composite strategy's `draw`)."""

    def __init__(self, draw: Callable[[Any], Any]) -> None:
        from hypothesis import strategies as st

        self.draw = draw
        self.st = st

    def integer(self, low: int, high: int) -> int:
        value: int = self.draw(self.st.integers(low, high))
        return value

    def real(self, low: float, high: float) -> float:
        value: float = self.draw(self.st.floats(low, high, allow_nan=False, allow_infinity=False))
        return value


# ---------------------------------------------------------------------------------------
# The registry


@dataclass(frozen=True)
class Param:
    name: str
    default: Any
    choices: tuple[str, ...]  # for string parameters: the quoted names in its doc


@dataclass(frozen=True)
class Entry:
    name: str
    params: tuple[Param, ...]
    hypervisor: str = "generic"
    vm_lifecycle: bool = False


def _entries(raw: list[dict[str, Any]]) -> tuple[Entry, ...]:
    entries = []
    for item in raw:
        params = []
        for p in item["params"]:
            choices: tuple[str, ...] = ()
            if isinstance(p["default"], str):
                quoted = re.findall(r'"([^"]+)"', p["doc"])
                choices = tuple(dict.fromkeys([p["default"], *quoted]))
            params.append(Param(p["name"], p["default"], choices))
        entries.append(
            Entry(
                item["name"],
                tuple(params),
                item.get("hypervisor", "generic"),
                bool(item.get("vm_lifecycle", False)),
            )
        )
    return tuple(entries)


@cache
def registry() -> tuple[tuple[Entry, ...], tuple[Entry, ...]]:
    """(policies, workloads) as `vsched policies --json` and `vsched workloads --json` list them."""
    from vsched import _core

    return _entries(json.loads(_core.policies())), _entries(json.loads(_core.workloads()))


# ---------------------------------------------------------------------------------------
# Step 1: a valid-looking scenario

HARDWARE = ["nehalem-2010", "skylake-2017", "sapphire-2023", "ideal"]
XEN_VERSIONS = ["current", "3.0", "3.2", "4.0", "4.1"]
FINITE_WORKLOADS = {"spinlock", "bsp", "kernbench", "npb-ep", "npb-is", "npb-lu", "npb-cg"}


def _param_value(src: Source, param: Param, vcpus: int) -> Any:
    """A plausible value of a policy or workload parameter, near its default."""
    d = param.default
    if isinstance(d, bool):
        return chance(src, 0.5)
    if isinstance(d, str):
        return pick(src, param.choices or (d,))
    if param.name == "threads":
        return src.integer(0, 3 * vcpus)
    if param.name == "keys_log2":
        return src.integer(10, 24)
    if isinstance(d, int):
        if d == 0:
            return src.integer(0, 8)
        return max(1, round(d * pick(src, [1.0, 0.5, 0.25, 2.0, 0.1])))
    if isinstance(d, float):
        if d == 0.0:
            return round(src.real(0.0, 100.0), 3)
        return round(d * pick(src, [1.0, 0.5, 0.25, 2.0, 0.1]), 6)
    return d


def _params(src: Source, entry: Entry, vcpus: int, p: float) -> dict[str, Any]:
    params = {param.name: _param_value(src, param, vcpus) for param in entry.params if chance(src, p)}
    if params.get("wait", "spin-then-block") != "spin-then-block":
        params.pop("spin_limit_us", None)  # only meaningful with that wait
    return params


def _host(src: Source, policy: Entry) -> dict[str, Any]:
    pcpus = pick(src, [2, 1, 4, 3, 8, 6])
    host: dict[str, Any] = {"pcpus": pcpus}
    optional: list[tuple[str, Callable[[], Any]]] = [
        ("hardware", lambda: pick(src, HARDWARE)),
        ("cpu_ghz", lambda: round(src.real(1.0, 4.0), 2)),
        ("context_switch_us", lambda: round(src.real(0.0, 10.0), 3)),
        ("ipi_latency_us", lambda: round(src.real(0.0, 10.0), 3)),
        ("sched_cost_us", lambda: round(src.real(0.0, 5.0), 3)),
        ("ple_window_cycles", lambda: pick(src, [4096, 0, 1024, 16384])),
        ("ple_gap_cycles", lambda: pick(src, [128, 0, 64])),
        ("ipi_handler_us", lambda: round(src.real(0.0, 5.0), 3)),
        ("spin_iteration_cycles", lambda: src.integer(1, 64)),
        ("dom0_vcpus", lambda: src.integer(0, pcpus)),
        ("dom0_weight", lambda: src.integer(1, 1024)),
        ("clocks", lambda: pick(src, ["independent", "lockstep"])),
        ("vm_exit_us", lambda: round(src.real(0.0, 3.0), 3)),
        ("ple_handler_us", lambda: round(src.real(0.0, 3.0), 3)),
        ("idle_wake_us", lambda: round(src.real(0.0, 50.0), 3)),
        ("posted_interrupts", lambda: chance(src, 0.5)),
        ("ipi_virtualization", lambda: chance(src, 0.5)),
        ("timer_slop_us", lambda: round(src.real(0.0, 100.0), 3)),
        ("preempt_delay_us", lambda: round(src.real(0.0, 500.0), 3)),
        ("workload_start_spread_ms", lambda: round(src.real(0.0, 20.0), 3)),
        ("disk_seek_ms", lambda: round(src.real(0.0, 20.0), 3)),
        ("disk_mb_per_s", lambda: round(src.real(1.0, 500.0), 3)),
        ("blkback_request_us", lambda: round(src.real(0.0, 50.0), 3)),
        ("dom0_idle_wakes_per_s", lambda: round(src.real(0.0, 100.0), 3)),
        ("timer_irq_us", lambda: round(src.real(0.0, 10.0), 3)),
        ("thread_switch_us", lambda: round(src.real(0.0, 10.0), 3)),
        ("l2_kib", lambda: src.integer(0, 2048)),
        ("l3_kib_per_core", lambda: src.integer(0, 4096)),
        ("fill_buffers", lambda: src.integer(1, 32)),
        ("l3_latency_cycles", lambda: src.integer(0, 80)),
        ("memory_latency_ns", lambda: src.integer(0, 150)),
    ]
    for key, value in optional:
        if chance(src, 0.12):
            host[key] = value()
    if chance(src, 0.15):
        threads = 2 if pcpus % 2 == 0 and chance(src, 0.5) else 1
        cores = pcpus // threads
        host["threads_per_core"] = threads
        host["sockets"] = pick(src, [s for s in range(1, cores + 1) if cores % s == 0])
        if threads > 1 and chance(src, 0.5):
            host["smt_rate"] = round(src.real(0.3, 1.0), 3)
        if policy.hypervisor == "xen" and chance(src, 0.3):
            host["sched_gran"] = pick(src, ["cpu", "core", "socket"])
    if chance(src, 0.1):
        grow = src.integer(1, 4)
        host["ple_grow"] = grow
        window = host.get("ple_window_cycles", 4096)
        host["ple_window_max_cycles"] = window * pick(src, [1, 4, 64])
    if policy.hypervisor == "xen" and chance(src, 0.1):
        # The releases the policy itself follows (credit2's differ from Credit's).
        own = [p.choices for p in policy.params if p.name == "xen_version"]
        host["xen_version"] = pick(src, own[0] if own else XEN_VERSIONS)
    # A KVM host's own threads (on by default there, refused elsewhere) and their costs.
    if chance(src, 0.1):
        host["host_threads"] = policy.hypervisor == "kvm" and chance(src, 0.5)
    if policy.hypervisor == "kvm":
        for key, high in [
            ("kthread_wakes_per_s", 100.0),
            ("kthread_run_us", 200.0),
            ("virtio_blk_request_us", 50.0),
            ("vhost_packet_us", 10.0),
            ("host_tick_us", 10.0),
        ]:
            if chance(src, 0.1):
                host[key] = round(src.real(0.0, high), 3)
        if chance(src, 0.1):
            host["halt_poll_ns"] = pick(src, [200000, 0, 50000, 1000000])
            for key, values in [
                ("halt_poll_ns_grow", [2, 0, 4]),
                ("halt_poll_ns_grow_start", [10000, 1000, 100000]),
                ("halt_poll_ns_shrink", [0, 2, 4]),
            ]:
                if chance(src, 0.2):
                    host[key] = pick(src, values)
    return host


def _guest_kernel(src: Source, table: dict[str, Any]) -> None:
    mode = pick(src, [None, "tickless", "periodic", "off"])
    if mode is not None:
        table["guest_tick"] = mode
    hz = None
    if mode != "off" and chance(src, 0.2):
        hz = pick(src, [250, 100, 1000, 50])
        table["guest_hz"] = hz
    if mode in (None, "tickless") and chance(src, 0.2):
        table["idle_wakes_per_s"] = round(src.real(0.0, min(hz or 250, 100)), 3)


def _paravirt(src: Source, table: dict[str, Any]) -> None:
    if not chance(src, 0.25):
        return
    steal = chance(src, 0.5)
    table["pv_spinlocks"] = chance(src, 0.5)
    table["pv_steal_time"] = steal
    if steal:
        table["pv_tlb_flush"] = chance(src, 0.5)
        table["pv_sched_yield"] = chance(src, 0.5)
    table["pv_critical_sections"] = chance(src, 0.3)
    if chance(src, 0.2):
        table["guest_haltpoll"] = True
        if chance(src, 0.3):
            table["guest_halt_poll_ns"] = pick(src, [200000, 10000, 1000000])
    if chance(src, 0.3):
        table["sched_slice_us"] = round(src.real(100.0, 10000.0), 1)


def _workload(src: Source, workloads: tuple[Entry, ...], vcpus: int) -> dict[str, Any]:
    entry = pick(src, workloads)
    table: dict[str, Any] = {"kind": entry.name}
    table.update(_params(src, entry, vcpus, 0.3))
    if chance(src, 0.05):
        table["working_set_kb"] = src.integer(0, 1 << 16)
    return table


def valid_scenario(src: Source) -> dict[str, Any]:
    """A scenario built from the registry that follows the documented rules."""
    policies, workloads = registry()
    policy = pick(src, policies)
    doc: dict[str, Any] = {}
    if chance(src, 0.5):
        doc["name"] = pick(src, ["fuzz", "a b", "ünï", ""])
    # [run] first, so that a truncated file keeps its short horizon (the default is 60 s).
    run: dict[str, Any] = {}
    doc["run"] = run
    host = _host(src, policy)
    pcpus = host["pcpus"]
    doc["host"] = host
    doc["scheduler"] = {"name": policy.name, **_params(src, policy, pcpus, 0.25)}

    hosts = 1
    if chance(src, 0.2):
        hosts = src.integer(1, 3)
        doc["cluster"] = {"hosts": hosts}
        if chance(src, 0.3):
            doc["cluster"]["clocks"] = pick(src, ["independent", "aligned"])
    if chance(src, 0.15):
        network: dict[str, Any] = {}
        for key in ["latency_us", "intra_host_latency_us", "shm_latency_us", "dom0_packet_us"]:
            if chance(src, 0.4):
                network[key] = round(src.real(0.0, 50.0), 3)
        for key in ["bandwidth_gbps", "intra_host_bandwidth_gbps", "shm_bandwidth_gbps"]:
            if chance(src, 0.4):
                network[key] = round(src.real(0.1, 100.0), 3)
        if chance(src, 0.3):
            network["mtu_bytes"] = pick(src, [1500, 64, 9000])
        doc["network"] = network

    horizon = round(pick(src, [0.05, 0.1, 0.2]) * pick(src, [1.0, 0.5, 2.0, 2.5]), 3)
    run["horizon_s"] = horizon
    if chance(src, 0.3):
        run["until"] = pick(src, ["horizon", "all_done"])
    if chance(src, 0.3):
        run["seed"] = src.integer(0, 2**32)
    if chance(src, 0.1):
        run["reps"] = src.integer(1, 3)

    names: list[str] = []
    dom0 = host.get("dom0_vcpus", pcpus if policy.hypervisor == "xen" else 0) > 0
    if dom0:
        names += ["dom0"] if hosts == 1 else [f"dom0.{h}" for h in range(hosts)]
    vms = []
    for i in range(src.integer(0 if chance(src, 0.2) else 1, 3)):
        vcpus = src.integer(1, 2 * pcpus)
        vm: dict[str, Any] = {"name": pick(src, [f"vm{i}", f"v-{i}", f"ü{i}", f"vm {i}"]), "vcpus": vcpus}
        if chance(src, 0.2):
            vm["weight"] = pick(src, [256, 1, 512, 65535])
        if chance(src, 0.2):
            vm["type"] = pick(src, ["HIT", "CON"])
            if vm["type"] == "CON":
                vm["vcpus"] = vcpus = min(vcpus, pcpus)
        if chance(src, 0.15):
            vm["cap"] = src.integer(0, 100 * vcpus)
        if hosts > 1 and chance(src, 0.5):
            vm["host"] = src.integer(0, hosts - 1)
        _paravirt(src, vm)
        _guest_kernel(src, vm)
        vm["workload"] = _workload(src, workloads, vcpus)
        if vcpus > 1 and "threads" not in vm["workload"] and chance(src, 0.1):
            vm["idle_vcpus"] = src.integer(0, vcpus - 1)
        if policy.vm_lifecycle and chance(src, 0.15):
            start = round(src.real(0.0, horizon * 0.9), 4)
            vm["start_s"] = start
            if chance(src, 0.5):
                vm["stop_s"] = round(start + (horizon - start) * src.real(0.1, 1.0), 4)
        names.append(vm["name"])
        vms.append(vm)
    if vms:
        doc["vm"] = vms

    clusters = []
    for c in range(src.integer(0, 2) if chance(src, 0.25) or not vms else 0):
        vcpus = src.integer(1, pcpus)
        vc: dict[str, Any] = {"name": f"vc{c}", "vcpus": vcpus}
        members = list(range(hosts))
        if hosts > 1 and chance(src, 0.5):
            members = [h for h in range(hosts) if chance(src, 0.6)] or [0]
            vc["hosts"] = members
        if chance(src, 0.2):
            vc["type"] = pick(src, ["CON", "HIT"])
        if chance(src, 0.2):
            vc["weight"] = src.integer(1, 1024)
        _paravirt(src, vc)
        _guest_kernel(src, vc)
        vc["workload"] = _workload(src, workloads, vcpus)
        names += [f"vc{c}.{k}" for k in range(len(members))]
        clusters.append(vc)
    if clusters:
        doc["virtual_cluster"] = clusters

    events = []
    for _ in range(src.integer(0, 2) if chance(src, 0.2) and names else 0):
        events.append(
            {
                "at_s": round(src.real(0.0, horizon), 4),
                "vm": pick(src, names),
                "type": pick(src, ["CON", "HIT"]),
            }
        )
    if events:
        doc["event"] = events
    return doc


# ---------------------------------------------------------------------------------------
# Step 2: mutations


class Raw(str):
    """Text written into the TOML as is (deep nesting, out-of-range literals)."""


EXTREME_INTS = [0, -1, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**53 + 1, 2**62, 2**63 - 1, -(2**63)]
EXTREME_FLOATS = [
    -0.0,
    1e-300,
    5e-324,
    1e300,
    1.7976931348623157e308,
    math.nan,
    math.inf,
    -math.inf,
    -1.0,
    0.5,
]
EXTREME_STRINGS = [
    "",
    " ",
    "nan",
    "0",
    "-1",
    "CON ",
    "con",
    "Ünïcödé ☃ 日本語 🦀",
    "\u202eevil",
    "a\x00b",
    "tab\there",
    "line\nbreak",
    '"quoted"',
    "\\",
    "dom0",
    "dom0.1",
]
# Literals TOML cannot hold: the parser must refuse them with one line.
OUT_OF_RANGE_LITERALS = [
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "1e400",
    "0x1_0000_0000_0000_0000",
]


def extreme_value(src: Source) -> Any:
    kind = weighted(
        src, [(4, "int"), (4, "float"), (3, "string"), (1, "bool"), (1, "array"), (1, "table"), (1, "raw")]
    )
    if kind == "int":
        return pick(src, EXTREME_INTS)
    if kind == "float":
        return pick(src, EXTREME_FLOATS)
    if kind == "string":
        if chance(src, 0.1):
            return pick(src, ["x", "é", "🦀"]) * src.integer(1000, 200_000)
        return pick(src, EXTREME_STRINGS)
    if kind == "bool":
        return chance(src, 0.5)
    if kind == "array":
        return pick(src, [[], [1, 2], ["a"], [1.5, -1], [[]], [{}]])
    if kind == "table":
        return pick(src, [{}, {"a": 1}, {"kind": "cpu_hog"}])
    return Raw(pick(src, OUT_OF_RANGE_LITERALS))


def wrong_type(value: Any) -> Any:
    """A value of another TOML type than `value`."""
    if isinstance(value, bool):
        return "true"
    if isinstance(value, int):
        return float(value) + 0.5 if value < 2**52 else str(value)
    if isinstance(value, float):
        return str(value) if math.isfinite(value) else True
    if isinstance(value, str):
        return 1
    if isinstance(value, list):
        return {"0": value[0]} if value else "[]"
    return [value]


def _containers(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """Every (path, table-or-array) in the document, the document itself first."""
    found: list[tuple[tuple[Any, ...], Any]] = []
    if isinstance(doc, dict):
        found.append((path, doc))
        for key, value in doc.items():
            found += _containers(value, (*path, key))
    elif isinstance(doc, list):
        found.append((path, doc))
        for index, value in enumerate(doc):
            found += _containers(value, (*path, index))
    return found


def _slots(doc: Any) -> list[tuple[Any, Any, tuple[Any, ...]]]:
    """Every (container, key, path) slot holding a value."""
    slots = []
    for path, container in _containers(doc):
        keys = list(container.keys()) if isinstance(container, dict) else list(range(len(container)))
        slots += [(container, key, (*path, key)) for key in keys]
    return slots


def path_name(path: tuple[Any, ...]) -> str:
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path) or "<root>"


UNKNOWN_KEYS = [
    "colour",
    "pcpu",
    "vcpu",
    "iterationz",
    "Name",
    "name ",
    "ü",
    "",
    "a\nb",
    "cr\r",
    "\u2028",
    "workload",
    "host",
    "vm",
    "x" * 300,
]


def nest(depth: int, inline_tables: bool) -> Raw:
    """A value nested `depth` levels deep: arrays or inline tables."""
    if inline_tables:
        return Raw("{a = " * depth + "1" + "}" * depth)
    return Raw("[" * depth + "1" + "]" * depth)


# Large but representable values: wrapped into 32 bits, as a count of things to allocate...
EXTREME_COUNTS = [2**16, 2**24, 2**31, 2**32, 2**32 + 1, 2**40, 2**62, 2**63 - 1, -1, 0]
EXTREME_AMOUNTS = [1e15, 1e-9, 5e-324, 1e300, math.inf, math.nan, -0.0, -1.0, 0.0]


def _mutate_parameter(src: Source, doc: dict[str, Any], notes: list[str]) -> bool:
    """A policy or workload parameter (from the registry) set to an extreme of its type."""
    policies, workloads = registry()
    tables: list[tuple[str, dict[str, Any], Entry]] = []
    scheduler = doc.get("scheduler")
    if isinstance(scheduler, dict):
        tables += [("scheduler", scheduler, p) for p in policies if p.name == scheduler.get("name")]
    for section in ("vm", "virtual_cluster"):
        items = doc.get(section)
        for i, item in enumerate(items if isinstance(items, list) else []):
            workload = item.get("workload") if isinstance(item, dict) else None
            if isinstance(workload, dict):
                found = [w for w in workloads if w.name == workload.get("kind")]
                tables += [(f"{section}.[{i}].workload", workload, w) for w in found]
    tables = [t for t in tables if t[2].params]
    if not tables:
        return False
    where, table, entry = pick(src, tables)
    param = pick(src, entry.params)
    default = param.default
    if isinstance(default, int) and not isinstance(default, bool):
        value: Any = pick(src, EXTREME_COUNTS)
    elif isinstance(default, float):
        value = pick(src, EXTREME_AMOUNTS)
    else:
        value = extreme_value(src)
    table[param.name] = value
    notes.append(f"{where}.{param.name} = {to_toml_value(value)[:40]}")
    return True


def mutate_document(src: Source, doc: dict[str, Any], notes: list[str]) -> None:
    """One structural mutation of `doc`, in place, described in `notes`."""
    action = weighted(
        src,
        [
            (4, "parameter"),
            (5, "extreme"),
            (3, "wrong type"),
            (2, "unknown key"),
            (2, "missing key"),
            (1, "deep nesting"),
            (1, "many tables"),
        ],
    )
    if action == "parameter" and _mutate_parameter(src, doc, notes):
        return
    # Not the horizon: without it a run lasts the default 60 s, slow but correct.
    slots = [slot for slot in _slots(doc) if slot[2] not in (("run",), ("run", "horizon_s"))]
    if action in ("extreme", "wrong type", "missing key", "deep nesting") and slots:
        container, key, path = pick(src, slots)
        if action == "extreme":
            container[key] = extreme_value(src)
            notes.append(f"{path_name(path)} = extreme {to_toml_value(container[key])[:40]}")
        elif action == "wrong type":
            container[key] = wrong_type(container[key])
            notes.append(f"{path_name(path)}: wrong type")
        elif action == "missing key":
            del container[key]
            notes.append(f"{path_name(path)}: removed")
        else:
            depth = pick(src, [20, 100, 1000, 50_000])
            container[key] = nest(depth, chance(src, 0.5))
            notes.append(f"{path_name(path)}: nested {depth} deep")
    elif action == "unknown key":
        tables = [(path, c) for path, c in _containers(doc) if isinstance(c, dict)]
        path, table = pick(src, tables)
        key = pick(src, UNKNOWN_KEYS)
        table[key] = extreme_value(src) if chance(src, 0.5) else 1
        notes.append(f"{path_name((*path, key))}: unknown key")
    elif action == "many tables":
        count = pick(src, [50, 300, 2000])
        vms = doc.get("vm")
        if chance(src, 0.5) and isinstance(vms, list) and vms and isinstance(vms[0], dict):
            base = vms[0]
            doc["vm"] = [dict(base, name=f"m{i}") for i in range(count)]
            notes.append(f"{count} [[vm]] tables")
        else:
            doc["event"] = [{"at_s": 0.0, "vm": "nobody", "type": "CON"}] * count
            notes.append(f"{count} [[event]] tables")


def mutate_text(src: Source, text: str, notes: list[str]) -> str:
    """One textual mutation of the TOML: truncation, garbage, duplicated tables and keys."""
    lines = text.splitlines(keepends=True)
    action = weighted(
        src,
        [
            (3, "truncate"),
            (2, "garbage"),
            (2, "duplicate table"),
            (1, "duplicate key"),
            (1, "drop line"),
            (1, "swap lines"),
        ],
    )
    if action == "truncate" and text:
        cut = src.integer(0, len(text) - 1)
        notes.append(f"truncated at {cut} of {len(text)}")
        return text[:cut]
    if action == "garbage":
        at = src.integer(0, len(text))
        junk = "".join(
            chr(src.integer(0, 0x7F) if chance(src, 0.8) else src.integer(0x80, 0xD7FF))
            for _ in range(src.integer(1, 16))
        )
        notes.append(f"garbage {junk!r} at {at}")
        return text[:at] + junk + text[at:]
    headers = [i for i, line in enumerate(lines) if re.match(r"\[[^\[]", line)]
    if action == "duplicate table" and headers:
        i = pick(src, headers)
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("[")), len(lines))
        notes.append(f"duplicated table {lines[i].strip()}")
        return "".join(lines) + "\n" + "".join(lines[i:end])
    keys = [i for i, line in enumerate(lines) if "=" in line and not line.startswith("[")]
    if action == "duplicate key" and keys:
        i = pick(src, keys)
        notes.append(f"duplicated key {lines[i].strip()[:40]}")
        return "".join(lines[: i + 1] + [lines[i]] + lines[i + 1 :])
    droppable = [i for i, line in enumerate(lines) if not line.startswith("horizon_s")]  # 60 s: slow
    if action == "drop line" and droppable:
        i = pick(src, droppable)
        notes.append(f"dropped line {lines[i].strip()[:40]}")
        return "".join(lines[:i] + lines[i + 1 :])
    if len(lines) > 1:
        i = src.integer(0, len(lines) - 2)
        notes.append(f"swapped lines {i + 1} and {i + 2}")
        return "".join(lines[:i] + [lines[i + 1], lines[i]] + lines[i + 2 :])
    return text


def random_bytes(src: Source) -> bytes:
    """Pure noise, or TOML-ish tokens in random order, or invalid UTF-8."""
    style = src.integer(0, 2)
    n = src.integer(0, 400)
    if style == 0:
        return bytes(src.integer(0, 255) for _ in range(n))
    if style == 1:
        tokens = [
            "[",
            "]",
            "[[",
            "]]",
            "=",
            '"',
            "'",
            "\n",
            "host",
            "vm",
            "pcpus",
            "1",
            "-",
            ".",
            "#",
            "{",
            "}",
            ",",
            " ",
            "nan",
            "inf",
            "0x",
            "\\u",
        ]
        return "".join(pick(src, tokens) for _ in range(n)).encode()
    return b'[host]\npcpus = 2\nname = "\xff\xfe"\n'[: n + 5]


# ---------------------------------------------------------------------------------------
# Cases


@dataclass
class Case:
    """A generated scenario file: its bytes, and how it was made."""

    data: bytes
    kind: str
    notes: list[str] = field(default_factory=list)

    @property
    def text(self) -> str | None:
        """The file as text, or None if it is not UTF-8."""
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError:
            return None


def _keep_big_scenarios_short(doc: dict[str, Any]) -> None:
    """Hundreds of VMs only with a short explicit horizon: with the default one (60 s, when a
    mutation removed `run` or `horizon_s`) a run is slow but correct, not a hang."""
    run = doc.get("run")
    horizon = run.get("horizon_s") if isinstance(run, dict) else None
    short = isinstance(horizon, (int, float)) and not isinstance(horizon, bool) and horizon <= 0.5
    if isinstance(doc.get("vm"), list) and len(doc["vm"]) > 50 and not short:
        doc["vm"] = doc["vm"][:50]


def generate(src: Source) -> Case:
    """One case: a valid-looking scenario (about a third of cases), or one mutated."""
    kind = weighted(src, [(7, "valid"), (9, "mutated"), (3, "text-mutated"), (1, "noise")])
    if kind == "noise":
        return Case(random_bytes(src), kind, ["random bytes"])
    doc = valid_scenario(src)
    notes: list[str] = []
    if kind == "mutated":
        for _ in range(src.integer(1, 3)):
            mutate_document(src, doc, notes)
        _keep_big_scenarios_short(doc)
    text = to_toml(doc)
    if kind == "text-mutated":
        for _ in range(src.integer(1, 2)):
            text = mutate_text(src, text, notes)
    return Case(text.encode("utf-8", errors="surrogatepass"), kind, notes)


# ---------------------------------------------------------------------------------------
# TOML output

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_PLAIN_STRING = re.compile(r'^[^"\\\x00-\x1f\x7f]*$')


def toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else toml_string(key)


def toml_string(s: str) -> str:
    if _PLAIN_STRING.match(s):
        return '"' + s + '"'
    out = []
    for ch in s:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def to_toml_value(value: Any) -> str:
    """A value as an inline TOML value (or the raw text of a `Raw`)."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        text = repr(value)
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(to_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {to_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {value!r} as TOML")


def _is_table_array(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, dict) and not isinstance(v, Raw) for v in value)
    )


def _write_table(table: dict[str, Any], prefix: str, out: list[str]) -> None:
    for key, value in table.items():
        if not isinstance(value, dict) and not _is_table_array(value):
            out.append(f"{toml_key(key)} = {to_toml_value(value)}\n")
    for key, value in table.items():
        name = f"{prefix}.{toml_key(key)}" if prefix else toml_key(key)
        if isinstance(value, dict):
            out.append(f"\n[{name}]\n")
            _write_table(value, name, out)
        elif _is_table_array(value):
            for item in value:
                out.append(f"\n[[{name}]]\n")
                _write_table(item, name, out)


def to_toml(doc: dict[str, Any]) -> str:
    """The document as TOML text: scalars first, then tables and arrays of tables."""
    out: list[str] = []
    _write_table(doc, "", out)
    return "".join(out).lstrip("\n")
