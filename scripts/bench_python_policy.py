"""Speed of a policy written in Python against the same policy in Rust: the benchmark scenario
(scenarios/bench.toml) under `rr` and under its Python port (examples/policies/round_robin.py),
in interleaved pairs (the order alternating), reporting the median events per second of each.
The two runs of a pair must give the same report, which is checked.

    python scripts/bench_python_policy.py --pairs 6 --sim-s 20

The figures are recorded with this command in docs/python-policies.md and docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import vsched
from vsched.runs import apply_overrides

ROOT = Path(__file__).resolve().parents[1]
PYTHON_RR = f"{ROOT / 'examples' / 'policies' / 'round_robin.py'}:RoundRobin"


def events_per_s(text: str, policy: str) -> tuple[float, dict[str, int], str]:
    """Events per wall-clock second of one run, its event and decision counts, and its report
    without wall-clock fields or the policy's name (to compare the two policies' results)."""
    report = vsched.run(text, policy=policy, reps=1, seed=1)
    run = report["runs"][0]
    rate = run["events"] / run.pop("wall_s")
    report.pop("policy")
    counts = {"events": run["events"], "decisions": run["host"]["sched_invocations"]}
    return rate, counts, json.dumps(report, sort_keys=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=6, help="interleaved pairs of runs")
    parser.add_argument("--sim-s", type=float, default=20.0, help="simulated seconds per run")
    args = parser.parse_args()
    text = apply_overrides((ROOT / "scenarios" / "bench.toml").read_text(), [("run.horizon_s", args.sim_s)])
    rates: dict[str, list[float]] = {"rr": [], PYTHON_RR: []}
    counts: dict[str, int] = {}
    for pair in range(args.pairs):
        order = ["rr", PYTHON_RR] if pair % 2 == 0 else [PYTHON_RR, "rr"]
        reports = []
        for policy in order:
            rate, counts, report = events_per_s(text, policy)
            rates[policy].append(rate)
            reports.append(report)
        if reports[0] != reports[1]:
            raise SystemExit("the Python port of rr and rr gave different reports")
    rust, python = statistics.median(rates["rr"]), statistics.median(rates[PYTHON_RR])
    events, decisions = counts["events"], counts["decisions"]
    print(
        f"bench.toml, {args.sim_s:g} simulated s, {events:,} events ({decisions:,} pick_next), "
        f"median of {args.pairs} interleaved pairs"
    )
    for label, key, median in (("rr (Rust)", "rr", rust), ("round_robin.py", PYTHON_RR, python)):
        runs = [round(r / 1e6, 2) for r in rates[key]]
        print(f"{label + ':':20} {median / 1e6:6.2f} M events/s  (runs: {runs})")
    print(f"{'Python / Rust:':20} {python / rust:6.2f}")
    extra_us = (events / python - events / rust) / decisions * 1e6
    print(f"{'Python costs:':20} {extra_us:6.2f} µs more per pick_next (every callback's share included)")


if __name__ == "__main__":
    main()
