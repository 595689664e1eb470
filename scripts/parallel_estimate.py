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
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """Bad options end in one line naming the option, exit 2, as every vsched command does."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def main() -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("census", help="JSON lines from the window_census example")
    parser.add_argument("--lookahead-us", type=int, default=10)
    parser.add_argument("--c-ns", type=float, default=500.0, help="sequential ns per event")
    parser.add_argument("--barrier-ns", default="0,1000,5000", help="barrier costs, ns, comma-separated")
    args = parser.parse_args()
    try:
        barriers = [float(b) for b in args.barrier_ns.split(",")]
    except ValueError:
        text = args.barrier_ns
        print(f"error: --barrier-ns: expected numbers separated by commas, got {text!r}", file=sys.stderr)
        return 2
    # Written so that NaN fails too.
    if not args.c_ns > 0 or not all(b >= 0 for b in barriers):
        print("error: --c-ns: expected a positive number; --barrier-ns: numbers >= 0", file=sys.stderr)
        return 2
    try:
        with open(args.census, encoding="utf-8") as f:
            runs = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        print(f"error: census: expected JSON lines from window_census ({e})", file=sys.stderr)
        return 2
    try:
        print_estimates(runs, args.lookahead_us, args.c_ns, barriers, args.barrier_ns)
    except (KeyError, TypeError) as e:
        print(f"error: census: expected JSON lines from window_census (no field {e})", file=sys.stderr)
        return 2
    return 0


def print_estimates(
    runs: list[dict], lookahead_us: int, c_ns: float, barriers: list[float], label: str
) -> None:
    """One line per scenario: the speed-up at each core count and barrier cost."""
    lookahead_ns = lookahead_us * 1000
    for run in runs:
        windows = [w for w in run["lookaheads"] if w["lookahead_ns"] == lookahead_ns]
        if not windows:
            raise KeyError(f"lookahead_ns = {lookahead_ns} in {run['scenario']}")
        w = windows[0]
        n, count = run["events"], w["windows"]
        cells = []
        for by in w["by_cores"]:
            speedups = [n * c_ns / (by["critical_events"] * c_ns + count * b) for b in barriers]
            cells.append(f"P={by['cores']}: " + " / ".join(f"{s:.2f}" for s in speedups))
        print(f"{run['scenario']} (N={n}, W={count}, B={label} ns): " + "; ".join(cells))


if __name__ == "__main__":
    sys.exit(main())
