"""The `vsched` command line.

Every failure the user can cause (a bad scenario, a missing file, an unreadable trace, a bad
option) ends the same way: one line `error: <message>` on stderr and exit code 2, never a
traceback. A failure that is not the user's (a policy bug, a bug in vsched) is one line too,
with exit code 1; Ctrl-C exits with 130. `VSCHED_DEBUG=1` adds the traceback of an internal
error. Results go to stdout, progress to stderr, so `--json` output stays clean.
"""

import io
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Annotated, Any, NoReturn, Optional, cast

import typer
from rich import box
from rich.console import Console, Group, RenderableType
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

import vsched
import vsched.real
from vsched import demo as demo_text
from vsched.report import format_value, report_tables, unfinished_warnings
from vsched.runs import JobFailed, RunSettings

# Typer reports command-line mistakes with click's UsageError. Recent Typer releases vendor
# click privately, so the class is reached through its public subclass BadParameter.
UsageError = cast("type[Exception]", typer.BadParameter.__base__)

EXIT_BAD_INPUT = 2
# A policy bug is not the user's mistake: it gets the generic failure code.
EXIT_INTERNAL_ERROR = 1
EXIT_INTERRUPTED = 130
# Set (to anything but 0 or empty) to see the traceback of an internal error.
DEBUG_VARIABLE = "VSCHED_DEBUG"
# Runs shorter than this finish before a progress bar would be worth drawing.
PROGRESS_DELAY_S = 2.0
# Width of summary.txt: a file is not a terminal, so this is chosen to keep tables of five
# or six VMs in one piece while staying readable in an editor.
REPORT_WIDTH = 120

app = typer.Typer(
    name="vsched",
    help="A laboratory for hypervisor vCPU scheduling. Start with `vsched demo`.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
# No markup: scenario names and paths are printed as written, brackets included.
stdout = Console(highlight=False, markup=False)
stderr = Console(stderr=True, highlight=False, markup=False)


class CliError(Exception):
    """A user mistake detected by the command line itself; its text is the error line."""


def fail(message: str, exit_code: int = EXIT_BAD_INPUT) -> NoReturn:
    # The promise is one line whatever produced the message.
    one_line = " ".join(message.split())
    print(f"error: {one_line}", file=sys.stderr)
    raise SystemExit(exit_code)


def describe_os_error(error: OSError) -> str:
    if error.filename is not None and error.strerror:
        return f"{error.strerror}: '{error.filename}'"
    return str(error)


def make_directory(option: str, path: Path) -> None:
    """Create the output directory `path` (and its parents), or fail naming `option`."""
    if path.exists() and not path.is_dir():
        raise CliError(f"{option}: '{path}' exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CliError(f"{option}: {describe_os_error(error)}") from None


def check_input_file(label: str, path: Path) -> None:
    """Fail early, naming the argument, when an input file is missing or is a directory."""
    if not path.exists():
        raise CliError(f"{label}: no such file '{path}'")
    if path.is_dir():
        raise CliError(f"{label}: '{path}' is a directory, not a file")


_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*", re.IGNORECASE)
_SIZE_UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    **{f"{p}{suffix}": 1024 ** (i + 1) for i, p in enumerate("kmgt") for suffix in ("", "ib")},
    **{f"{p}b": 1000 ** (i + 1) for i, p in enumerate("kmgt")},
}
_U64_MAX = 2**64 - 1


def parse_size(text: str, option: str = "--max-memory") -> int:
    """A size in bytes: a number of bytes, or a number with a unit. K, M, G, T and KiB, MiB,
    GiB, TiB are powers of 1024; KB, MB, GB, TB powers of 1000 (case does not matter):
    `8G`, `512M`, `1.5GiB`, `4000000000`."""
    match = _SIZE.fullmatch(text)
    unit: str = match.group(2).lower() if match else ""
    if match is None or unit not in _SIZE_UNITS:
        raise CliError(
            f"{option}: expected a size such as 8G, 512M, 1.5GiB or a number of bytes, got '{text}'"
        )
    number: str = match.group(1)
    if "." in number:
        # Exact for decimal fractions: 1.5G is 1610612736 bytes, not a float's approximation.
        whole, _, fraction = number.partition(".")
        scale: int = 10 ** len(fraction)
        size = (int(whole or "0") * scale + int(fraction or "0")) * _SIZE_UNITS[unit] // scale
    else:
        size = int(number) * _SIZE_UNITS[unit]
    if not 1 <= size <= _U64_MAX:
        raise CliError(f"{option}: expected a size from 1 byte to {_U64_MAX} bytes, got '{text}'")
    return size


def max_memory_bytes(text: Optional[str]) -> int:
    """The core's `max_memory` of a `--max-memory` option: 0 (its default budget) when absent."""
    return 0 if text is None else parse_size(text)


def render_text(renderable: RenderableType) -> str:
    """Plain text of a rich renderable, as written to summary.txt."""
    buffer = io.StringIO()
    Console(file=buffer, width=REPORT_WIDTH, color_system=None, highlight=False, markup=False).print(
        renderable
    )
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2))


