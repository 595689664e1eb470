"""Many runs, once each: the machinery under `vsched sweep` and `vsched reproduce`.

A `Job` is one simulation: a scenario's TOML text with overrides applied, a policy and one
seed. Its `key` digests all three, so a job is identified by what it computes. Finished jobs
are appended to a `Store` (`vsched.store`: a JSON-lines file, one finished run per line,
written and synced as each run ends, locked against other writers); running the same jobs
again skips those already stored. An interrupted sweep therefore resumes where it stopped,
and no run is lost or counted twice.

Jobs run in parallel on local processes or, with the optional `ray` extra, on a Ray cluster;
the same job gives the same row on either (only `wall_s` differs).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import logging
import multiprocessing
import os
import signal
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Callable

import vsched
from vsched import _core, parallel_memory
from vsched import policy as python_policy
from vsched.store import JOB_COLUMNS as JOB_COLUMNS
from vsched.store import Row as Row
from vsched.store import Store as Store
from vsched.store import StoreBusy as StoreBusy

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

Override = tuple[str, Any]
"""A dotted scenario key and its value, e.g. ("scheduler.tslice_ms", 10); see `apply_overrides`."""


# ---------------------------------------------------------------------------------------------
# Overrides: dotted keys into a scenario's TOML


# Deepest nesting of arrays and tables in an override's value: more than any scenario key
# takes, and far below what would exhaust Python's recursion or the core's JSON reader.
MAX_VALUE_DEPTH = 32


def _depth(value: Any) -> int:
    """How deeply arrays and tables nest in `value` (a scalar: 0), without recursion."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, (list, tuple)):
            depth += 1
            deepest = max(deepest, depth)
            if depth > MAX_VALUE_DEPTH:
                break
            stack.extend((child, depth) for child in item)
    return deepest


def _too_deep(key: str) -> vsched.ScenarioError:
    return vsched.ScenarioError(
        f"{key}: expected a value with arrays and tables nested at most {MAX_VALUE_DEPTH} levels deep"
    )


def parse_value(text: str, key: str = "--set") -> Any:
    """A command-line value as TOML would read it (10, 2.5, true, "x"); a bare word is a string.
    A value nested more than MAX_VALUE_DEPTH levels deep raises `ScenarioError` naming `key`."""
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    except RecursionError:
        raise _too_deep(key) from None
    if _depth(value) > MAX_VALUE_DEPTH:
        raise _too_deep(key)
    return value


def apply_overrides(text: str, overrides: Sequence[Override], policy: str | None = None) -> str:
    """`text` (a scenario's TOML) with its [scheduler] replaced by `policy` at its default
    parameters when given, then each dotted key set to its value. In an array of tables, a
    part selects the element with that `name`, or at that index, or `*` every one:
    `vm.bsp.workload.compute_ms`, `virtual_cluster.*.workload.iterations`. Comments are lost;
    with neither policy nor overrides the text is returned unchanged.

    The rules are the core's (crates/vsched/src/overrides.rs), shared with `vsched run
    --policy`; values cross over as JSON."""
    if policy is not None:
        vsched._check_text(policy, "--policy")
    encoded = []
    for key, value in overrides:
        vsched._check_text(key, "key")
        if _depth(value) > MAX_VALUE_DEPTH:
            raise _too_deep(key)
        try:
            encoded.append((key, json.dumps(value)))
        except TypeError:
            # Only what JSON can carry reaches the core, e.g. not a TOML date from `--set`.
            raise vsched.ScenarioError(
                f"{key}: expected a number, string, boolean, array or table, got {type(value).__name__}"
            ) from None
    return _core.apply_overrides(text, policy, encoded)


# ---------------------------------------------------------------------------------------------
# Jobs and rows


@dataclass(frozen=True)
class Job:
    """One simulation: `scenario` names it, `text` is its TOML with `policy` and `overrides`
    applied (see `make_jobs`); `policy_digest` is the SHA-256 of the file of the Python
    policy it runs under, if any."""

    scenario: str
    text: str
    policy: str | None
    overrides: tuple[Override, ...]
    seed: int
    policy_digest: str = ""

    @property
    def key(self) -> str:
        """What the run computes: the scenario text (overrides applied), policy (and the code
        of a Python one) and seed."""
        digest = hashlib.sha256(self.text.encode()).hexdigest()
        identity = [digest, self.policy, self.seed] + ([self.policy_digest] if self.policy_digest else [])
        return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:20]


