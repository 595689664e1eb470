#!/usr/bin/env python3
"""Digests of every shipped scenario's report under every policy, to prove a refactoring
changed no result.

    python scripts/report_digests.py write before.json      # with the old build installed
    python scripts/report_digests.py write after.json       # with the new one
    python scripts/report_digests.py compare before.json after.json

`write` runs each scenario under `scenarios/` (papers included) once per registered policy,
at that policy's default parameters (`vsched run FILE --policy P`), with the scenario's own
seed and horizon, and records the SHA-256 of the core's JSON report with its wall-clock
fields (`wall_s`) zeroed: byte-identical reports give identical digests. A policy that
refuses the scenario (admission, VM lifecycle) is recorded with its one-line refusal, so a
change in what is refused shows too. `--horizon-s S` caps every run's horizon (quicker,
still a byte-for-byte comparison of what was run). `--silent-kvm-hosts` adds
`host_threads = false` to `[host]` under every KVM policy: a build with host threads
(docs/realism.md, "A KVM host is never silent") then gives the digests of a build before them.
`--policies a,b` runs only those policies. `compare` exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WALL_FIELD = re.compile(r'"wall_s":\s*[-+0-9.eE]+')
HORIZON = re.compile(r"^horizon_s\s*=\s*([0-9.eE+_]+)", re.MULTILINE)
HOST_TABLE = re.compile(r"^\[host\][^\n]*\n", re.MULTILINE)


def capped(text: str, horizon_s: float | None) -> str:
    """`text` with its `[run] horizon_s` capped at `horizon_s` (added to `[run]` if absent)."""
    if horizon_s is None:
        return text
    match = HORIZON.search(text)
    if match:
        value = min(float(match.group(1).replace("_", "")), horizon_s)
        return text[: match.start()] + f"horizon_s = {value}" + text[match.end() :]
    if re.search(r"^\[run\]", text, re.MULTILINE):
        return re.sub(r"^\[run\]", f"[run]\nhorizon_s = {horizon_s}", text, count=1, flags=re.MULTILINE)
    return text + f"\n[run]\nhorizon_s = {horizon_s}\n"


def silenced(text: str) -> str:
    """`text` with `host_threads = false` first in its `[host]` table."""
    match = HOST_TABLE.search(text)
    assert match, "every scenario has a [host] table"
    return text[: match.end()] + "host_threads = false\n" + text[match.end() :]


def digest(job: tuple[str, str, float | None, bool]) -> tuple[str, str]:
    import vsched

    path, policy, horizon_s, silent = job
    text = capped((ROOT / path).read_text(encoding="utf-8"), horizon_s)
    if silent:
        text = silenced(text)
    try:
        report = vsched.run_json(text, policy=policy)
    except vsched.ScenarioError as error:
        return f"{path} | {policy}", f"refused: {error}"
    except vsched.PolicyError as error:
        return f"{path} | {policy}", f"policy error: {error}"
    stable = WALL_FIELD.sub('"wall_s": 0', report)
    return f"{path} | {policy}", hashlib.sha256(stable.encode()).hexdigest()


def write(out: Path, horizon_s: float | None, jobs: int, silent_kvm: bool, only: list[str] | None) -> None:
    import vsched

    scenarios = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "scenarios").rglob("*.toml"))
    policies = [
        (p["name"], silent_kvm and p.get("hypervisor") == "kvm")
        for p in vsched.policies()
        if only is None or p["name"] in only
    ]
    work = [(s, p, horizon_s, silent) for s in scenarios for p, silent in policies]
    results: dict[str, str] = {}
    with ProcessPoolExecutor(jobs) as pool:
        for i, (key, value) in enumerate(pool.map(digest, work, chunksize=1), 1):
            results[key] = value
            if i % 50 == 0 or i == len(work):
                print(f"{i}/{len(work)} runs", file=sys.stderr)
    out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    refused = sum(v.startswith("refused") for v in results.values())
    print(f"{len(results)} scenario x policy pairs ({refused} refused) -> {out}")


def compare(a: Path, b: Path) -> int:
    before, after = json.loads(a.read_text()), json.loads(b.read_text())
    differ = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    for key in differ:
        print(f"differs: {key}\n  before: {before.get(key)}\n  after:  {after.get(key)}")
    same = sum(before[k] == after[k] for k in before.keys() & after.keys())
    print(f"{same} identical, {len(differ)} different, of {len(before.keys() | after.keys())} pairs")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="digest every scenario x policy report into OUT")
    w.add_argument("out", type=Path)
    w.add_argument("--horizon-s", type=float, default=None, help="cap each run's horizon")
    w.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    w.add_argument(
        "--silent-kvm-hosts",
        action="store_true",
        help="add host_threads = false to [host] under every KVM policy",
    )
    w.add_argument(
        "--policies", default=None, help="comma-separated policy names to run (default: every registered one)"
    )
    c = sub.add_parser("compare", help="exit 1 if two digest files differ")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "write":
        only = args.policies.split(",") if args.policies else None
        write(args.out, args.horizon_s, args.jobs, args.silent_kvm_hosts, only)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
