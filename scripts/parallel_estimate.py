"""Speed-up estimates of docs/parallel.md from window censuses.

Reads the JSON lines `window_census` prints (one per scenario) and, for one lookahead,
prints the estimated speed-up of a windowed conservative parallel run on P cores:

    S(P) = N * c / (C(P) * c + W * B)

N the run's events, W its windows, C(P) the events of the busiest core summed over windows
(the critical path), c the sequential cost of an event and B one barrier. Only B / c matters.

    python scripts/parallel_estimate.py CENSUS.jsonl [--lookahead-us 10] [--c-ns 500]
        [--barrier-ns 0,1000,5000]
"""

import argparse
import json
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("census", help="JSON lines from the window_census example")
    parser.add_argument("--lookahead-us", type=int, default=10)
    parser.add_argument("--c-ns", type=float, default=500.0, help="sequential ns per event")
    parser.add_argument("--barrier-ns", default="0,1000,5000", help="barrier costs, ns, comma-separated")
    args = parser.parse_args()
    try:
        barriers = [float(b) for b in args.barrier_ns.split(",")]
    except ValueError:
        print(f"--barrier-ns: expected numbers separated by commas, got {args.barrier_ns!r}", file=sys.stderr)
        return 2
    if args.c_ns <= 0 or any(b < 0 for b in barriers):
        print("--c-ns: expected a positive number; --barrier-ns: expected numbers >= 0", file=sys.stderr)
        return 2
    with open(args.census, encoding="utf-8") as f:
        runs = [json.loads(line) for line in f if line.strip()]
    lookahead_ns = args.lookahead_us * 1000
    for run in runs:
        windows = [w for w in run["lookaheads"] if w["lookahead_ns"] == lookahead_ns]
        if not windows:
            print(f"{run['scenario']}: no census at lookahead {args.lookahead_us} us", file=sys.stderr)
            return 2
        w = windows[0]
        n, count = run["events"], w["windows"]
        cells = []
        for by in w["by_cores"]:
            speedups = [n * args.c_ns / (by["critical_events"] * args.c_ns + count * b) for b in barriers]
            cells.append(f"P={by['cores']}: " + " / ".join(f"{s:.2f}" for s in speedups))
        print(f"{run['scenario']} (N={n}, W={count}, B={args.barrier_ns} ns): " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
