"""`vsched demo`, `vsched bench` and `vsched plot-trace`: a first run explained, the
simulator's speed on this machine, and a trace drawn as a Gantt chart.
"""

import json
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer

import vsched
from vsched.cli.app import app
from vsched.cli.errors import CliError
from vsched.cli.inputs import check_input_file
from vsched.cli.output import print_json, stdout
from vsched.cli.progress import run_with_progress


@app.command()
def demo(
    print_scenario: Annotated[
        bool, typer.Option("--print-scenario", help="Print the scenario's TOML instead of running it.")
    ] = False,
) -> None:
    """Run the embedded default scenario and explain what it shows."""
    from vsched import demo as demo_text
    from vsched.report import report_tables

    if print_scenario:
        print(vsched.DEFAULT_SCENARIO, end="")
        return
    with tempfile.TemporaryDirectory(prefix="vsched-demo-") as directory:
        trace = Path(directory) / "t.json"
        report = json.loads(run_with_progress(vsched.DEFAULT_SCENARIO, trace=trace))
        lock_vms = {vm["name"] for vm in report["runs"][0]["vms"] if vm["workload"] == "spinlock"}
        window = demo_text.gantt_window(demo_text.preempted_holders(trace, lock_vms))
    baseline = json.loads(run_with_progress(vsched.DEFAULT_BASELINE_SCENARIO))
    parts = [
        *demo_text.introduction(report),
        report_tables(report, stdout.width),
        *demo_text.conclusion(report),
        *demo_text.slowdown(report, baseline),
        *demo_text.next_steps(report["runs"][0]["seed"], window),
    ]
    for part in parts:
        stdout.print(part)
        stdout.print()


# The event queue and the bare loop, reported by both forms of `vsched bench`.
QUEUE_FIGURES: tuple[tuple[str, str], ...] = (
    ("queue_len_mean", "mean length of the event queue"),
    ("skipped_pops", "events popped that found nothing to do (stale, or a renewed slice end)"),
)
VS_BARE_LOOP = ("vs_bare_loop", "the simulator's events per second over the bare loop's")

BENCH_FIGURES: tuple[tuple[str, str], ...] = (
    ("events_per_s", "simulation events handled per wall-clock second"),
    ("ns_per_event", "wall-clock nanoseconds per event"),
    ("sim_s_per_wall_s", "simulated seconds per wall-clock second"),
    ("events", "events in the run"),
    ("wall_s", "wall-clock seconds the run took"),
    *QUEUE_FIGURES,
    ("bare_loop_events_per_s", "a bare binary-heap loop at that length, events per second"),
    VS_BARE_LOOP,
)


# What `vsched bench SCENARIO` reports, in order, and what each figure means.
SCENARIO_BENCH_FIGURES: tuple[tuple[str, str], ...] = (
    ("wall_s_median", "wall-clock seconds of a run, median"),
    ("wall_s_min", "the fastest run"),
    ("wall_s_max", "the slowest run"),
    ("events", "events in a run"),
    ("ns_per_event", "wall-clock nanoseconds per event, at the median"),
    ("sim_s_per_wall_s", "simulated seconds per wall-clock second, at the median"),
    *QUEUE_FIGURES,
    ("bare_loop_ns_per_event", "a bare binary-heap loop at that length, ns per event, median"),
    VS_BARE_LOOP,
)


