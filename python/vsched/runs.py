"""Many runs, once each: the machinery under `vsched sweep` and `vsched reproduce`.

A `Job` is one simulation: a scenario's TOML text with overrides applied, a policy and one
seed. Its `key` digests all three, so a job is identified by what it computes. Finished jobs
are appended to a `Store` (a JSON-lines file, one finished run per line, written and synced
as each run ends); running the same jobs again skips those already stored. An interrupted
sweep therefore resumes where it stopped, and no run is lost or counted twice.

Jobs run in parallel on local processes or, with the optional `ray` extra, on a Ray cluster;
the same job gives the same row on either (only `wall_s` differs).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import signal
import sys
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import vsched
from vsched import _core

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

Row = dict[str, Any]
"""One finished run, flattened (see `flatten`): the job's columns, then its metrics."""

Override = tuple[str, Any]
"""A dotted scenario key and its value, e.g. ("scheduler.tslice_ms", 10); see `apply_overrides`."""

# Columns that say which job a row is; every other column is a metric of the run.
JOB_COLUMNS = ("key", "scenario", "policy", "overrides", "seed")


# ---------------------------------------------------------------------------------------------
# Overrides: dotted keys into a scenario's TOML


def parse_value(text: str) -> Any:
    """A command-line value as TOML would read it (10, 2.5, true, "x"); a bare word is a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_overrides(text: str, overrides: Sequence[Override], policy: str | None = None) -> str:
    """`text` (a scenario's TOML) with its [scheduler] replaced by `policy` at its default
    parameters when given, then each dotted key set to its value. In an array of tables, a
    part selects the element with that `name`, or at that index, or `*` every one:
    `vm.bsp.workload.compute_ms`, `virtual_cluster.*.workload.iterations`. Comments are lost;
    with neither policy nor overrides the text is returned unchanged.

    The rules are the core's (crates/vsched/src/overrides.rs), shared with `vsched run
    --policy`; values cross over as JSON."""
    encoded = []
    for key, value in overrides:
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
    applied (see `make_jobs`)."""

    scenario: str
    text: str
    policy: str | None
    overrides: tuple[Override, ...]
    seed: int

    @property
    def key(self) -> str:
        """What the run computes: the scenario text (overrides applied), policy and seed."""
        digest = hashlib.sha256(self.text.encode()).hexdigest()
        identity = json.dumps([digest, self.policy, self.seed])
        return hashlib.sha256(identity.encode()).hexdigest()[:20]


def make_jobs(
    scenario: str, text: str, policy: str | None, overrides: Sequence[Override], seeds: Iterable[int]
) -> list[Job]:
    """One job per seed. A `policy` replaces the scenario's [scheduler] table by that policy at
    its default parameters, before the overrides (which may then set `scheduler.*` keys)."""
    final = apply_overrides(text, overrides, policy)
    return [Job(scenario, final, policy, tuple(overrides), seed) for seed in seeds]


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


def execute(job: Job) -> Row:
    """Run one job and return its row (job columns first). Runs in a worker process."""
    report = vsched.run(job.text, seed=job.seed, reps=1)
    row: Row = {
        "key": job.key,
        "scenario": job.scenario,
        "policy": job.policy or "",
        "overrides": json.dumps(list(map(list, job.overrides))),
        "seed": job.seed,
    }
    row.update(flatten(report["runs"][0]))
    return row


# ---------------------------------------------------------------------------------------------
# The store of finished runs


class Store:
    """Finished runs in `path` (JSON lines), keyed by `Job.key`.

    A line is appended and synced to disk as each run finishes, so a killed sweep loses at
    most the runs in flight. A last line cut short by the kill is dropped on reopening.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[str, Row] = {}
        if path.exists():
            lines = path.read_text(encoding="utf-8").splitlines()
            kept = []
            for line in lines:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a write cut short by an interruption: that run is redone
                if row["key"] not in self.rows:
                    self.rows[row["key"]] = row
                    kept.append(line)
            if len(kept) != len(lines):
                path.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")

    def add(self, row: Row) -> None:
        if row["key"] in self.rows:
            return
        self.rows[row["key"]] = row
        self._file.write(json.dumps(row, allow_nan=True) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# Backends

Progress = Callable[[int, int], None]
"""Called as `progress(done, total)` after each finished run."""


def _ignore_interrupts() -> None:
    """Worker initializer: Ctrl-C is the parent's to handle (it keeps what finished)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _local(jobs: Sequence[Job], workers: int) -> Iterator[Row]:
    if workers <= 1:
        yield from map(execute, jobs)
        return
    pool = ProcessPoolExecutor(workers, initializer=_ignore_interrupts)
    try:
        pending: set[Future[Row]] = set()
        queue = iter(jobs)
        # A bounded number of jobs in flight, so that an interruption wastes little.
        for job in itertools.islice(queue, 2 * workers):
            pending.add(pool.submit(execute, job))
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()
                job = next(queue, None)
                if job is not None:
                    pending.add(pool.submit(execute, job))
    finally:
        # On an interruption, drop what has not started; runs in progress are lost, not stored.
        pool.shutdown(wait=False, cancel_futures=True)


def _ray(jobs: Sequence[Job], address: str | None) -> Iterator[Row]:
    try:
        import ray
    except ImportError:
        raise vsched.ScenarioError("backend: ray is not installed (pip install 'vsched[ray]')") from None
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        remote = ray.remote(execute)
        pending = [remote.remote(job) for job in jobs]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield from ray.get(done)
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
) -> list[Row]:
    """Run every job whose key is not in `store` yet, add each row to `store` as it finishes,
    and return the rows of all `jobs` in their order (a key shared by several jobs runs once)."""
    todo = list({job.key: job for job in jobs if job.key not in store.rows}.values())
    total = len({job.key for job in jobs})
    done = total - len(todo)
    if progress:
        progress(done, total)
    if todo:
        rows = _ray(todo, address) if backend == "ray" else _local(todo, workers)
        for row in rows:
            store.add(row)
            done += 1
            if progress:
                progress(done, total)
    return [store.rows[job.key] for job in jobs]


def write_parquet(rows: Sequence[Row], path: Path, extra: dict[str, dict[str, Any]] | None = None) -> None:
    """Write `rows` (one per run) as a Parquet table with a column per field seen in any row:
    the job columns first, then `extra` columns (per key: column -> value), then the metrics in
    name order. A field a row lacks is null; a column mixing kinds of values is written as text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    unique = list({row["key"]: row for row in rows}.values())
    extra = extra or {}
    extra_names = list(dict.fromkeys(name for values in extra.values() for name in values))
    metric_names = sorted({name for row in unique for name in row} - set(JOB_COLUMNS))
    columns = {}
    for name in [*JOB_COLUMNS, *extra_names, *metric_names]:
        if name in extra_names:
            values = [extra.get(row["key"], {}).get(name) for row in unique]
        else:
            values = [row.get(name) for row in unique]
        try:
            columns[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            columns[name] = pa.array([None if v is None else json.dumps(v) for v in values], pa.string())
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)
