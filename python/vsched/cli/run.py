"""`vsched run`, `vsched real` and `vsched validate`: one scenario, run in the simulator, run on
real vCPUs, or checked without running.
"""

import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

import vsched
from vsched import _core
from vsched.cli.app import app
from vsched.cli.errors import CliError, describe_os_error
from vsched.cli.inputs import check_input_file, make_directory, max_memory_bytes, parse_size
from vsched.cli.options import CHECK_OPTION, MAX_MEMORY_OPTION
from vsched.cli.output import REPORT_WIDTH, print_json, print_report, render_text, stdout
from vsched.cli.progress import JobsProgress, RunProgress, run_with_progress, say_on_terminal

# Imported where used, not here: each takes longer to load than a small run takes to simulate.
if TYPE_CHECKING:
    from vsched.runs import RunSettings


def parse_settings(options: list[str]) -> dict[str, Any]:
    """`--set KEY=VALUE` options as {key: value}, each value read as `vsched sweep --set` reads
    one (TOML, or a bare word as a string)."""
    from vsched.runs import parse_value

    settings: dict[str, Any] = {}
    for option in options:
        key, sep, value = option.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise CliError(f"--set: expected KEY=VALUE (e.g. scheduler.tslice_ms=10), got '{option}'")
        if key in settings:
            raise CliError(f"--set: {key} is given twice")
        settings[key] = parse_value(value.strip(), key)
    return settings


def run_in_parallel(scenario: Path, workers: int, settings: "RunSettings", **options: Any) -> str:
    """`vsched run --jobs`: the repetitions on `workers` processes, a bar on a terminal."""
    from vsched.repetitions import run_repetitions

    progress = JobsProgress("run")
    try:
        return run_repetitions(scenario, workers=workers, settings=settings, progress=progress, **options)
    finally:
        if progress.bar is not None:
            progress.bar.stop()


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
            help="Run under this policy instead of the scenario's \\[scheduler] table: a registered name or "
            "a Python policy, path/to/file.py:ClassName (docs/python-policies.md), at its default "
            "parameters or those given as NAME(KEY=VALUE, ...), e.g. 'credit(tslice_ms=10)'."
        ),
    ] = None,
    set_: Annotated[
        Optional[list[str]],
        typer.Option(
            "--set",
            help="KEY=VALUE: set a dotted scenario key for this run, e.g. scheduler.tslice_ms=10 or "
            "vm.spin.vcpus=2 (as vsched sweep --set, one value; after --policy). Repeatable.",
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
        # vsched.runs, which parses the values, loads slowly: only for a run that has some.
        "overrides": parse_settings(set_) if set_ else {},
        "trace": trace,
        "trace_limit": trace_limit,
    }
    try:
        if jobs > 1:
            from vsched.runs import RunSettings

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
        from vsched.report import report_tables

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


def honour_interrupts() -> None:
    """Takes SIGINT back if this process started with it ignored: a POSIX shell starts a
    script's background job (`vsched real ... &`) so, and Python then installs no handler,
    so `kill -INT` would leave real vCPUs running until the deadline. Ctrl-C and SIGINT stop
    a real run (exit 130) wherever it runs."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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
            f"{_core.REAL_DEFAULT_DEADLINE_S:g}).",
        ),
    ] = None,
    memory_per_vm: Annotated[
        Optional[str],
        typer.Option(
            "--memory-per-vm",
            metavar="SIZE",
            help="Guest memory of each VM at most, e.g. 256M "
            f"(default: {_core.REAL_DEFAULT_MEMORY_PER_VM >> 20}M).",
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
    allow_disturbed: Annotated[
        bool,
        typer.Option(
            "--allow-disturbed",
            help="With --compare: compare even when most real runs were disturbed by other processes "
            "(the title still names them).",
        ),
    ] = False,
    machine_costs: Annotated[
        bool,
        typer.Option(
            "--machine-costs",
            help="With --compare: run the simulator with this machine's costs as the real runs measured "
            "them (a switch, a pause-loop exit and its stretched window), not the hardware era's.",
        ),
    ] = False,
    trace: Annotated[
        Optional[Path],
        typer.Option(
            metavar="FILE",
            help="Write the first repetition as a trace in `vsched run --trace`'s format: pCPU rows, "
            "vCPU tracks, pause-loop exits (docs/traces.md).",
        ),
    ] = None,
    trace_limit: Annotated[
        int, typer.Option(help="Most events to write to the trace; 0 = the default bound (1,000,000).")
    ] = 0,
) -> None:
    """Run a scenario on real vCPUs (KVM) under a vsched policy and print what `vsched run` prints."""
    import vsched.real

    honour_interrupts()
    check_input_file("SCENARIO", scenario)
    if baseline is not None:
        if not compare:
            raise CliError("--baseline: only meaningful with --compare")
        check_input_file("--baseline", baseline)
    if allow_disturbed and not compare:
        raise CliError("--allow-disturbed: only meaningful with --compare")
    if machine_costs and not compare:
        raise CliError("--machine-costs: only meaningful with --compare")
    if trace is not None and compare:
        raise CliError("--trace: not with --compare (trace one run of one world at a time)")
    if trace_limit and trace is None:
        raise CliError("--trace-limit: only meaningful with --trace FILE")
    memory = None if memory_per_vm is None else parse_size(memory_per_vm, "--memory-per-vm")
    options: dict[str, Any] = {
        "seed": seed,
        "reps": reps,
        "policy": policy,
        "deadline_s": deadline_s,
        "memory_per_vm": memory,
    }
    if compare:
        result = vsched.real.compare(
            scenario,
            baseline=baseline,
            progress=say_on_terminal,
            allow_disturbed=allow_disturbed,
            with_machine_costs=machine_costs,
            **options,
        )
        if json_output:
            print_json(result)
        else:
            stdout.print(vsched.real.comparison_table(result))
        return
    progress = RunProgress("real")
    try:
        report_text = vsched.real.run_json(
            scenario, progress=progress, trace=trace, trace_limit=trace_limit, **options
        )
    finally:
        progress.close()
    print_report(report_text, json_output)
    if trace is not None and not json_output:
        stdout.print(f"wrote {trace}")


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