class RunProgress:
    """A progress callback that draws a bar on stderr once a run has lasted PROGRESS_DELAY_S,
    and only on a terminal, so short runs and redirected output stay clean."""

    def __init__(self, clock: str = "simulated") -> None:
        self.started_at = time.monotonic()
        self.bar: Optional[Progress] = None
        self.task: Optional[TaskID] = None
        # What the run's seconds are: "simulated", or "real" on real vCPUs.
        self.clock = clock

    def __call__(self, rep: int, reps: int, sim_s: float, horizon_s: float) -> None:
        if self.bar is None:
            if not stderr.is_terminal or time.monotonic() - self.started_at < PROGRESS_DELAY_S:
                return
            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.percentage:>3.0f}%"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=stderr,
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task("", total=1.0)
        assert self.task is not None
        rep_fraction = min(sim_s / horizon_s, 1.0) if horizon_s > 0 else 0.0
        self.bar.update(
            self.task,
            completed=(rep + rep_fraction) / max(reps, 1),
            description=f"run {rep + 1}/{reps}  {self.clock} {sim_s:.1f}/{horizon_s:g} s",
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def print_report(report_text: str, json_output: bool) -> dict[str, Any]:
    """Prints a report as JSON or as tables; returns it parsed."""
    report: dict[str, Any] = json.loads(report_text)
    if json_output:
        print(report_text)
        # The tables carry these warnings; JSON output keeps stdout clean, so they go to
        # stderr, one line each as errors do.
        for line in unfinished_warnings(report):
            print(line, file=sys.stderr)
    else:
        stdout.print(report_tables(report, stdout.width))
    return report


def run_with_progress(scenario: vsched.ScenarioLike, **options: Any) -> str:
    progress = RunProgress()
    try:
        return vsched.run_json(scenario, progress=progress, **options)
    finally:
        progress.close()


def run_in_parallel(scenario: Path, workers: int, settings: RunSettings, **options: Any) -> str:
    """`vsched run --jobs`: the repetitions on `workers` processes, a bar on a terminal."""
    from vsched.repetitions import run_repetitions

    progress = JobsProgress("run")
    try:
        return run_repetitions(scenario, workers=workers, settings=settings, progress=progress, **options)
    finally:
        if progress.bar is not None:
            progress.bar.stop()


CHECK_OPTION = typer.Option(
    "--check",
    help="Run the simulator's invariant checks after every event: slower, for suspicious runs.",
)
MAX_MEMORY_OPTION = typer.Option(
    "--max-memory",
    metavar="SIZE",
    help="Memory budget a run's estimate must fit, e.g. 8G, 512M, 1.5GiB or bytes (default: the core's).",
)


@app.command()
def run(
    scenario: Annotated[
        Path,
        typer.Argument(
            metavar="SCENARIO", help="Scenario file (TOML), see docs/scenario.md.", show_default=False
        ),
    ],
    seed: Annotated[
        Optional[int], typer.Option(help="Seed of the first repetition; overrides the scenario's run.seed.")
    ] = None,
    reps: Annotated[
        Optional[int],
        typer.Option(help="Repetitions, with seeds seed, seed+1, ...; overrides the scenario's run.reps."),
    ] = None,
    policy: Annotated[
        Optional[str],
        typer.Option(
            help="Run under this policy (default parameters) instead of the scenario's \\[scheduler] table: "
            "a registered name or a Python policy, path/to/file.py:ClassName (docs/python-policies.md)."
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the JSON report instead of tables.")
    ] = False,
    out: Annotated[
        Optional[Path], typer.Option(help="Also write results.json and summary.txt into this directory.")
    ] = None,
    trace: Annotated[
        Optional[Path],
        typer.Option(
            help="Write the first repetition as Chrome trace-event JSON for Perfetto: pCPU rows, vCPU "
            "tracks, counters, instants, IPI and message flows (docs/traces.md)."
        ),
    ] = None,
    trace_limit: Annotated[
        int, typer.Option(help="Most events to write to the trace; 0 = the default bound (1,000,000).")
    ] = 0,
    check: Annotated[bool, CHECK_OPTION] = False,
    max_memory: Annotated[Optional[str], MAX_MEMORY_OPTION] = None,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            "-j",
            help="Repetitions in parallel (local processes); the report is the same as one after another.",
        ),
    ] = 1,
) -> None:
    """Run a scenario and print per-VM and host results."""
    check_input_file("SCENARIO", scenario)
    budget = max_memory_bytes(max_memory)
    if trace_limit and trace is None:
        raise CliError("--trace-limit: only meaningful with --trace FILE")
    if jobs < 1:
        raise CliError(f"--jobs: expected at least 1, got {jobs}")
    if out is not None:
        # Before the run, so that an unusable directory does not cost the run.
        make_directory("--out", out)
    options: dict[str, Any] = {
        "seed": seed,
        "reps": reps,
        "policy": policy,
        "trace": trace,
        "trace_limit": trace_limit,
    }
    try:
        if jobs > 1:
            report_text = run_in_parallel(scenario, jobs, RunSettings(check, budget), **options)
        else:
            report_text = run_with_progress(scenario, check=check, max_memory=budget, **options)
    except OSError as error:
        # The core's only file output is the trace: its error names the file.
        if trace is None:
            raise
        raise CliError(f"--trace: {describe_os_error(error)}") from None
    report = print_report(report_text, json_output)
    if out is not None:
        try:
            (out / "results.json").write_text(report_text, encoding="utf-8")
            (out / "summary.txt").write_text(
                render_text(report_tables(report, REPORT_WIDTH)), encoding="utf-8"
            )
        except OSError as error:
            raise CliError(f"--out: {describe_os_error(error)}") from None
    if not json_output:
        for written in [path for path in (trace, out) if path is not None]:
            stdout.print(f"wrote {written}")