def make_jobs(
    scenario: str, text: str, policy: str | None, overrides: Sequence[Override], seeds: Iterable[int]
) -> list[Job]:
    """One job per seed. A `policy` replaces the scenario's [scheduler] table by that policy at
    its default parameters, before the overrides (which may then set `scheduler.*` keys).

    A Python policy's file is made absolute first (jobs may run in processes with another
    current directory): given as `policy` or a `scheduler.name` override, against the current
    directory; named in the scenario file, against that file's directory."""
    cwd = os.getcwd()
    absolute_overrides = [
        (
            key,
            python_policy.absolute_name(value, cwd)
            if key == "scheduler.name" and isinstance(value, str)
            else value,
        )
        for key, value in overrides
    ]
    final = apply_overrides(
        text, absolute_overrides, None if policy is None else python_policy.absolute_name(policy, cwd)
    )
    name = _scheduler_name(final)
    if (
        name is not None
        and python_policy.is_python_policy(name)
        and not Path(name.rpartition(":")[0]).is_absolute()
    ):
        scenario_dir = python_policy.policy_dir(scenario, None) if Path(scenario).is_file() else cwd
        final = apply_overrides(final, [("scheduler.name", python_policy.absolute_name(name, scenario_dir))])
        name = _scheduler_name(final)
    digest = python_policy.file_digest(name) if name is not None else ""
    return [Job(scenario, final, policy, tuple(overrides), seed, digest) for seed in seeds]


def _scheduler_name(text: str) -> str | None:
    """The `[scheduler] name` of scenario text, or None if it has none (validation says why)."""
    try:
        name = tomllib.loads(text).get("scheduler", {}).get("name")
    except (tomllib.TOMLDecodeError, AttributeError):
        return None
    return name if isinstance(name, str) else None


def _flatten(prefix: str, value: Any, row: Row) -> None:
    if isinstance(value, dict):
        for key, child in value.items():
            _flatten(f"{prefix}.{key}", child, row)
    elif isinstance(value, list) and value and all(isinstance(e, dict) for e in value):
        for index, element in enumerate(value):
            _flatten(f"{prefix}.{element.get('name', index)}", element, row)
    else:
        row[prefix] = value


def flatten(run: dict[str, Any]) -> Row:
    """One run of a report (`report["runs"][i]`) as a flat row: `host.<metric>` (policy
    counters as `host.policy_counters.<counter>`), `vm.<name>.<metric>`, and in clusters
    `vc.<cluster>.<metric>`, `hosts.<index>.<metric>`, `network.<metric>` and `io.<metric>`."""
    row: Row = {}
    renamed = {"vms": "vm", "virtual_clusters": "vc"}
    for key, value in run.items():
        _flatten(renamed.get(key, key), value, row)
    return row


@dataclass(frozen=True)
class RunSettings:
    """How every job of a batch runs; not part of a job's identity (`Job.key`), since neither
    changes what a run computes: `check` runs the simulator's invariant checks after every
    event, `max_memory` is the memory budget in bytes a scenario must fit (0 = the core's)."""

    check: bool = False
    max_memory: int = 0


def execute(job: Job, settings: RunSettings | None = None) -> Row:
    """Run one job and return its row (job columns first; `policy` is the policy the run had,
    the scenario's own when the job names none). Runs in a worker process."""
    settings = settings or RunSettings()
    report = vsched.run(job.text, seed=job.seed, reps=1, check=settings.check, max_memory=settings.max_memory)
    row: Row = {
        "key": job.key,
        "scenario": job.scenario,
        "policy": report["policy"],
        "overrides": json.dumps(list(map(list, job.overrides))),
        "seed": job.seed,
    }
    row.update(flatten(report["runs"][0]))
    return row


# ---------------------------------------------------------------------------------------------
# Failed runs


