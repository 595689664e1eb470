"""The differential suite of real vCPUs: every registered policy on every shipped real
scenario (scenarios/real/*-hog.toml, each against its *-alone.toml baseline), on real vCPUs
and in the simulator with the same seeds, as `vsched real --compare` runs one pair.

    python scripts/real_suite.py --reps 5                 # every policy, a markdown table
    python scripts/real_suite.py --reps 3 --policies rr,credit --json suite.json
    python scripts/real_suite.py --reps 3 --machine-costs    # the simulator with this machine's costs
    python scripts/real_suite.py --replay suite.json --machine-costs   # no real runs: the simulator
                                                         # again, against the real runs suite.json kept

For each pair it prints the slowdown of the scenario's first VM that also runs alone (its
completion over its median completion alone, in each world): the simulator's and real
vCPUs' median [min–max] and real over simulated, the same for its spin share; what each
world exercised of the policy's own mechanisms (median counts over the runs: pause-loop
exits, BOOSTs, yields, gang launches, packets between VMs); and how many real runs other
processes disturbed. A pair whose real runs were mostly disturbed is reported as such,
not compared. The last line counts the pairs within 15 % (slowdown). Run it on a quiet
host (docs/real-vcpus.md, "Measured: simulator against real vCPUs").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import vsched
import vsched.real

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios" / "real"
AGREE = 0.15
"""Real over simulated within this of 1 counts as agreeing (the issue's 15 %)."""


def pairs() -> list[tuple[Path, Path]]:
    """Each shipped scenario with its baseline alone."""
    found = []
    for hog in sorted(SCENARIOS.glob("*-hog.toml")):
        alone = hog.with_name(hog.name.replace("-hog", "-alone"))
        if alone.exists():
            found.append((hog, alone))
    return found


def measure(hog: Path, alone: Path, policy: str, reps: int, allow_disturbed: bool) -> dict[str, Any]:
    """One row of the suite: the pair under `policy` in both worlds."""
    row: dict[str, Any] = {"scenario": hog.stem, "policy": policy}
    try:
        result = vsched.real.compare(
            hog, baseline=alone, policy=policy, reps=reps, allow_disturbed=allow_disturbed
        )
    except vsched.real.DisturbedHost as error:
        row["refused"] = str(error)
        return row
    return row | summary(result)


def replayed(hog: Path, alone: Path, earlier: dict[str, Any]) -> dict[str, Any]:
    """A row of an earlier suite's JSON with its simulator side run again on the current
    code, against the same real runs (kept under `real_reports`)."""
    if "refused" in earlier:
        return earlier
    kept, policy = earlier["real_reports"], earlier["policy"]
    text, alone_text = hog.read_text(encoding="utf-8"), alone.read_text(encoding="utf-8")
    result = vsched.real.against_real(text, alone_text, kept["real"], kept["real_baseline"], policy)
    return {"scenario": hog.stem, "policy": policy} | summary(result)


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """A row's figures from a comparison (`vsched.real.compare`'s result), with the real
    runs it kept."""
    # The first VM that also runs alone (the hog has no slowdown).
    with_slowdown = [vm for vm in result["vms"] if vm["figures"]["slowdown"]["sim"]["median"] is not None]
    first = (with_slowdown or result["vms"])[0]
    reports = result["reports"]
    row: dict[str, Any] = {"vm": first["name"]}
    row["mechanisms"] = {world: mechanisms(reports[world]) for world in ("sim", "real")}
    row["disturbed_runs"] = result["disturbed_runs"]
    row["real_runs"] = result["real_runs"]
    row.update(figures(first))
    row["real_reports"] = {"real": reports["real"], "real_baseline": reports["real_baseline"]}
    return row


def figures(vm: dict[str, Any]) -> dict[str, Any]:
    """A compared VM's slowdown and spin share, each world's spread and real over simulated."""
    return {
        key: {k: vm["figures"][key][k] for k in ("sim", "real", "real_over_sim")}
        for key in ("slowdown", "spin_share")
    }


def suite_losses(rows: list[dict[str, Any]]) -> vsched.real.MachineLosses | None:
    """This machine's switch and migration costs, fitted over every real run of the suite
    (`vsched.real.machine_losses`): the costs are the machine's, and many policies' runs
    tell them apart better than one pair's six."""
    kept = [row["real_reports"] for row in rows if "refused" not in row]
    return vsched.real.machine_losses([report for pair in kept for report in pair.values()])


def with_this_machine(
    hog: Path, alone: Path, row: dict[str, Any], losses: vsched.real.MachineLosses | None
) -> dict[str, Any]:
    """The row's simulator side run again with this machine's costs (`losses`, and the PLE
    exit and window its real runs measured: `vsched.real.machine_costs`), against the same
    real runs."""
    real, real_alone = row["real_reports"]["real"], row["real_reports"]["real_baseline"]
    text, alone_text = hog.read_text(encoding="utf-8"), alone.read_text(encoding="utf-8")
    costs = vsched.real.machine_costs(real, text, losses)
    again = vsched.real.against_real(text, alone_text, real, real_alone, row["policy"], costs)
    vm = next(vm for vm in again["vms"] if vm["name"] == row["vm"])
    return {"costs": costs, "mechanisms": mechanisms(again["reports"]["sim"]), **figures(vm)}


# What a policy does beyond its base, counted in each run (medians over the runs): pause-loop
# exits its yield path answers, BOOSTs and yields it counts, gangs it launches (co-stops under
# relaxed co-scheduling), and the packets between VMs that cvs-comm reads.
MECHANISMS = {
    "ple": lambda run: run["host"]["ple_exits"],
    "boosts": lambda run: counters(run, "boost"),
    "yields": lambda run: counters(run, "yield"),
    "co": lambda run: run["host"]["co_launches"],
    "costops": lambda run: counters(run, "costops"),
    "packets": lambda run: sum(vm["rx_packets"] or 0 for vm in run["vms"]),
}


def counters(run: dict[str, Any], word: str) -> int:
    """The sum of the policy's counters whose name holds `word` (`credit.boosts`, `kvm_dy.yields`)."""
    return sum(value for name, value in run["host"]["policy_counters"].items() if word in name)


def mechanisms(report: dict[str, Any]) -> dict[str, float]:
    """The median count of each mechanism over the report's runs."""
    return {
        name: statistics.median(count(run) for run in report["runs"]) for name, count in MECHANISMS.items()
    }


def shown(counts: dict[str, float]) -> str:
    """The mechanisms a world exercised, e.g. `ple 1.2k, boosts 340`."""
    parts = [f"{name} {value:,.0f}" for name, value in counts.items() if value]
    return ", ".join(parts) or "—"


def spread(entry: dict[str, Any], percent: bool = False) -> str:
    """A world's median [min–max]; a run whose VM did not finish counts as `unfinished`,
    beyond every finished one (`vsched.real.Spread`)."""
    if entry["runs"] == 0:
        return "—"
    scale, unit = (100, " %") if percent else (1, "")

    def shown(value: float | None) -> str:
        return "unfinished" if value is None else f"{scale * value:.3g}"

    median = shown(entry["median"]) + (unit if entry["median"] is not None else "")
    return f"{median} [{shown(entry['min'])}–{shown(entry['max'])}]"


def ratio(value: float | None) -> str:
    if value is None:
        return "—"
    text = f"{value:.2f}"
    return text if abs(value - 1) <= AGREE else f"**{text}**"


def table(rows: list[dict[str, Any]], machine: bool) -> str:
    """The suite's markdown table and its agreement counts; `machine`: with the columns of
    the simulator run with this machine's costs."""
    columns = ["scenario", "policy", "slowdown sim", "slowdown real", "real/sim"]
    if machine:
        columns += ["slowdown sim, this machine's costs", "real/sim"]
    columns += ["spin share sim", "spin share real", "real/sim"]
    columns += ["mechanisms sim", "mechanisms real", "disturbed"]
    lines = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    for row in rows:
        if "refused" in row:
            blank = " |" * (len(columns) - 3)
            lines.append(
                f"| {row['scenario']} | {row['policy']} | refused: most real runs disturbed |{blank}"
            )
            continue
        slow, spin = row["slowdown"], row["spin_share"]
        cells = [row["scenario"], row["policy"], spread(slow["sim"]), spread(slow["real"])]
        cells.append(ratio(slow["real_over_sim"]))
        if machine:
            costly = row["machine"]["slowdown"]
            cells += [spread(costly["sim"]), ratio(costly["real_over_sim"])]
        cells += [spread(spin["sim"], True), spread(spin["real"], True), ratio(spin["real_over_sim"])]
        cells += [shown(row["mechanisms"]["sim"]), shown(row["mechanisms"]["real"])]
        cells.append(f"{row['disturbed_runs']} of {row['real_runs']}")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(agreement_line(rows, "slowdown", "With the simulator's defaults"))
    if machine:
        lines.append(agreement_line(rows, "machine", "With this machine's costs"))
        lines.append(agreement_line(rows, "either", "With either"))
    return "\n".join(lines)


def agreement_line(rows: list[dict[str, Any]], which: str, title: str) -> str:
    """How many pairs agree (`agreeing`), of those both worlds finished and of all the pairs
    (a pair one world did not finish, or refused as disturbed, counted as not agreeing)."""
    compared = [r for r in rows if "refused" not in r and any(x is not None for x in ratios(r, which))]
    agree = agreeing(compared, which)
    neither = sum(neither_finished(r, which) for r in rows if r not in compared and "refused" not in r)
    return (
        f"{title}: {agree} of {len(compared)} compared pairs agree within {AGREE:.0%} (slowdown, real over "
        f"simulated), {agree} of all {len(rows)} ({agree / max(len(rows), 1):.0%}); in {neither} more, "
        "neither world's median run finished."
    )


def slowdowns(row: dict[str, Any], which: str) -> list[dict[str, Any]]:
    """A row's slowdown figures: with the simulator's defaults (`slowdown`), with this
    machine's costs (`machine`), or both (`either`)."""
    default = [row["slowdown"]]
    costly = [row["machine"]["slowdown"]] if "machine" in row else []
    return {"slowdown": default, "machine": costly, "either": default + costly}[which]


def neither_finished(row: dict[str, Any], which: str) -> bool:
    """Whether the median run did not finish in either world (`vsched.real.Spread`)."""

    def unfinished(slowdown: dict[str, Any]) -> bool:
        return all(slowdown[w]["median"] is None and slowdown[w].get("unfinished") for w in ("sim", "real"))

    return any(unfinished(slowdown) for slowdown in slowdowns(row, which))


def ratios(row: dict[str, Any], which: str) -> list[float | None]:
    """A row's real-over-simulated slowdowns (`slowdowns`)."""
    return [slowdown["real_over_sim"] for slowdown in slowdowns(row, which)]


def agreeing(rows: list[dict[str, Any]], which: str) -> int:
    """The rows whose slowdown agrees within AGREE: with the simulator's defaults (`slowdown`),
    with this machine's costs (`machine`), or with either."""
    return sum(
        any(ratio is not None and abs(ratio - 1) <= AGREE for ratio in ratios(row, which)) for row in rows
    )


def kept_rows(parser: argparse.ArgumentParser, path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """An earlier suite's rows by (scenario, policy), each with the real runs it kept."""
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        parser.error(f"--replay: expected a suite's JSON (--json), could not read {path}: {error}")
    if not isinstance(rows, list) or not all(
        isinstance(row, dict) and ("refused" in row or "real_reports" in row) for row in rows
    ):
        parser.error(f"--replay: expected a suite JSON whose rows keep their real runs: {path}")
    return {(row["scenario"], row["policy"]): row for row in rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--reps", type=int, default=5, help="repetitions of each pair in each world (default 5)"
    )
    parser.add_argument("--policies", help="comma-separated policies (default: every registered one)")
    parser.add_argument(
        "--scenarios", help="comma-separated scenario names, e.g. spinlock-hog (default: every shipped pair)"
    )
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    parser.add_argument(
        "--allow-disturbed",
        action="store_true",
        help="compare pairs even when most of their real runs were disturbed (the table counts them)",
    )
    parser.add_argument(
        "--replay",
        type=Path,
        metavar="SUITE.json",
        help="no real runs: run the simulator side again against the real runs an earlier --json kept",
    )
    parser.add_argument(
        "--machine-costs",
        action="store_true",
        help="run the simulator with this machine's costs as each pair's real runs measured them",
    )
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error("--reps: expected at least 1")
    registered = [p["name"] for p in vsched.policies()]
    policies = registered if args.policies is None else args.policies.split(",")
    unknown = [p for p in policies if p not in registered]
    if unknown:
        parser.error(
            f"--policies: expected registered policies ({', '.join(registered)}), got {', '.join(unknown)}"
        )
    shipped = pairs()
    names = [hog.stem for hog, _ in shipped]
    chosen = names if args.scenarios is None else args.scenarios.split(",")
    if any(name not in names for name in chosen):
        parser.error(f"--scenarios: expected shipped pairs ({', '.join(names)}), got {args.scenarios}")
    earlier = None if args.replay is None else kept_rows(parser, args.replay)
    rows, paths = [], {}
    for hog, alone in (pair for pair in shipped if pair[0].stem in chosen):
        paths[hog.stem] = (hog, alone)
        for policy in policies:
            print(f"{hog.stem} under {policy} ...", file=sys.stderr, flush=True)
            if earlier is None:
                rows.append(measure(hog, alone, policy, args.reps, args.allow_disturbed))
            elif (hog.stem, policy) in earlier:
                rows.append(replayed(hog, alone, earlier[hog.stem, policy]))
    losses = None
    if args.machine_costs:
        losses = suite_losses(rows)
        print("the simulator with this machine's costs ...", file=sys.stderr, flush=True)
        for row in rows:
            if "refused" not in row:
                row["machine"] = with_this_machine(*paths[row["scenario"]], row, losses)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print(table(rows, args.machine_costs))
    if losses is not None:
        print(
            f"This machine's costs, fitted over the suite's {losses.runs} undisturbed real runs: a switch "
            f"{losses.switch_us:.0f} µs, a migrating switch {losses.migration_us:.0f} µs more; the guests "
            f"lost {losses.share:.1%} of their time to the host however scheduled (not simulated)."
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
