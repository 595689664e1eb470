"""`vsched sweep` and `vsched reproduce`: batches of runs, and `run_batch`, which runs a batch
into OUT/runs.jsonl so that an interrupted batch resumes where it stopped.
"""

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

import vsched
from vsched.cli.app import app
from vsched.cli.errors import EXIT_INTERRUPTED, CliError, describe_os_error
from vsched.cli.inputs import U64_MAX, check_input_file, make_directory, max_memory_bytes
from vsched.cli.options import ADDRESS_OPTION, BACKEND_OPTION, CHECK_OPTION, JOBS_OPTION, MAX_MEMORY_OPTION
from vsched.cli.output import print_json, stdout
from vsched.cli.progress import JobsProgress
from vsched.policy import split_policies

if TYPE_CHECKING:
    from vsched.runs import RunSettings


def run_batch(
    jobs: list[Any],
    out: Path,
    description: str,
    workers: int,
    backend: str,
    address: Optional[str],
    settings: "RunSettings",
) -> Any:
    """Run `jobs` into the store `out`/runs.jsonl with a progress bar; on Ctrl-C, say how to
    resume and exit 130 (the finished runs are kept). A failed run raises `JobFailed`, a
    directory another process writes `StoreBusy` (exit 2). The store comes back open, `out`
    locked: the caller writes the results from the runs, then closes it."""
    from vsched.runs import Store, run_jobs

    if backend not in ("local", "ray"):
        raise CliError(f"--backend: expected local or ray, got '{backend}'")
    if address is not None and backend != "ray":
        raise CliError("--address: only meaningful with --backend ray")
    if workers < 1:
        raise CliError(f"--jobs: expected at least 1, got {workers}")
    make_directory("--out", out)
    try:
        store = Store(out / "runs.jsonl", "--out")
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
        store.close()
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
    progress.close(len({job.key for job in jobs}))
    return store


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
            help="Comma-separated policies to run each point under, at their default parameters or "
            "those given as NAME(KEY=VALUE, ...), e.g. 'credit(tslice_ms=10),cfs'. A --set "
            "scheduler.KEY applies to the policies that take KEY; the others run at their defaults."
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
    from rich import box
    from rich.table import Table

    from vsched import sweep as sweeping
    from vsched.runs import RunSettings, write_parquet

    check_input_file("SCENARIO", scenario)
    if reps < 1:
        raise CliError(f"--reps: expected at least 1, got {reps}")
    if not 0 <= seed <= U64_MAX - (reps - 1):
        raise CliError(f"--seed: expected an integer from 0 to {U64_MAX - (reps - 1)}, got {seed}")
    settings = RunSettings(check, max_memory_bytes(max_memory))
    # The core checks each name (a one-line `--policy: unknown policy ...` error) as it plans.
    policies: list[Optional[str]] = [*split_policies(policy)] if policy else [None]
    text = vsched.read_scenario(scenario)
    grid, notes = sweeping.fit_to_policies(sweeping.points(set_ or [], policies or [None]))
    for note in notes:
        print(note, file=sys.stderr)
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
    finally:
        store.close()
    metrics = metric or sweeping.default_metrics(rows)
    # Every swept key, in order: a policy that does not take one has no value for it.
    keys = list(dict.fromkeys(k for point in grid for k, _ in point.overrides))
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
        table.add_row(*[str(entry.get(c, "—")) for c in [*keys, "policy", "runs", *metrics]])
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
    .html (our numbers beside the paper's, each claim's verdict under one rule for every paper:
    holds robustly, holds within noise, does not hold, cannot be decided; each reason's numbers
    measured from the runs) and
    OUT/claims.json. Finished runs are kept in OUT/runs.jsonl, so an interrupted
    reproduction resumes where it stopped.
    """
    from rich import box
    from rich.table import Table

    from vsched import reproduce as reproduction
    from vsched.runs import RunSettings

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
    finally:
        store.close()
    claims = [c for o in outcomes for c in o.claims]
    if json_output:
        print_json({"claims": [c.as_json() for c in claims]})
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("paper", "figure", "claim", "verdict"):
        table.add_column(column)
    for c in claims:
        table.add_row(c.paper, c.figure, c.claim, c.outcome.value)
    stdout.print(table)
    stdout.print(
        f"Claims: {reproduction.headline(claims)}; {reproduction.why_summary(claims)}; "
        f"report in {out / 'report.md'}"
    )
    if markdown_file is not None:
        stdout.print(f"wrote {markdown_file}")