class JobFailed(Exception):
    """A run of a batch failed. `str()` is one line naming the run (its scenario, swept values,
    policy, seed and key) and why; `exit_code` is 2 when the core refused the run's input
    (`ScenarioError`) and 1 otherwise (a policy bug, a bug in vsched, a worker that died)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def __reduce__(self) -> tuple[Any, ...]:
        return (JobFailed, (str(self), self.exit_code))


def describe_job(job: Job) -> str:
    """The run in words, e.g. `run tiny.toml with scheduler.tslice_ms=10, policy rr, seed 3
    (key 0123...)`."""
    parts = [f"run {job.scenario}"]
    if job.overrides:
        parts.append("with " + ", ".join(f"{key}={json.dumps(value)}" for key, value in job.overrides) + ",")
    if job.policy:
        parts.append(f"policy {job.policy},")
    parts.append(f"seed {job.seed} (key {job.key})")
    return " ".join(parts)


def _one_line(text: str) -> str:
    return " ".join(text.split())


# What a worker sends back: ("row", row) or ("error", exception class name, one-line message).
# Only strings and JSON values cross between processes, so nothing can fail to unpickle.
Outcome = tuple[Any, ...]


Task = Callable[[Job, RunSettings], Row]
"""What a worker does with a job: `execute` (a row of metrics), or another picklable callable
(e.g. `vsched.repetitions.WholeReport`)."""


def _attempt(job: Job, settings: RunSettings, task: Task = execute) -> Outcome:
    try:
        return ("row", task(job, settings))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as error:  # noqa: B036 - a PanicException is a BaseException
        return ("error", type(error).__name__, _one_line(str(error)))


def _failure(job: Job, kind: str, message: str) -> JobFailed:
    where = describe_job(job)
    if kind == "ScenarioError":
        return JobFailed(f"{where}: {message}", 2)
    if kind == "PolicyError":
        return JobFailed(
            f"{where} failed: policy failure (a bug in the policy, not in the scenario): {message}"
        )
    if kind == "InternalError":
        return JobFailed(f"{where} failed: {message}")
    return JobFailed(f"{where} failed: internal error: {kind}: {message}")


def _row(job: Job, outcome: Outcome) -> Row:
    if outcome[0] == "row":
        row: Row = outcome[1]
        return row
    raise _failure(job, outcome[1], outcome[2])


def _died(job: Job, exitcode: int | None) -> JobFailed:
    """The failure of a run whose worker process ended without an answer."""
    if exitcode == -signal.SIGKILL:
        why = "its worker process was killed (SIGKILL; by the out-of-memory killer?)"
    elif exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        why = f"its worker process died ({name}): a crash of vsched, please report"
    else:
        why = f"its worker process died (exit code {exitcode}): a crash of vsched, please report"
    return JobFailed(f"{describe_job(job)} failed: {why}")


# ---------------------------------------------------------------------------------------------
# Backends

Progress = Callable[[int, int], None]
"""Called as `progress(done, total)` after each finished run."""

# prctl(2): the signal a process gets when its parent dies (Linux).
_PR_SET_PDEATHSIG = 1
# How often an idle worker checks that its parent is alive, where prctl is not available.
_PARENT_CHECK_S = 1.0


def _die_with_parent(expected_parent: int | None) -> int:
    """Make this worker die with the process that started it, and return that process's id.

    On Linux the kernel kills the worker (SIGKILL) when its parent dies, even in the middle of
    a run; elsewhere the worker notices between runs that it has been orphaned (its parent
    id changed). A parent that died before this call is noticed here."""
    parent = expected_parent if expected_parent is not None else os.getppid()
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(ctypes.c_int(_PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGKILL))
        except (OSError, AttributeError):
            pass  # the parent id check below still ends an orphan
    if os.getppid() != parent:
        os._exit(1)
    return parent


def _worker_main(
    connection: Connection, expected_parent: int | None, settings: RunSettings, task: Task = execute
) -> None:
    """A worker process: run the jobs received on `connection`, send back each outcome,
    stop on None, on a closed connection or when orphaned."""
    # Ctrl-C is the parent's to handle (it keeps what finished and stops the workers).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = _die_with_parent(expected_parent)
    try:
        while True:
            while not connection.poll(_PARENT_CHECK_S):
                if os.getppid() != parent:
                    os._exit(1)
            job = connection.recv()
            if job is None:
                return
            connection.send(_attempt(job, settings, task))
    except (EOFError, OSError):
        return  # the parent closed its end or went away


@dataclass
class _Worker:
    process: BaseProcess
    connection: Connection
    job: Job | None = None


def _stop(workers: Sequence[_Worker]) -> None:
    """Stop every worker: an idle one is asked to, one still running a job is killed (that
    run is lost, not stored)."""
    for worker in workers:
        if worker.job is None and worker.process.is_alive():
            with contextlib.suppress(OSError):
                worker.connection.send(None)
        else:
            worker.process.kill()
    for worker in workers:
        worker.process.join(timeout=5)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.connection.close()


def run_local(
    jobs: Sequence[Job], workers: int, settings: RunSettings, task: Task = execute
) -> Iterator[Row]:
    """Run `jobs` on `workers` local processes (in this one for 1), each with `task`, yielding
    each row as its job finishes, in that order; nothing is stored. A failed run raises
    `JobFailed` naming it, and the runs still going are stopped. Fewer processes run when
    `workers` runs would not fit the machine's memory (`vsched.parallel_memory`)."""
    if workers > 1:
        workers = parallel_memory.fit_jobs(jobs, workers, settings.max_memory)
    if workers <= 1:
        for job in jobs:
            yield _row(job, _attempt(job, settings, task))
        return
    context = multiprocessing.get_context()
    # A worker's parent is this process, unless a fork server starts them.
    expected_parent = None if context.get_start_method() == "forkserver" else os.getpid()
    pool: list[_Worker] = []
    try:
        for _ in range(min(workers, len(jobs))):
            ours, theirs = context.Pipe()
            process = context.Process(
                target=_worker_main, args=(theirs, expected_parent, settings, task), daemon=True
            )
            process.start()
            theirs.close()
            pool.append(_Worker(process, ours))
        queue = iter(jobs)
        for worker in pool:
            worker.job = next(queue, None)
            if worker.job is not None:
                worker.connection.send(worker.job)
        while any(worker.job is not None for worker in pool):
            busy = [worker for worker in pool if worker.job is not None]
            ready = wait([w.connection for w in busy] + [w.process.sentinel for w in busy])
            for worker in busy:
                running = worker.job
                assert running is not None
                if worker.connection in ready:
                    try:
                        outcome = worker.connection.recv()
                    except (EOFError, OSError):
                        worker.process.join(timeout=5)
                        raise _died(running, worker.process.exitcode) from None
                    worker.job = None
                    yield _row(running, outcome)
                    worker.job = next(queue, None)
                    if worker.job is not None:
                        worker.connection.send(worker.job)
                elif worker.process.sentinel in ready:
                    # Dead without an answer (a result sent before dying is read above).
                    worker.process.join(timeout=5)
                    raise _died(running, worker.process.exitcode)
    finally:
        # Also on an interruption or a failure: runs in progress are lost, not stored.
        _stop(pool)