def say_on_terminal(message: str) -> None:
    """A progress line on stderr, only on a terminal."""
    if stderr.is_terminal:
        stderr.print(message)


@app.command()
def real(
    scenario: Annotated[
        Path,
        typer.Argument(
            metavar="SCENARIO", help="Scenario file (TOML), see docs/real-vcpus.md.", show_default=False
        ),
    ],
    policy: Annotated[
        Optional[str],
        typer.Option(help="Run under this registered policy (default parameters) instead of the scenario's."),
    ] = None,
    reps: Annotated[
        Optional[int], typer.Option(help="Repetitions, with seeds seed, seed+1, ...; overrides run.reps.")
    ] = None,
    seed: Annotated[
        Optional[int], typer.Option(help="Seed of the first repetition; overrides the scenario's run.seed.")
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the JSON report (or comparison) instead of tables.")
    ] = False,
    deadline_s: Annotated[
        Optional[float],
        typer.Option(
            "--deadline-s",
            help="Wall-clock seconds a run may last at most (with the scenario's horizon; default: "
            f"{vsched.real.DEFAULT_DEADLINE_S:g}).",
        ),
    ] = None,
    memory_per_vm: Annotated[
        Optional[str],
        typer.Option(
            "--memory-per-vm",
            metavar="SIZE",
            help="Guest memory of each VM at most, e.g. 256M "
            f"(default: {vsched.real.DEFAULT_MEMORY_PER_VM >> 20}M).",
        ),
    ] = None,
    compare: Annotated[
        bool,
        typer.Option(
            "--compare",
            help="Also run the simulator with the same policy and seeds, and print both side by side: "
            "median and range (min–max) over the runs, and real over simulated.",
        ),
    ] = False,
    baseline: Annotated[
        Optional[Path],
        typer.Option(
            metavar="ALONE.toml",
            help="With --compare: the same VMs alone, for each VM's slowdown (its completion over its "
            "median completion alone, in each world).",
        ),
    ] = None,
) -> None:
    """Run a scenario on real vCPUs (KVM) under a vsched policy and print what `vsched run` prints."""
    check_input_file("SCENARIO", scenario)
    if baseline is not None:
        if not compare:
            raise CliError("--baseline: only meaningful with --compare")
        check_input_file("--baseline", baseline)
    memory = None if memory_per_vm is None else parse_size(memory_per_vm, "--memory-per-vm")
    options: dict[str, Any] = {
        "seed": seed,
        "reps": reps,
        "policy": policy,
        "deadline_s": deadline_s,
        "memory_per_vm": memory,
    }
    if compare:
        result = vsched.real.compare(scenario, baseline=baseline, progress=say_on_terminal, **options)
        if json_output:
            print_json(result)
        else:
            stdout.print(vsched.real.comparison_table(result))
        return
    progress = RunProgress("real")
    try:
        report_text = vsched.real.run_json(scenario, progress=progress, **options)
    finally:
        progress.close()
    print_report(report_text, json_output)


