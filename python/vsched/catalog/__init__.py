"""The catalog of the seed papers' experiments: one module per paper (seed000 .. seed004),
each a `Paper` whose figures say which scenarios and policies they run, how a run becomes a
plotted value, and what the paper claims about them (see `model`).

The scenario files live in scenarios/papers/<paper>/ and are embedded in the package when it
is built, so the catalog runs from any installation.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from vsched import _core
from vsched.catalog.model import AtLeast, Case, Claim, Figure, FigureResult, Paper, Row, Verdict
from vsched.catalog.reasons import Why
from vsched.runs import Job, make_jobs

__all__ = [
    "PAPER_IDS",
    "Case",
    "Claim",
    "Figure",
    "FigureResult",
    "Paper",
    "Verdict",
    "Why",
    "case_jobs",
    "figure_jobs",
    "figure_result",
    "load",
    "scenario_text",
]

PAPER_IDS = ("seed000", "seed001", "seed002", "seed003", "seed004")


@cache
def load(paper_id: str) -> Paper:
    """The catalog entry of `paper_id` ("seed000" .. "seed004")."""
    if paper_id not in PAPER_IDS:
        raise ValueError(f"paper: expected one of {', '.join(PAPER_IDS)} or all, got '{paper_id}'")
    paper: Paper = importlib.import_module(f"vsched.catalog.{paper_id}").PAPER
    return paper


# In a source checkout (an editable install), scenario files are read from disk, so that an
# edit shows without rebuilding the core; elsewhere the embedded copies are used.
_CHECKOUT = Path(__file__).resolve().parents[3]
CHECKOUT_PAPERS = _CHECKOUT / "scenarios" / "papers" if (_CHECKOUT / "Cargo.toml").is_file() else None


def scenario_text(path: str) -> str:
    """The TOML text of a paper scenario, by its path under scenarios/papers."""
    if CHECKOUT_PAPERS is not None and (CHECKOUT_PAPERS / path).is_file():
        return (CHECKOUT_PAPERS / path).read_text(encoding="utf-8")
    scenarios = _core.paper_scenarios()
    if path not in scenarios:
        raise KeyError(f"no paper scenario '{path}' (the package embeds {len(scenarios)})")
    return scenarios[path]


def seeds(reps: int) -> range:
    """Repetition i of every case runs with seed 1 + i, as `vsched run --reps` does."""
    return range(1, reps + 1)


def case_jobs(figure: Figure, case: Case, reps: int, quick: bool) -> list[Job]:
    overrides = (*case.overrides, *(figure.quick_overrides if quick else ()))
    return make_jobs(case.scenario, scenario_text(case.scenario), case.policy, overrides, seeds(reps))


def figure_jobs(figure: Figure, reps: int, quick: bool) -> list[Job]:
    return [job for case in figure.cases for job in case_jobs(figure, case, reps, quick)]


def figure_result(figure: Figure, reps: int, quick: bool, rows: dict[str, Row]) -> FigureResult:
    """The figure's per-seed values from finished `rows` (keyed by job key)."""
    samples: dict[tuple[str, str], list[float]] = {}
    missing: dict[tuple[str, str], int] = {}
    bounds: dict[tuple[str, str], list[float]] = {}
    runs: dict[tuple[str, str], list[Row]] = {}
    for case in figure.cases:
        cell = (case.x, case.series)
        values: list[float] = []
        for job in case_jobs(figure, case, reps, quick):
            row = rows[job.key]
            runs.setdefault(cell, []).append(row)
            value = (case.metric or figure.metric)(row)
            if value is None:
                missing[cell] = missing.get(cell, 0) + 1
            elif isinstance(value, AtLeast):
                bounds.setdefault(cell, []).append(value.value)
            elif isinstance(value, Sequence):
                values.extend(float(v) for v in value)
            else:
                values.append(float(value))
        samples[cell] = values
    return FigureResult(figure, samples, missing, bounds, runs)