def _ray(jobs: Sequence[Job], address: str | None, settings: RunSettings) -> Iterator[Row]:
    try:
        import ray
    except ImportError:
        raise vsched.ScenarioError("backend: ray is not installed (pip install 'vsched[ray]')") from None
    started_here = not ray.is_initialized()
    if started_here:
        # ray.init takes the level as an int (its internals also accept a name, its types do not).
        ray.init(address=address, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    try:
        remote = ray.remote(_attempt)
        pending = {remote.remote(job, settings): job for job in jobs}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                job = pending.pop(ref)
                try:
                    outcome = ray.get(ref)
                except Exception as error:  # the task's worker died, or Ray failed it
                    first_line = (str(error).strip().splitlines() or [""])[0]
                    why = f"{type(error).__name__}: {first_line}"
                    raise JobFailed(f"{describe_job(job)} failed: the Ray task failed: {why}") from None
                yield _row(job, outcome)
    finally:
        if started_here:
            ray.shutdown()


def run_jobs(
    jobs: Sequence[Job],
    store: Store,
    *,
    workers: int = 1,
    backend: str = "local",
    address: str | None = None,
    progress: Progress | None = None,
    settings: RunSettings | None = None,
) -> list[Row]:
    """Run every job whose key is not in `store` yet, add each row to `store` as it finishes,
    and return the rows of all `jobs` in their order (a key shared by several jobs runs once).

    A run that fails raises `JobFailed` naming it; the runs finished before it stay stored."""
    settings = settings or RunSettings()
    todo = list({job.key: job for job in jobs if job.key not in store.rows}.values())
    total = len({job.key for job in jobs})
    done = total - len(todo)
    if progress:
        progress(done, total)
    if todo:
        rows = _ray(todo, address, settings) if backend == "ray" else run_local(todo, workers, settings)
        for row in rows:
            store.add(row)
            done += 1
            if progress:
                progress(done, total)
    return [store.rows[job.key] for job in jobs]


def arrow_table(rows: Sequence[Row], names: Sequence[str]) -> Any:
    """`rows` as a `pyarrow.Table` with the columns `names`, in that order. A field a row lacks
    is null; a column mixing kinds of values is written as text (JSON)."""
    import pyarrow as pa

    columns = {}
    for name in names:
        values = [row.get(name) for row in rows]
        try:
            columns[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            columns[name] = pa.array([None if v is None else json.dumps(v) for v in values], pa.string())
    return pa.table(columns)


def write_parquet(rows: Sequence[Row], path: Path, extra: dict[str, dict[str, Any]] | None = None) -> None:
    """Write `rows` (one per run) as a Parquet table with a column per field seen in any row:
    the job columns first, then `extra` columns (per key: column -> value), then the metrics in
    name order. A field a row lacks is null; a column mixing kinds of values is written as text."""
    import pyarrow.parquet as pq

    unique = list({row["key"]: row for row in rows}.values())
    extra = extra or {}
    extra_names = list(dict.fromkeys(name for values in extra.values() for name in values))
    metric_names = sorted({name for row in unique for name in row} - set(JOB_COLUMNS))
    combined = [{**row, **extra.get(row["key"], {})} for row in unique]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(arrow_table(combined, [*JOB_COLUMNS, *extra_names, *metric_names]), path)
