"""Seed 001's motivation experiment (§2, Fig. 2) and the sweep behind cvs-adaptive's default
thresholds. Run from the repository root after `pip install .`:

    python scenarios/papers/seed001/motivation.py [--reps 10] [--jobs 2]

Four VMs run Kernbench together on 8 pCPUs with 1..8 vCPUs each (VOR 0.5..4). For every
policy and VOR it prints the total execution time — when the last of the four builds
finishes — as mean ± standard deviation over the seeds, then where the orderings of ytt, yth
and cosched cross, then the threshold sweep: cvs-adaptive with thresholds (co_max_vor,
yth_max_vor) on a 0.5 grid runs co-scheduling, yth or ytt at each VOR of this experiment
(the VMs never change), so its time at a VOR is that algorithm's; the pair minimising the
summed slowdown against the best algorithm at each VOR wins. The table's cvs-adaptive column
is the policy at its default thresholds, which should reproduce the chosen algorithm's times.
"""

from __future__ import annotations

import argparse
import itertools
import statistics as st
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import vsched

HERE = Path(__file__).parent
VCPUS = range(1, 9)
PCPUS = 8
ALGORITHMS = ["cosched", "yth", "ytt"]
POLICIES = ALGORITHMS + ["credit", "kvm-dy", "cvs-adaptive"]
KVM_POLICIES = {"cfs", "kvm-dy"}
TIE = 0.01


def vor(n: int) -> float:
    return 4 * n / PCPUS


def total_times(job: tuple[str, int, int]) -> list[float]:
    """Total execution time of each repetition: the last VM's completion (all start at 0)."""
    policy, n, reps = job
    text = (HERE / f"kernbench-vcpus-{n}.toml").read_text()
    if policy in KVM_POLICIES:
        # KVM grows the PLE window at each exit and resets it at schedule-in (Xen keeps it fixed).
        text = text.replace("[host]\n", "[host]\nple_grow = 2\n", 1)
    report = vsched.run(text, policy=policy, reps=reps, seed=1)
    times = []
    for run in report["runs"]:
        done = [vm["completion_s"] for vm in run["vms"]]
        if None in done:
            raise SystemExit(f"{policy} at {n} vCPUs/VM: a build did not finish")
        times.append(max(done))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    started = time.time()
    jobs = [(p, n, args.reps) for p in POLICIES for n in VCPUS]
    with ProcessPoolExecutor(args.jobs) as pool:
        results = dict(zip([(p, n) for p, n, _ in jobs], pool.map(total_times, jobs)))
    mean = {k: st.mean(v) for k, v in results.items()}

    print(f"## Total execution time (s), 4 VMs × Kernbench, {PCPUS} pCPUs, {args.reps} seeds")
    print("| vCPUs/VM | VOR | " + " | ".join(POLICIES) + " | best of ytt/yth/cosched |")
    print("|---" * (len(POLICIES) + 3) + "|")
    for n in VCPUS:
        cells = [f"{mean[p, n]:.3f} ± {st.stdev(results[p, n]):.3f}" for p in POLICIES]
        best = min(ALGORITHMS, key=lambda p: mean[p, n])
        print(f"| {n} | {vor(n):g} | " + " | ".join(cells) + f" | {best} |")

    print(f"\n## Crossovers (mean times; within {100 * TIE:g} % counts as a tie)")
    for a, b in itertools.combinations(ALGORITHMS, 2):
        order = {n: 0 if abs(mean[a, n] / mean[b, n] - 1) < TIE else (1 if mean[a, n] < mean[b, n] else -1) for n in VCPUS}
        ties = [f"{vor(n):g}" for n in VCPUS if order[n] == 0]
        ranked = [n for n in VCPUS if order[n] != 0]
        flips = [f"between VOR {vor(n1):g} and {vor(n2):g}" for n1, n2 in zip(ranked, ranked[1:]) if order[n1] != order[n2]]
        first = f"{a if order[ranked[0]] > 0 else b} faster at VOR {vor(ranked[0]):g}" if ranked else "always tied"
        print(
            f"- {a} vs {b}: tied at VOR {', '.join(ties) or '-'}; {first}; order flips "
            + (", ".join(flips) if flips else "never")
        )

    print("\n## Threshold sweep (cvs-adaptive: co-schedule while VOR <= c, yth while <= y, ytt above)")
    best_time = {n: min(mean[p, n] for p in ALGORITHMS) for n in VCPUS}
    grid = [x / 2 for x in range(0, 9)]
    scores = []
    for c, y in itertools.product(grid, grid):
        if y < c:
            continue
        chosen = {n: "cosched" if vor(n) <= c else "yth" if vor(n) <= y else "ytt" for n in VCPUS}
        slowdown = sum(mean[chosen[n], n] / best_time[n] - 1 for n in VCPUS)
        scores.append((slowdown, c, y))
    scores.sort()
    for slowdown, c, y in scores[:5]:
        print(f"- co_max_vor = {c:g}, yth_max_vor = {y:g}: summed slowdown {100 * slowdown:.1f} %")
    print("(ties: any pair with the same algorithm at every VOR point scores the same)")
    print(f"\nwall {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
