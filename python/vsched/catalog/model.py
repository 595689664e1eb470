"""The vocabulary of the catalog: a paper has figures, a figure has cases and claims.

A *case* is one bar or point of a figure: a scenario file under scenarios/papers run under a
policy, possibly with overrides of the scenario's keys. Each case runs once per seed; a
figure's *metric* reduces one run (a flat row, see `vsched.runs.flatten`) to one number, and
its *stat* reduces the seeds to the plotted value (their mean, or their standard deviation
for the papers' "standard deviation of completion time" figures). A *claim* is one of the
paper's statements about the figure, written as a check over the plotted values that says
whether it holds and with which of our numbers. A claim may carry a *why*: the reason it does
not hold (or would not, where it holds only narrowly), in one of three kinds.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Callable, Literal, Union, get_args

# Re-exported: a metric is a function of a Row, and the paper modules and `reproduce` import it from here.
from vsched.runs import Override
from vsched.runs import Row as Row

Metric = Callable[[Row], Union[float, list[float], None]]
"""One run's value; None when the run did not produce it (e.g. a VM that did not finish).
A list (of quantiles) is used by CDF figures."""


@dataclass(frozen=True)
class Case:
    """One bar or point of a figure."""

    x: str
    """The x-axis label (a category), e.g. "2000" or "4 (2.5)"."""
    series: str
    """The legend label, usually the policy as the paper names it, e.g. "Co_scheduling"."""
    scenario: str
    """Path under scenarios/papers, e.g. "seed000/exp1-2000.toml"."""
    policy: str | None = None
    """Run under this policy at its default parameters (None: the scenario's [scheduler])."""
    overrides: tuple[Override, ...] = ()
    metric: Metric | None = None
    """This case's value, when it is not the figure's metric: e.g. one of two VMs of the same
    runs, which then plot as two bars from one set of jobs."""


@dataclass(frozen=True)
class Verdict:
    holds: bool
    sim: str
    """Our numbers behind the verdict, in one line."""


@dataclass
class FigureResult:
    """A figure's per-seed values, as the claims and plots see them."""

    figure: Figure
    samples: dict[tuple[str, str], list[float]]
    """(x, series) -> one value per seed (for CDF figures: every quantile of every seed)."""
    missing: dict[tuple[str, str], int] = field(default_factory=dict)
    """(x, series) -> number of seeds whose metric was None (e.g. unfinished runs)."""
    read: set[tuple[str, str]] = field(default_factory=set)
    """The cells read since it was last cleared: which values a claim's verdict rests on."""

    @property
    def xs(self) -> list[str]:
        return list(dict.fromkeys(c.x for c in self.figure.cases))

    @property
    def series(self) -> list[str]:
        return list(dict.fromkeys(c.series for c in self.figure.cases))

    def xs_and_series(self) -> list[tuple[str, str]]:
        """Every (x, series) case, in the figure's order."""
        return [(x, s) for x in self.xs for s in self.series]

    def seeds(self, x: str, series: str) -> list[float]:
        """The per-seed values of one case (empty when no seed has one)."""
        self.read.add((x, series))
        return self.samples.get((x, series), [])

    def value(self, x: str, series: str) -> float:
        """The plotted value: the figure's stat over the seeds (NaN when no seed has one)."""
        xs = self.seeds(x, series)
        if not xs:
            return float("nan")
        if self.figure.stat == "std":
            return statistics.stdev(xs) if len(xs) > 1 else 0.0
        return statistics.fmean(xs)

    def mean(self, x: str, series: str) -> float:
        xs = self.seeds(x, series)
        return statistics.fmean(xs) if xs else float("nan")

    def std(self, x: str, series: str) -> float:
        xs = self.seeds(x, series)
        return statistics.stdev(xs) if len(xs) > 1 else 0.0


WhyKind = Literal["contradicts", "leaves-out", "lacks-mechanism"]
"""Why a claim does not hold: the paper states both it and its opposite ("contradicts"), the
paper does not state what decides it ("leaves-out"), or vsched does not model what decides it
("lacks-mechanism")."""

WHY_KINDS: tuple[str, ...] = get_args(WhyKind)

WHY_LABELS: dict[str, str] = {
    "contradicts": "the paper contradicts itself",
    "leaves-out": "the paper leaves out what decides it",
    "lacks-mechanism": "vsched lacks a mechanism",
}
"""How the report names each kind."""


@dataclass(frozen=True)
class Why:
    """The reason a claim does not hold, as the report gives it for a failing claim."""

    kind: WhyKind
    text: str
    """Markdown, 1–4 sentences. "contradicts": quote both passages (with section or figure);
    "leaves-out": name the unstated parameter or setup and how it decides the outcome;
    "lacks-mechanism": name the mechanism vsched does not model."""

    def __post_init__(self) -> None:
        if self.kind not in WHY_KINDS:
            raise ValueError(f"Why.kind: expected one of {', '.join(WHY_KINDS)}, got {self.kind!r}")
        if not self.text.strip():
            raise ValueError("Why.text: empty")

    @property
    def label(self) -> str:
        return WHY_LABELS[self.kind]


@dataclass(frozen=True)
class Claim:
    text: str
    """The paper's statement, e.g. "VDS is faster than Credit at every size"."""
    check: Callable[[FigureResult], Verdict]
    paper_value: str = ""
    """The paper's numbers behind it ("" when the paper gives none), e.g. "−12.69 %, −12.78 %, −12.72 %"."""
    if_fails: Why | None = None
    """Why it does not hold in vsched, shown only when it does not (also set for claims that
    hold narrowly and may flip)."""


@dataclass(frozen=True)
class Figure:
    id: str
    """Short name used in file names, e.g. "fig2"."""
    label: str
    """As the paper numbers it, e.g. "Fig. 2" or "Fig. 7(a)"."""
    title: str
    xlabel: str
    ylabel: str
    cases: tuple[Case, ...]
    metric: Metric
    claims: tuple[Claim, ...]
    stat: Literal["mean", "std"] = "mean"
    kind: Literal["bar", "line", "cdf"] = "bar"
    paper_values: dict[tuple[str, str], float] = field(default_factory=dict)
    """The values the paper gives for (x, series), shown beside ours in the report."""
    paper_unit: str = ""
    """What `paper_values` measure when it is not the figure's own quantity, e.g. " % vs Credit"
    for a paper that gives only changes against a baseline."""
    quick_overrides: tuple[Override, ...] = ()
    """Applied to every case under --quick (e.g. fewer supersteps), so the claims can still
    be tested in a fraction of the time. Say in `notes` what they change."""
    notes: str = ""
    """How the figure is modelled and what the quick version changes (Markdown)."""


@dataclass(frozen=True)
class Paper:
    id: str
    """"seed000" .. "seed004": the folder under scenarios/papers."""
    title: str
    reps: int
    """Repetitions per case by default: as many as the paper used."""
    quick_reps: int
    figures: tuple[Figure, ...]
    notes: str = ""


# Metric helpers: most figures plot one VM's completion time or the mean over clusters.


def vm(name: str, metric: str) -> Metric:
    """The metric of VM `name`, e.g. vm("bsp", "completion_s")."""
    return lambda row: row.get(f"vm.{name}.{metric}")


DRIVER_WORKLOAD = "dom0"
"""The `workload` a report gives a driver domain (docs/scenario.md, "The driver domain")."""


def last_vm(metric: str = "completion_s", prefix: str = "") -> Metric:
    """The largest `metric` over the guest VMs whose name starts with `prefix` (None if any is
    None). Driver domains are left out: a Xen host has one by default, and it never finishes."""

    def value(row: Row) -> float | None:
        guests = [
            k.removesuffix(".workload")
            for k, w in row.items()
            if k.startswith(f"vm.{prefix}") and k.endswith(".workload") and w != DRIVER_WORKLOAD
        ]
        values = [row.get(f"{g}.{metric}") for g in guests]
        finished = [float(v) for v in values if v is not None]
        if not values or len(finished) < len(values):
            return None
        return max(finished)

    return value


def mean_clusters(metric: str = "completion_s") -> Metric:
    """The mean of `metric` over the virtual clusters (None if any is None)."""

    def value(row: Row) -> float | None:
        values = [v for k, v in row.items() if k.startswith("vc.") and k.endswith(f".{metric}")]
        if not values or any(v is None for v in values):
            return None
        return float(statistics.fmean(values))

    return value


def host(metric: str) -> Metric:
    return lambda row: row.get(f"host.{metric}")
