"""The vocabulary of the catalog: a paper has figures, a figure has cases and claims.

A *case* is one bar or point of a figure: a scenario file under scenarios/papers run under a
policy, possibly with overrides of the scenario's keys. Each case runs once per seed; a
figure's *metric* reduces one run (a flat row, see `vsched.runs.flatten`) to one number, and
its *stat* reduces the seeds to the plotted value (their mean, or their standard deviation
for the papers' "standard deviation of completion time" figures). A *claim* is one of the
paper's statements about the figure, written as a check over the plotted values that says
its verdict (`stats`: one rule for every paper) and our numbers behind it. A claim may carry
a *why* (`reasons`): the reason it does not hold, as data whose numbers come from the runs.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Literal, Union

from vsched.catalog.stats import Estimate, Outcome, mean_estimate, std_estimate

# Re-exported: a metric is a function of a Row, and the paper modules and `reproduce` import it from here.
from vsched.runs import Override
from vsched.runs import Row as Row

if TYPE_CHECKING:
    from vsched.catalog.reasons import Why


@dataclass(frozen=True)
class AtLeast:
    """A value known only from below: the completion time of a VM that had not finished when
    its run stopped is at least the time it had been running."""

    value: float


Metric = Callable[[Row], Union[float, list[float], AtLeast, None]]
"""One run's value; AtLeast for a completion time the run stopped before; None when the run
did not produce it. A list (of quantiles) is used by CDF figures."""


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
    outcome: Outcome
    sim: str
    """Our numbers behind the verdict, in one line."""

    @property
    def holds(self) -> bool:
        """Holds robustly."""
        return self.outcome is Outcome.HOLDS


@dataclass
class FigureResult:
    """A figure's per-seed values, as the claims and plots see them."""

    figure: Figure
    samples: dict[tuple[str, str], list[float]]
    """(x, series) -> one value per seed (for CDF figures: every quantile of every seed)."""
    missing: dict[tuple[str, str], int] = field(default_factory=dict)
    """(x, series) -> number of seeds whose metric was None (the run did not produce it)."""
    bounds: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    """(x, series) -> the lower bounds of the seeds whose completion time is not known (the
    run stopped before the VM finished): how long it had run."""
    rows: dict[tuple[str, str], list[Row]] = field(default_factory=dict)
    """(x, series) -> the runs behind the case, one per seed (what reasons measure)."""
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
        """The per-seed values of one case that are known (empty when no seed has one)."""
        self.read.add((x, series))
        return self.samples.get((x, series), [])

    def unfinished(self, x: str, series: str) -> int:
        """How many seeds of the case stopped before the VM finished."""
        return len(self.bounds.get((x, series), []))

    def estimate(self, x: str, series: str) -> Estimate:
        """The plotted statistic over the seeds with its standard error: a lower bound when
        some runs did not finish, unknown when some runs gave no value."""
        values = self.seeds(x, series)
        if self.missing.get((x, series)):
            return Estimate.none()
        bounds = self.bounds.get((x, series), [])
        if self.figure.stat == "std":
            return std_estimate(values, bounds)
        return mean_estimate(values, bounds)

    def value(self, x: str, series: str) -> float:
        """The plotted value (NaN when it is unknown)."""
        return self.estimate(x, series).value

    def mean(self, x: str, series: str) -> float:
        xs = self.seeds(x, series)
        return statistics.fmean(xs) if xs else float("nan")

    def std(self, x: str, series: str) -> float:
        xs = self.seeds(x, series)
        return statistics.stdev(xs) if len(xs) > 1 else 0.0


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


def completion(row: Row, prefix: str) -> float | AtLeast | None:
    """`prefix`.completion_s of a VM or a virtual cluster (prefix "vm.NAME" or "vc.NAME"); for a
    VM that had not finished when the run stopped, a lower bound: how long it had run."""
    value = row.get(f"{prefix}.completion_s")
    if value is not None:
        return float(value)
    if row.get(f"{prefix}.finished") is False or (prefix.startswith("vc.") and f"{prefix}.name" in row):
        return AtLeast(float(row["sim_s"]) - float(row.get(f"{prefix}.created_s") or 0.0))
    return None


def vm(name: str, metric: str) -> Metric:
    """The metric of VM `name`, e.g. vm("bsp", "completion_s") (a lower bound if unfinished)."""
    if metric == "completion_s":
        return lambda row: completion(row, f"vm.{name}")
    return lambda row: row.get(f"vm.{name}.{metric}")


HOST_WORKLOADS = ("dom0", "host-threads")
"""The `workload` a report gives a host's own domains, which are not guests: a Xen host's
driver domain (docs/scenario.md, "The driver domain") and a KVM host's threads (docs/realism.md,
"A KVM host is never silent")."""


def guests(row: Row, prefix: str = "") -> list[str]:
    """The guest VMs of a run whose name starts with `prefix`, as "vm.NAME" (the host's own
    domains left out: they serve the guests and never finish)."""
    return [
        k.removesuffix(".workload")
        for k, w in row.items()
        if k.startswith(f"vm.{prefix}") and k.endswith(".workload") and w not in HOST_WORKLOADS
    ]


def slowest(values: list[float | AtLeast | None]) -> float | AtLeast | None:
    """The largest of several completion times: None if any is unknown, a lower bound if any
    is one."""
    if not values or any(v is None for v in values):
        return None
    bounds = [v.value for v in values if isinstance(v, AtLeast)]
    finished = [v for v in values if isinstance(v, float)]
    if bounds:
        return AtLeast(max(bounds + finished))
    return max(finished)


def last_vm(prefix: str = "") -> Metric:
    """The total time: the largest completion time over the guest VMs whose name starts with
    `prefix` (a lower bound if any had not finished; None if there is none)."""
    return lambda row: slowest([completion(row, g) for g in guests(row, prefix)])


def mean_clusters() -> Metric:
    """The mean completion time over the virtual clusters (a lower bound if any had not
    finished)."""

    def value(row: Row) -> float | AtLeast | None:
        names = [k.removesuffix(".name") for k in row if k.startswith("vc.") and k.endswith(".name")]
        values = [completion(row, n) for n in names]
        if not values or any(v is None for v in values):
            return None
        mean = statistics.fmean(
            v.value if isinstance(v, AtLeast) else float(v) for v in values if v is not None
        )
        return AtLeast(mean) if any(isinstance(v, AtLeast) for v in values) else mean

    return value


def host(metric: str) -> Metric:
    return lambda row: row.get(f"host.{metric}")
