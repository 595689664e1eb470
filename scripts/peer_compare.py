#!/usr/bin/env python3
"""vsched against the SimPy peer model (issue 20): simulated seconds per CPU-second of each on
the peer's two scenarios, interleaved, on one core.

    python -m venv /tmp/peer && /tmp/peer/bin/pip install simpy
    python scripts/peer_compare.py --peer-dir ../shared/peers --peer-python /tmp/peer/bin/python --pairs 5

The peer directory holds `rr_simpy.py` and its vsched scenarios `rr-peer-user.toml` (user-mode
ticket spinlock) and `rr-peer.toml` (kernel-mode spinning with pause-loop exits). Each pair
runs both once on CPU 1 (`taskset`), alternating which goes first; vsched's figure is the run's
own `sim_s / wall_s` (the simulation, without the interpreter's start-up), SimPy's its
`sim_s_per_cpu_s`. Prints one JSON document: medians, the ratio's median and range, and each
side's event count, decisions and migrations.

With every vsched default on, vsched simulates more than the peer does (guest ticks, timer
slop, clocks out of step, exit and cache costs: docs/realism.md). `--like-peer` turns those
off, as the peer's README asks, so that both simulate the same thing: `hardware = "ideal"`
with the peer's dispatch costs (0.5 µs a decision, 2 µs a switch), clocks in lockstep, no
timer slop, no workload start spread, no guest ticks. vsched then counts the peer's events,
decisions and migrations (docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

SCENARIOS = (("user", "rr-peer-user.toml"), ("kernel", "rr-peer.toml"))
# What the peer leaves out, turned off in vsched (see the module notes).
LIKE_PEER = {
    "host.hardware": "ideal",
    "host.sched_cost_us": 0.5,
    "host.context_switch_us": 2,
    "host.clocks": "lockstep",
    "host.timer_slop_us": 0,
    "host.workload_start_spread_ms": 0,
}


def like_peer(scenario: Path, directory: Path) -> Path:
    """A copy of `scenario` in `directory` with the mechanisms the peer lacks turned off."""
    import vsched

    loaded = vsched.Scenario.from_file(scenario)
    overrides: dict[str, object] = dict(LIKE_PEER)
    for vm in loaded["vm"]:
        overrides[f"vm.{vm['name']}.guest_tick"] = "off"
    path = directory / scenario.name
    path.write_text(loaded.with_overrides(overrides).to_toml(), encoding="utf-8")
    return path


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr and exit: 2 for bad options, 1 for a run that failed."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def run_json(command: list[str], cwd: Path) -> Any:
    """Runs `command` on CPU 1 and parses its JSON output; exits 1 naming the command if it fails."""
    done = subprocess.run(["taskset", "-c", "1", *command], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        fail(f"{' '.join(command)} failed: {lines[-1]}", code=1)
    return json.loads(done.stdout)


def check_args(args: argparse.Namespace) -> None:
    """Exits 2 with one line naming the first bad option."""
    if args.pairs < 1:
        fail(f"--pairs: expected a whole number of at least 1, got {args.pairs}")
    for name in (*(scenario for _, scenario in SCENARIOS), "rr_simpy.py"):
        if not (args.peer_dir / name).is_file():
            fail(f"--peer-dir: expected a directory holding {name}, not found in {args.peer_dir}")
    if shutil.which(args.peer_python) is None:
        fail(f"--peer-python: expected a Python with simpy installed, found no executable {args.peer_python}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--peer-dir", type=Path, required=True)
    parser.add_argument("--peer-python", default="python3", help="a Python with simpy installed")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument(
        "--like-peer", action="store_true", help="turn off in vsched what the peer does not model"
    )
    args = parser.parse_args()
    # The peer runs from its own directory: a relative path to its Python is taken from here
    # (absolute(), not resolve(): a virtual environment's python is a symlink to the base one).
    if "/" in args.peer_python:
        args.peer_python = str(Path(args.peer_python).absolute())
    check_args(args)
    results: dict[str, dict[str, float]] = {}
    scratch = Path(tempfile.mkdtemp(prefix="peer-compare-"))
    for mode, name in SCENARIOS:
        scenario = args.peer_dir.resolve() / name
        if args.like_peer:
            scenario = like_peer(scenario, scratch)
        ours, theirs, ratios = [], [], []
        events = {}
        for pair in range(args.pairs):
            order = ("vsched", "simpy") if pair % 2 == 0 else ("simpy", "vsched")
            speed = {}
            for who in order:
                if who == "vsched":
                    run = run_json(
                        [sys.executable, "-m", "vsched", "run", str(scenario), "--json"], args.peer_dir
                    )["runs"][0]
                    speed[who] = run["sim_s"] / run["wall_s"]
                    events["vsched_events"] = run["events"]
                    events["vsched_decisions"] = run["host"]["sched_invocations"]
                    events["vsched_migrations"] = run["host"]["migrations"]
                else:
                    peer = run_json(
                        [args.peer_python, "rr_simpy.py", "--mode", mode, "--horizon-s", "60"], args.peer_dir
                    )
                    speed[who] = peer["sim_s_per_cpu_s"]
                    events["simpy_model_events"] = peer["model_events"]
                    events["simpy_decisions"] = peer["decisions"]
                    events["simpy_migrations"] = peer["migrations"]
            ours.append(speed["vsched"])
            theirs.append(speed["simpy"])
            ratios.append(speed["vsched"] / speed["simpy"])
        results[mode] = {
            "vsched_sim_s_per_s": statistics.median(ours),
            "simpy_sim_s_per_s": statistics.median(theirs),
            "ratio_median": statistics.median(ratios),
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
            **events,
        }
    print(json.dumps({"like_peer": args.like_peer, **results}, indent=1))


if __name__ == "__main__":
    main()