@app.command()
def validate(
    scenario: Annotated[
        Path, typer.Argument(metavar="SCENARIO", help="Scenario file (TOML).", show_default=False)
    ],
    max_memory: Annotated[Optional[str], MAX_MEMORY_OPTION] = None,
) -> None:
    """Check a scenario file without running it."""
    check_input_file("SCENARIO", scenario)
    vsched.validate(scenario, max_memory=max_memory_bytes(max_memory))
    stdout.print(f"{scenario}: valid")


def bound(x: float) -> str:
    """A parameter's bound as a user writes it: integers with thousands separators."""
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"


def catalogue(entries: list[dict[str, Any]]) -> Group:
    """Policies or workloads: per entry its name and description, then its parameters."""
    parts: list[RenderableType] = []
    for entry in entries:
        parts.append(Text.assemble((entry["name"], "bold"), f"  {entry['description']}"))
        if entry.get("models"):
            parts.append(f"models: {entry['models']}")
        if entry.get("hypervisor") == "xen":
            parts.append("Xen: a host has a driver domain (dom0) by default")
        elif entry.get("hypervisor") == "kvm":
            parts.append("KVM: no driver domain (the host kernel does the I/O)")
        if entry["params"]:
            table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 2))
            table.add_column("parameter", no_wrap=True)
            table.add_column("default", justify="right", no_wrap=True)
            table.add_column("range", justify="right", no_wrap=True)
            table.add_column("meaning")
            for param in entry["params"]:
                bounds = "" if param["min"] is None else f"{bound(param['min'])} .. {bound(param['max'])}"
                table.add_row(
                    param["name"], json.dumps(param["default"], ensure_ascii=False), bounds, param["doc"]
                )
            parts.append(table)
        else:
            parts.append(Text("  no parameters\n"))
    return Group(*parts)


def print_catalogue(entries: list[dict[str, Any]], json_output: bool) -> None:
    if json_output:
        print_json(entries)
    else:
        stdout.print(catalogue(entries))


