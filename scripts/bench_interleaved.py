#!/usr/bin/env python3
"""Time two builds of the benchmark binary against each other, interleaved, on one core.

Each round runs, with the old binary and the new one in turn (alternating which goes first):
the fixed event mix `scenarios/bench-hogs.toml` with 1 and with 8 copies of its VMs (32 and 256
guest vCPUs), then the standard scenario. It prints each measurement's median ns per event,
the median of the per-round ratios new/old, and for each build the median over rounds of its
256-vCPU cost over its 32-vCPU cost (issue 20's "flat in vCPUs" target).

The binaries are what `cargo bench -p vsched --no-run` builds (`target/release/deps/engine-*`),
one per tree: build each tree with its own `CARGO_TARGET_DIR`. Example:

    python scripts/bench_interleaved.py OLD_ENGINE NEW_ENGINE --rounds 10 --cpu 1

Wall-clock figures on a shared machine drift from second to second; compare only builds
measured together, and prefer instruction counts (`valgrind --tool=callgrind`,
docs/performance.md) for small differences.
The machine's slow spells only ever add time, so beside the medians each build's low quartile
(the run a quarter of the way up its sorted times) is printed too: the least disturbed
estimate that still rests on more than one run.
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn

REPO = Path(__file__).resolve().parent.parent
HOGS = REPO / "scenarios" / "bench-hogs.toml"
MEASUREMENTS = {
    "hogs32": ["--bench", "--file", str(HOGS), "--runs", "3", "--copies", "1"],
    "hogs256": ["--bench", "--file", str(HOGS), "--runs", "3", "--copies", "8"],
    "standard": ["--bench", "60"],
}


def fail(message: str, code: int = 2) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def run(engine: str, args: list[str], cpu: int | None) -> dict[str, Any]:
    cmd = (["taskset", "-c", str(cpu)] if cpu is not None else []) + [engine, *args]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        fail(f"{' '.join(cmd)} exited with {out.returncode}: {out.stderr.strip()[:200]}", code=1)
    report: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", help="benchmark binary of the build before")
    parser.add_argument("new", help="benchmark binary of the build after")
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds (default 6)")
    parser.add_argument("--cpu", type=int, default=None, help="pin every run to this CPU (taskset)")
    args = parser.parse_args()
    for field in ("old", "new"):
        if not Path(getattr(args, field)).is_file():
            fail(f"{field}: expected a benchmark binary, no file at {getattr(args, field)}")
    if args.rounds < 1:
        fail("--rounds: expected a positive number of rounds")

    ns: dict[tuple[str, str], list[float]] = {}
    bare: dict[str, list[float]] = {"old": [], "new": []}
    for r in range(args.rounds):
        order = ("old", "new") if r % 2 == 0 else ("new", "old")
        for build in order:
            for name, bench_args in MEASUREMENTS.items():
                report = run(getattr(args, build), bench_args, args.cpu)
                ns.setdefault((build, name), []).append(report["ns_per_event"])
                if name == "standard":
                    bare[build].append(report["vs_bare_loop"])
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    med = statistics.median
    print(f"ns per event over {args.rounds} interleaved rounds: median (low quartile, min-max)")
    print("new/old: the median of the per-round ratios, then the ratio of the low quartiles")
    for name in MEASUREMENTS:
        old, new = ns[("old", name)], ns[("new", name)]
        ratio = med(n / o for o, n in zip(old, new))
        print(
            f"{name:9} old {med(old):7.1f} ({low_quartile(old):.1f}, {min(old):.1f}-{max(old):.1f})"
            f"  new {med(new):7.1f} ({low_quartile(new):.1f}, {min(new):.1f}-{max(new):.1f})"
            f"  new/old {ratio:.3f}, {low_quartile(new) / low_quartile(old):.3f}"
        )
    for build in ("old", "new"):
        hogs32, hogs256 = ns[(build, "hogs32")], ns[(build, "hogs256")]
        growth = med(b / a for a, b in zip(hogs32, hogs256))
        print(
            f"{build}: 256 vCPUs over 32, median of per-round ratios {growth:.3f}, of low quartiles "
            f"{low_quartile(hogs256) / low_quartile(hogs32):.3f}; standard scenario "
            f"{med(bare[build]):.3f}x the bare loop"
        )


def low_quartile(values: list[float]) -> float:
    """The value a quarter of the way up `values` sorted (the smallest of fewer than four)."""
    return sorted(values)[len(values) // 4]


if __name__ == "__main__":
    main()
