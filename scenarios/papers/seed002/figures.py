"""Seed 002's evaluation (§4.2 Fig. 3, §4.3 Fig. 4) under credit, balance, hybrid and
cvs-comm. Run from the repository root after `pip install .`:

    python scenarios/papers/seed002/figures.py [--reps 5] [--jobs 2] [--only lu,is,ep] [--fig 3,4]
        [--policies credit,hybrid] [--param "tslice_ms = 10"]... [--clocks aligned]

`--param` adds a line to every scenario's [scheduler] table (for every policy run, so pick
`--policies` whose parameters it names); `--clocks` sets [cluster] clocks. The claims are
checked only with all four policies.

Each scenario file here runs one NPB kernel on every virtual cluster at once (one VM per
host in each). The figure of merit is the paper's: the mean execution time of the virtual
clusters. The tables give it as mean ± standard deviation over the seeds (each seed's value
being the mean over the clusters); then the paper's qualitative claims are checked one by
one, each marked holds / does not hold with the numbers behind it.
"""

from __future__ import annotations

import argparse
import statistics as st
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import vsched

HERE = Path(__file__).parent
PAPER_POLICIES = ("credit", "balance", "hybrid", "cvs-comm")
POLICIES = list(PAPER_POLICIES)  # the ones run (--policies)
HOSTS = [2, 4, 8, 16, 32]
VMS = [4, 5, 6, 7]
KERNELS = ["lu", "is", "ep"]
# "Almost the same" (ep): every policy within this fraction of the fastest.
SAME = 0.05


def ratio(vms: int) -> float:
    return (vms * 4 + 4) / 8


def mean_cluster_times(job: tuple[str, str, int, tuple[str, ...], str]) -> list[float]:
    """Per seed, the mean execution time of the virtual clusters."""
    policy, file, reps, params, clocks = job
    text = (HERE / file).read_text(encoding="utf-8")
    scheduler = "\n".join([f'[scheduler]\nname = "{policy}"', *params])
    text = text.replace('[scheduler]\nname = "credit"', scheduler).replace("[cluster]", f'[cluster]\nclocks = "{clocks}"')
    report = vsched.run(text, reps=reps, seed=1)
    out = []
    for run in report["runs"]:
        times = [c["completion_s"] for c in run["virtual_clusters"]]
        if None in times:
            raise SystemExit(f"{file} under {policy}: a virtual cluster did not finish (seed {run['seed']})")
        out.append(st.mean(times))
    return out