@app.command()
def policies(
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the scheduling policies and their parameters (a scenario's scheduler table)."""
    print_catalogue(vsched.policies(), json_output)


@app.command()
def workloads(
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the guest workloads and their parameters (a scenario's vm.workload tables)."""
    print_catalogue(vsched.workloads(), json_output)


@app.command()
def demo(
    print_scenario: Annotated[
        bool, typer.Option("--print-scenario", help="Print the scenario's TOML instead of running it.")
    ] = False,
) -> None:
    """Run the embedded default scenario and explain what it shows."""
    if print_scenario:
        print(vsched.DEFAULT_SCENARIO, end="")
        return
    report = json.loads(run_with_progress(vsched.DEFAULT_SCENARIO))
    baseline = json.loads(run_with_progress(vsched.DEFAULT_BASELINE_SCENARIO))
    parts = [
        *demo_text.introduction(report),
        report_tables(report, stdout.width),
        *demo_text.conclusion(report),
        *demo_text.slowdown(report, baseline),
        demo_text.NEXT_STEPS,
    ]
    for part in parts:
        stdout.print(part)
        stdout.print()


BENCH_FIGURES = (
    ("events_per_s", "simulation events handled per wall-clock second"),
    ("ns_per_event", "wall-clock nanoseconds per event"),
    ("sim_s_per_wall_s", "simulated seconds per wall-clock second"),
    ("events", "events in the run"),
    ("wall_s", "wall-clock seconds the run took"),
    ("queue_len_mean", "mean length of the event queue"),
    ("bare_loop_events_per_s", "a bare binary-heap loop at that length, events per second"),
    ("vs_bare_loop", "the simulator's events per second over the bare loop's"),
)


@app.command()
def bench(
    sim_s: Annotated[
        Optional[float], typer.Option(help="Simulated seconds (default: the standard length).")
    ] = None,
    copies: Annotated[
        int,
        typer.Option(help="Repeat the scenario's VMs this many times (1-64): 8 copies are 256 guest vCPUs."),
    ] = 1,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Run the standard benchmark scenario and report simulation speed, beside a bare
    binary-heap event loop's on this machine (docs/performance.md)."""
    figures = vsched.bench(sim_s, copies)
    if json_output:
        print_json(figures)
        return
    stdout.print(
        f"benchmark scenario {figures['scenario']}: {figures['pcpus']} pCPUs, {figures['vcpus']} vCPUs,"
        f" {figures['sim_s']:g} simulated seconds on one core"
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("figure", style="bold", no_wrap=True)
    table.add_column("value", justify="right")
    table.add_column("meaning")
    for key, meaning in BENCH_FIGURES:
        table.add_row(key, format_value(key, figures[key]), meaning)
    stdout.print(table)


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
        plot_trace(trace, output, start_ms=start_ms, end_ms=end_ms)
    except PlotError as error:
        raise CliError(str(error)) from None
    stdout.print(f"wrote {output}")


class JobsProgress:
    """A bar over a batch of runs on stderr, drawn only on a terminal (redirected output and
    CI logs get one line at the end instead)."""

    def __init__(self, description: str) -> None:
        self.description = description
        self.bar: Optional[Progress] = None
        self.task: Optional[TaskID] = None
        self.started_at = time.monotonic()
        self.first_done: Optional[int] = None

    def __call__(self, done: int, total: int) -> None:
        if self.first_done is None:
            self.first_done = done
            if done:
                stderr.print(f"{done} of {total} runs already stored: resuming")
        if self.bar is None and stderr.is_terminal:
            self.bar = Progress(
                TextColumn(self.description),
                BarColumn(),
                TextColumn("{task.completed}/{task.total} runs"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=stderr,
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task("", total=total)
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, completed=done, total=total)

    def close(self, total: int) -> None:
        if self.bar is not None:
            self.bar.stop()
        ran = total - (self.first_done or 0)
        stderr.print(f"{ran} runs in {time.monotonic() - self.started_at:.0f} s ({total} in all)")


def run_batch(
    jobs: list[Any],
    out: Path,
    description: str,
    workers: int,
    backend: str,
    address: Optional[str],
    settings: RunSettings,
) -> Any:
    """Run `jobs` into the store `out`/runs.jsonl with a progress bar; on Ctrl-C, say how to
    resume and exit 130 (the finished runs are kept). A failed run raises `JobFailed`."""
    from vsched.runs import Store, run_jobs

    if backend not in ("local", "ray"):
        raise CliError(f"--backend: expected local or ray, got '{backend}'")
    if address is not None and backend != "ray":
        raise CliError("--address: only meaningful with --backend ray")
    if workers < 1:
        raise CliError(f"--jobs: expected at least 1, got {workers}")
    make_directory("--out", out)
    try:
        store = Store(out / "runs.jsonl")
    except OSError as error:
        raise CliError(f"--out: {describe_os_error(error)}") from None
    progress = JobsProgress(description)
    try:
        run_jobs(
            jobs,
            store,
            workers=workers,
            backend=backend,
            address=address,
            progress=progress,
            settings=settings,
        )
    except BaseException as error:
        # A failed run (JobFailed) or an interruption: the bar goes, the finished runs stay.
        if progress.bar is not None:
            progress.bar.stop()
        if not isinstance(error, KeyboardInterrupt):
            raise
        print(
            f"interrupted: {len(store.rows)} finished runs kept in {out / 'runs.jsonl'}; "
            "run the same command again to resume",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_INTERRUPTED) from None
    finally:
        store.close()
    progress.close(len({job.key for job in jobs}))
    return store


JOBS_OPTION = typer.Option("--jobs", "-j", help="Runs in parallel (local processes; default: all cores).")
# The backslash keeps Typer's rich help from reading "[ray]" as markup.
BACKEND_OPTION = typer.Option(
    help="Where runs execute: local processes, or a Ray cluster (pip install 'vsched\\[ray]')."
)
ADDRESS_OPTION = typer.Option(help="Ray cluster address (default: start a local Ray instance).")


@app.command()
def sweep(
    scenario: Annotated[
        Path, typer.Argument(metavar="SCENARIO", help="Scenario file (TOML).", show_default=False)
    ],
    set_: Annotated[
        Optional[list[str]],
        typer.Option(
            "--set",
            help="KEY=V1,V2,...: a dotted scenario key and its values, e.g. scheduler.tslice_ms=10,30 or "
            "vm.web.vcpus=2,4 (an array element by name, index or *). Repeat for a cross product.",
        ),
    ] = None,
    policy: Annotated[
        Optional[str],
        typer.Option(
            help="Comma-separated policies to run each point under, at their default parameters "
            "(--set scheduler.KEY=... still applies)."
        ),
    ] = None,
    reps: Annotated[int, typer.Option(help="Seeds per point: seed, seed+1, ...")] = 1,
    seed: Annotated[int, typer.Option(help="Seed of the first repetition.")] = 1,
    jobs: Annotated[Optional[int], JOBS_OPTION] = None,
    out: Annotated[
        Optional[Path],
        typer.Option(help="Directory for runs.jsonl and results.parquet (default: sweep-<scenario>)."),
    ] = None,
    metric: Annotated[
        Optional[list[str]],
        typer.Option(
            help="A results column to summarize, e.g. vm.spin.completion_s "
            "(repeatable; default: completion times)."
        ),
    ] = None,
    backend: Annotated[str, BACKEND_OPTION] = "local",
    address: Annotated[Optional[str], ADDRESS_OPTION] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    check: Annotated[bool, CHECK_OPTION] = False,
    max_memory: Annotated[Optional[str], MAX_MEMORY_OPTION] = None,
    skip_infeasible: Annotated[
        bool,
        typer.Option(
            "--skip-infeasible",
            help="List and leave out the points whose scenario is invalid (e.g. a VM wider than the "
            "host under a co-scheduling policy) instead of refusing the sweep.",
        ),
    ] = False,
) -> None:
    """Run a scenario over every combination of parameter values, several seeds each.

    Finished runs are kept in OUT/runs.jsonl as they end: rerunning an interrupted sweep runs
    only what is missing. Results (one row per run, a set.KEY column per swept key, the
    policy, every metric) go to OUT/results.parquet, and a table of means ± standard
    deviations to the terminal.
    """
    from vsched import sweep as sweeping
    from vsched.runs import write_parquet

    check_input_file("SCENARIO", scenario)
    if reps < 1:
        raise CliError(f"--reps: expected at least 1, got {reps}")
    if not 0 <= seed <= _U64_MAX - (reps - 1):
        raise CliError(f"--seed: expected an integer from 0 to {_U64_MAX - (reps - 1)}, got {seed}")
    settings = RunSettings(check, max_memory_bytes(max_memory))
    # The core checks each name (a one-line `--policy: unknown policy ...` error) as it plans.
    policies = [p.strip() for p in policy.split(",") if p.strip()] if policy else [None]
    text = vsched.read_scenario(scenario)
    grid = sweeping.points(set_ or [], policies)
    try:
        planned = sweeping.plan(
            str(scenario), text, grid, range(seed, seed + reps), settings.max_memory, skip_infeasible
        )
    except sweeping.InfeasiblePoint as error:
        raise CliError(f"{error}; --skip-infeasible lists and skips such points") from None
    for skipped_point in planned.skipped:
        # One line each, however long: print, not the console, which wraps.
        print(f"skipped (infeasible) {skipped_point.describe()}", file=sys.stderr)
    job_list, grid = planned.jobs, planned.points
    out = out if out is not None else Path(f"sweep-{scenario.stem}")
    workers = jobs or os.cpu_count() or 1
    store = run_batch(job_list, out, f"sweep {scenario.name}", workers, backend, address, settings)
    rows = [store.rows[job.key] for job in job_list]
    try:
        write_parquet(rows, out / "results.parquet", sweeping.swept_columns(job_list))
    except OSError as error:
        raise CliError(f"--out: {describe_os_error(error)}") from None
    metrics = metric or sweeping.default_metrics(rows)
    keys = [k for k, _ in grid[0].overrides] if grid else []
    summary = sweeping.summary(grid, job_list, rows, metrics)
    if json_output:
        skipped = [
            {**dict(s.values), "policy": s.policy or "(scenario's)", "reason": s.reason}
            for s in planned.skipped
        ]
        print_json({"out": str(out), "metrics": metrics, "points": summary, "skipped": skipped})
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in [*keys, "policy", "runs", *metrics]:
        table.add_column(column, justify="left" if column in (*keys, "policy") else "right")
    for entry in summary:
        table.add_row(*[str(entry[c]) for c in [*keys, "policy", "runs", *metrics]])
    stdout.print(table)
    for m in metrics:
        if unfinished := sweeping.unfinished_runs(rows, m):
            stdout.print(
                f"warning: {m}: the workload did not finish in {unfinished} of {len(rows)} runs;"
                " the means are over the runs that finished",
                style="bold red",
            )
    stdout.print(f"wrote {out / 'results.parquet'} ({len(rows)} runs; mean ± std over seeds)")


@app.command()
def reproduce(
    papers: Annotated[
        Optional[list[str]],
        typer.Argument(
            metavar="[PAPER]...", help="seed000 .. seed004, or all (the default).", show_default=False
        ),
    ] = None,
    reps: Annotated[
        Optional[int],
        typer.Option(help="Seeds per case (default: as many as each paper used; fewer with --quick)."),
    ] = None,
    jobs: Annotated[Optional[int], JOBS_OPTION] = None,
    quick: Annotated[
        bool,
        typer.Option(
            "--quick", help="A reduced version: fewer seeds and shorter runs, every claim still tested."
        ),
    ] = False,
    figure: Annotated[
        Optional[list[str]], typer.Option(help="Only this figure, by its id (e.g. fig4; repeatable).")
    ] = None,
    out: Annotated[Path, typer.Option(help="Directory for results, figures and the report.")] = Path(
        "reproduction"
    ),
    markdown_file: Annotated[
        Optional[Path],
        typer.Option("--markdown", help="Also write the Markdown report here (e.g. docs/reproductions.md)."),
    ] = None,
    backend: Annotated[str, BACKEND_OPTION] = "local",
    address: Annotated[Optional[str], ADDRESS_OPTION] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help='Print {"claims": [...]} as JSON instead of the claims table.')
    ] = False,
    check: Annotated[bool, CHECK_OPTION] = False,
    max_memory: Annotated[Optional[str], MAX_MEMORY_OPTION] = None,
) -> None:
    """Reproduce the seed papers' experiments and check their claims.

    Writes OUT/results.parquet (one row per run), OUT/figures/*.png|svg, OUT/report.md and
    .html (our numbers beside the paper's, each claim marked holds / does not hold) and
    OUT/claims.json. Finished runs are kept in OUT/runs.jsonl, so an interrupted
    reproduction resumes where it stopped.
    """
    from vsched import reproduce as reproduction

    if reps is not None and reps < 1:
        raise CliError(f"--reps: expected at least 1, got {reps}")
    run_settings = RunSettings(check, max_memory_bytes(max_memory))
    names = papers or ["all"]
    try:
        selected = reproduction.select(names)
    except ValueError as error:
        raise CliError(str(error)) from None
    settings = reproduction.Settings(reps, quick, tuple(figure or ()))
    try:
        reproduction.check_figures(selected, settings.figures)
    except ValueError as error:
        raise CliError(str(error)) from None
    job_list = reproduction.plan(selected, settings)
    store = run_batch(job_list, out, "reproduce", jobs or os.cpu_count() or 1, backend, address, run_settings)
    outcomes = reproduction.evaluate(selected, settings, store.rows)
    # The command that regenerates the report (parallelism and backend do not change it).
    command = " ".join(
        [
            "vsched reproduce",
            *names,
            *(["--quick"] if quick else []),
            *([f"--reps {reps}"] if reps else []),
            *(f"--figure {f}" for f in figure or []),
            f"--out {out.as_posix()}",
            *([f"--markdown {markdown_file.as_posix()}"] if markdown_file is not None else []),
        ]
    )
    try:
        reproduction.write_outputs(outcomes, job_list, store.rows, out, settings, command, markdown_file)
    except OSError as error:
        raise CliError(describe_os_error(error)) from None
    claims = [c for o in outcomes for c in o.claims]
    if json_output:
        print_json({"claims": [c.as_json() for c in claims]})
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("paper", "figure", "claim", "verdict"):
        table.add_column(column)
    for c in claims:
        table.add_row(c.paper, c.figure, c.claim, "holds" if c.holds else "does not hold")
    stdout.print(table)
    stdout.print(
        f"{sum(c.holds for c in claims)} of {len(claims)} claims hold; {reproduction.why_summary(claims)}; "
        f"report in {out / 'report.md'}"
    )
    if markdown_file is not None:
        stdout.print(f"wrote {markdown_file}")


def debugging() -> bool:
    return os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")


def internal_failure(message: str) -> NoReturn:
    """Exit 1 with `message`, after the traceback of the exception being handled when
    VSCHED_DEBUG is set."""
    if debugging():
        traceback.print_exc()
    fail(message, EXIT_INTERNAL_ERROR)


def interrupted() -> NoReturn:
    print("interrupted", file=sys.stderr)
    raise SystemExit(EXIT_INTERRUPTED)


def main(argv: Optional[list[str]] = None) -> None:
    """Entry point of the `vsched` console script: whatever happens, one line on stderr and
    an exit code (2 bad input, 1 a policy bug or an internal error, 130 Ctrl-C)."""
    try:
        command = typer.main.get_command(app)
        exit_code = command.main(args=argv, prog_name="vsched", standalone_mode=False)
    except (CliError, vsched.ScenarioError) as error:
        fail(str(error))
    except UsageError as error:
        message = error.format_message()  # type: ignore[attr-defined]  # click's UsageError has it
        if not message:
            # A bare `vsched`: click has already printed the help in place of an error.
            raise SystemExit(EXIT_BAD_INPUT) from None
        fail(message)
    except JobFailed as error:
        fail(str(error), error.exit_code)
    except OSError as error:
        fail(describe_os_error(error))
    except vsched.PolicyError as error:
        # A policy written in Python is the user's code: its traceback comes first.
        policy_traceback = getattr(error, "policy_traceback", None)
        if policy_traceback:
            print(policy_traceback, end="", file=sys.stderr)
        fail(f"policy failure (a bug in the policy, not in the scenario): {error}", EXIT_INTERNAL_ERROR)
    except vsched.InternalError as error:
        internal_failure(str(error))
    except (KeyboardInterrupt, typer.Abort):
        # Older Typer and click turn Ctrl-C into Abort; newer Typer into exit code 130.
        interrupted()
    except SystemExit:
        raise
    except BaseException as error:  # noqa: B036 - the last resort, PyO3's PanicException included
        internal_failure(f"internal error: {type(error).__name__}: {error}")
    if exit_code == EXIT_INTERRUPTED:
        interrupted()
    sys.exit(exit_code if isinstance(exit_code, int) else 0)