@app.command()
def bench(
    scenario: Annotated[
        Optional[Path],
        typer.Argument(
            metavar="SCENARIO",
            help="Time this scenario file instead, over --runs runs with its own seed.",
            show_default=False,
        ),
    ] = None,
    sim_s: Annotated[
        Optional[float], typer.Option(help="Simulated seconds (default: the standard length).")
    ] = None,
    copies: Annotated[
        int,
        typer.Option(help="Repeat the scenario's VMs this many times (1-64): 8 copies are 256 guest vCPUs."),
    ] = 1,
    runs: Annotated[
        Optional[int],
        typer.Option(
            help="With SCENARIO: how many runs to time (default 10); with --scale, rounds (default 3).",
            show_default=False,
        ),
    ] = None,
    scale: Annotated[
        bool,
        typer.Option(
            "--scale",
            help="Compare the cost of an event on large hosts and clusters with small ones (issue 59).",
        ),
    ] = False,
    scale_scenario: Annotated[
        Optional[str],
        typer.Option(
            "--scale-scenario",
            metavar="NAME",
            help="Print a --scale scenario's TOML (e.g. hogs-512p-2048v-credit, or lu-Nhosts-credit at "
            "any even N up to 1024) instead of timing.",
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Time the simulator on the standard benchmark scenario, or on a scenario file of yours.

    Reports events per second and simulated seconds per wall second, beside a bare
    binary-heap event loop timed on this machine at the run's own queue length
    (docs/performance.md).
    """
    if scale_scenario is not None:
        given = {"SCENARIO": scenario is not None, "--scale": scale, "--runs": runs is not None}
        given |= {"--sim-s": sim_s is not None, "--copies": copies != 1, "--json": json_output}
        for option, is_given in given.items():
            if is_given:
                raise CliError(f"{option}: does not apply to --scale-scenario, which prints a scenario")
        print(vsched.scale_scenario(scale_scenario), end="")
        return
    if scale:
        bench_scale(scenario, sim_s, copies, runs, json_output)
        return
    from rich import box
    from rich.table import Table

    from vsched.report import format_value

    if scenario is None:
        if runs is not None:
            raise CliError("--runs: applies to a SCENARIO file; the standard benchmark runs once")
        figures = vsched.bench(sim_s, copies)
        title = (
            f"benchmark scenario {figures['scenario']}: {figures['pcpus']} pCPUs, {figures['vcpus']} vCPUs,"
            f" {figures['sim_s']:g} simulated seconds on one core"
        )
        rows = BENCH_FIGURES
    else:
        if sim_s is not None:
            raise CliError("--sim-s: applies to the standard benchmark, not to a SCENARIO file")
        check_input_file("SCENARIO", scenario)
        figures = vsched.bench_scenario(scenario, 10 if runs is None else runs, copies)
        title = (
            f"scenario {figures['scenario']}: {figures['vcpus']} vCPUs,"
            f" {figures['runs']} run{'s' if figures['runs'] != 1 else ''} with its seed, on one core"
        )
        rows = SCENARIO_BENCH_FIGURES
    if json_output:
        print_json(figures)
        return
    stdout.print(title)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("figure", style="bold", overflow="fold")
    table.add_column("value", justify="right")
    table.add_column("meaning")
    for key, meaning in rows:
        value = figures[key]
        # A run of a short scenario takes milliseconds: four significant digits, not decimals.
        shown = f"{value:.4g}" if key.startswith("wall_s_") else format_value(key, value)
        table.add_row(key, shown, meaning)
    stdout.print(table)


def bench_scale(
    scenario: Optional[Path], sim_s: Optional[float], copies: int, runs: Optional[int], json_output: bool
) -> None:
    """`vsched bench --scale`: the scale comparisons, a table of scenarios and one of ratios."""
    fixed = {"SCENARIO": scenario is not None, "--sim-s": sim_s is not None, "--copies": copies != 1}
    for option, given in fixed.items():
        if given:
            raise CliError(f"{option}: does not apply to --scale, whose scenarios are fixed")
    figures = vsched.bench_scale(3 if runs is None else runs)
    if json_output:
        print_json(figures)
        return
    from rich import box
    from rich.table import Table

    rounds = figures["runs"]
    plural = "s" if rounds != 1 else ""
    stdout.print(f"scale comparisons: {rounds} round{plural}, runs interleaved, on one core; medians")
    stdout.print("ratios of CPU time per event, large scenario over small (docs/performance.md, Scale)")
    scenarios = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    # Sizes and horizons are in the names and in --json; the table keeps to the timing.
    for column in ("scenario", "events", "CPU ns/event", "wall ns/event"):
        scenarios.add_column(column, justify="left" if column == "scenario" else "right", no_wrap=True)
    for row in figures["scenarios"]:
        timing = (f"{row['cpu_ns_per_event']:.1f}", f"{row['wall_ns_per_event']:.1f}")
        scenarios.add_row(row["name"], f"{row['events']:,}", *timing)
    stdout.print(scenarios)
    ratios = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("comparison", "large / small", "target"):
        ratios.add_column(
            column, justify="left" if column == "comparison" else "right", no_wrap=column != "comparison"
        )
    for row in figures["ratios"]:
        ratios.add_row(row["what"], f"{row['ratio']:.2f}x", f"{row['target']:g}x")
    stdout.print(ratios)


@app.command("plot-trace")
def plot_trace_command(
    trace: Annotated[
        Path,
        typer.Argument(metavar="TRACE", help="Trace written by `vsched run --trace`.", show_default=False),
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="Image to write (.png, .svg, .pdf).")] = Path(
        "gantt.png"
    ),
    start_ms: Annotated[Optional[float], typer.Option(help="Start of the window to draw, in ms.")] = None,
    end_ms: Annotated[Optional[float], typer.Option(help="End of the window to draw, in ms.")] = None,
) -> None:
    """Draw a Gantt chart of a trace: one row per pCPU, one colour per VM, spinning hatched."""
    check_input_file("TRACE", trace)
    # Imported here: matplotlib takes longer to load than any other command needs.
    from vsched.plot import PlotError, plot_trace

    try:
        schedule = plot_trace(trace, output, start_ms=start_ms, end_ms=end_ms)
    except PlotError as error:
        raise CliError(str(error)) from None
    if schedule.damage:
        print(f"warning: {schedule.damage}", file=sys.stderr)
    stdout.print(f"wrote {output}")
