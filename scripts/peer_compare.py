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
side's event count (they differ once vsched models what the peer does not: docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
from pathlib import Path
from typing import Any

SCENARIOS = (("user", "rr-peer-user.toml"), ("kernel", "rr-peer.toml"))


def run_json(command: list[str], cwd: Path) -> Any:
    done = subprocess.run(
        ["taskset", "-c", "1", *command], cwd=cwd, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--peer-dir", type=Path, required=True)
    parser.add_argument("--peer-python", default="python3", help="a Python with simpy installed")
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    for mode, scenario in SCENARIOS:
        ours, theirs, ratios = [], [], []
        events = {}
        for pair in range(args.pairs):
            order = ("vsched", "simpy") if pair % 2 == 0 else ("simpy", "vsched")
            speed = {}
            for who in order:
                if who == "vsched":
                    run = run_json(["vsched", "run", scenario, "--json"], args.peer_dir)["runs"][0]
                    speed[who] = run["sim_s"] / run["wall_s"]
                    events["vsched_events"] = run["events"]
                else:
                    peer = run_json(
                        [args.peer_python, "rr_simpy.py", "--mode", mode, "--horizon-s", "60"], args.peer_dir
                    )
                    speed[who] = peer["sim_s_per_cpu_s"]
                    events["simpy_model_events"] = peer["model_events"]
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
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