def table(title: str, axis: str, keys: list, files: dict, results: dict) -> None:
    print(f"\n### {title}")
    print(f"| {axis} | " + " | ".join(POLICIES) + " |")
    print("|---" * (len(POLICIES) + 1) + "|")
    for k in keys:
        cells = []
        for p in POLICIES:
            xs = results[p, files[k]]
            cells.append(f"{st.mean(xs):.2f} ± {st.stdev(xs) if len(xs) > 1 else 0:.2f}")
        print(f"| {k} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default=",".join(KERNELS), help="kernels, e.g. lu,is")
    parser.add_argument("--fig", default="3,4", help="figures, e.g. 3")
    parser.add_argument("--policies", default=",".join(POLICIES), help="policies, e.g. credit,hybrid")
    parser.add_argument("--param", action="append", default=[], help='a [scheduler] line, e.g. "tslice_ms = 10"')
    parser.add_argument("--clocks", default="independent", choices=["independent", "aligned"])
    args = parser.parse_args()
    POLICIES[:] = [p for p in args.policies.split(",") if p]
    kernels = [k for k in args.only.split(",") if k]
    figs = {int(f) for f in args.fig.split(",") if f}
    files3 = {k: {h: f"fig3-{k}-hosts-{h}.toml" for h in HOSTS} for k in kernels}
    files4 = {k: {v: f"fig4-{k}-vms-{v}.toml" for v in VMS} for k in kernels}
    todo = sorted(
        {f for k in kernels for f in ([*files3[k].values()] if 3 in figs else []) + ([*files4[k].values()] if 4 in figs else [])}
    )
    jobs = [(p, f, args.reps, tuple(args.param), args.clocks) for f in todo for p in POLICIES]
    started = time.time()
    results = {}
    with ProcessPoolExecutor(args.jobs) as pool:
        for (p, f, *_), times in zip(jobs, pool.map(mean_cluster_times, jobs)):
            results[p, f] = times
            print(f"  {len(results)}/{len(jobs)} {f} {p}: {st.mean(times):.2f} s", file=sys.stderr, flush=True)
    mean = {k: st.mean(v) for k, v in results.items()}

    print(f"## Seed 002: mean execution time of the virtual clusters (s), {args.reps} seeds")
    for k in kernels:
        if 3 in figs:
            table(f"Fig. 3 {k}: hosts (ratio 2.5)", "hosts", HOSTS, files3[k], results)
        if 4 in figs:
            keyed = {f"{v} ({ratio(v):g})": files4[k][v] for v in VMS}
            table(f"Fig. 4 {k}: VMs per host (VCPU:PCPU), 8 hosts", "VMs (ratio)", list(keyed), keyed, results)

    if tuple(POLICIES) != PAPER_POLICIES or args.param or args.clocks != "independent":
        print(f"\n{len(jobs)} policy × scenario runs of {args.reps} seeds in {time.time() - started:.0f} s "
              "(claims are checked for the four policies at their defaults only)")
        return

    print("\n## The paper's claims")
    verdicts = []

    def claim(text: str, holds: bool, why: str) -> None:
        verdicts.append(holds)
        print(f"- [{'holds' if holds else 'does not hold'}] {text}: {why}")

    def best(files: dict) -> dict:
        return {k: min(POLICIES, key=lambda p: mean[p, f]) for k, f in files.items()}

    for k in [k for k in kernels if k in ("lu", "is")]:
        if 3 in figs:
            b = best(files3[k])
            claim(f"Fig. 3 {k}: CVS performs best at every host count", all(v == "cvs-comm" for v in b.values()),
                  ", ".join(f"{h} hosts: {p}" for h, p in b.items()))
            growth = {p: mean[p, files3[k][HOSTS[-1]]] / mean[p, files3[k][HOSTS[0]]] for p in POLICIES}
            claim(f"Fig. 3 {k}: CVS scales best (smallest growth from {HOSTS[0]} to {HOSTS[-1]} hosts)",
                  min(growth, key=growth.get) == "cvs-comm",
                  ", ".join(f"{p} ×{g:.2f}" for p, g in growth.items()))
            hs_bs = [mean["hybrid", f] < mean["balance", f] for f in files3[k].values()]
            claim(f"Fig. 3 {k}: HS is better than BS", all(hs_bs), f"at {sum(hs_bs)} of {len(hs_bs)} host counts")
            gain = {h: 1 - mean["balance", f] / mean["credit", f] for h, f in files3[k].items()}
            claim(f"Fig. 3 {k}: BS gains a little over CREDIT at 2 hosts, the gain fades with more hosts",
                  gain[HOSTS[0]] > 0 and gain[HOSTS[-1]] < gain[HOSTS[0]],
                  ", ".join(f"{h}: {100 * g:+.1f} %" for h, g in gain.items()))
        if 4 in figs:
            b = best(files4[k])
            claim(f"Fig. 4 {k}: CVS performs best at every ratio", all(v == "cvs-comm" for v in b.values()),
                  ", ".join(f"{v} VMs: {p}" for v, p in b.items()))
            between = [mean["cvs-comm", f] <= mean["hybrid", f] <= mean["balance", f] for f in files4[k].values()]
            claim(f"Fig. 4 {k}: HS lies between CVS and BS", all(between), f"at {sum(between)} of {len(between)} ratios")
            gain = [abs(1 - mean["balance", f] / mean["credit", f]) for f in files4[k].values()]
            claim(f"Fig. 4 {k}: BS's gain over CREDIT is not obvious", max(gain) < SAME,
                  f"largest |BS/CREDIT − 1| = {100 * max(gain):.1f} % (threshold {100 * SAME:g} %)")
    if "ep" in kernels:
        for fig, files in ((3, files3["ep"]), (4, files4["ep"])):
            if fig not in figs:
                continue
            spread = {k: max(mean[p, f] for p in POLICIES) / min(mean[p, f] for p in POLICIES) - 1 for k, f in files.items()}
            claim(f"Fig. {fig} ep: all four perform almost the same", max(spread.values()) < SAME,
                  f"largest spread {100 * max(spread.values()):.1f} % (threshold {100 * SAME:g} %)")
    print(f"\n{sum(verdicts)} of {len(verdicts)} claims hold; {len(jobs)} policy × scenario runs of {args.reps} seeds "
          f"in {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
