"""The one verdict rule of the catalog, for every paper.

A claim rests on comparisons of estimates: a plotted value (a mean over the seeds, or a
standard deviation) carries its standard error, and a quantity derived from several values
(a change against a baseline, a ratio, a mean over points) carries the error propagated to
first order (the delta method).

Every case runs the same seeds, and a seed draws the same workload under every policy (common
random numbers), so two values of the same seeds are compared seed by seed: the error of a
difference or a ratio counts their covariance. Two policies that make the same schedule on
every seed then differ by exactly nothing, which is known exactly, not noise.

- **An ordering** ("A is faster than B") needs a win a reader of the paper's bar charts would
  see: more than a margin, the paper's own where it states one, else `claims.SAME` (5 %) of
  the larger value. It holds robustly when A's win exceeds the margin by more than twice the
  standard error of the difference; it does not hold when the win falls short of the margin
  by more than that (a tie, or B ahead); in between the runs cannot tell, and the verdict is
  *within noise*.
- **A magnitude** ("about 26 % faster") is checked against a band derived from the paper's
  number by one rule (`band`): it holds robustly when the estimate and twice its error lie
  inside the band, does not hold when they lie wholly outside it, and is *within noise* when
  they straddle an edge.
- **Runs that never finish** leave a value bounded from below: a completion time is at least
  the horizon the run stopped at. Such a bound decides a claim about speed when it is enough
  (a policy whose runs do not finish is slower than one whose runs finish well before the
  horizon); otherwise the claim cannot be decided, and says why.

A claim made of several comparisons (at every point, for every series) does not hold when
any part does not hold, cannot be decided when any part cannot (and none fails), is within
noise when any part is, and holds robustly only when every part does.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Literal

Z = 2.0
"""How many standard errors a difference must exceed to count: about 95 % confidence that
its sign is not the seeds' noise."""

ABOUT = 0.25
"""The band around a number a paper states: ±25 % of the number as the paper states it (a
time, a percentage, a ratio, a rate). The papers report single measurements; the same effect
measured twice on one testbed varies by about that much in their own numbers (seed 004's
co-scheduled solo LU times 19.93–21.41 s, its two domains of one dual-CON run 16–39 % apart;
seed 000's declines of one policy against Credit 10.73–14.84 % across configurations that its
text calls the same effect). A range the paper states ("150–400 /s") is widened by the same
fraction at each end."""


class Outcome(str, Enum):
    """A claim's verdict."""

    HOLDS = "holds robustly"
    NOISE = "holds within noise"
    FAILS = "does not hold"
    UNDECIDED = "cannot be decided"

    @property
    def short(self) -> str:
        return {"holds robustly": "holds", "holds within noise": "within noise"}.get(self.value, self.value)


OUTCOMES: tuple[Outcome, ...] = tuple(Outcome)

MEANINGS: dict[Outcome, str] = {
    Outcome.HOLDS: "every comparison it rests on is decided its way by more than twice its standard error",
    Outcome.NOISE: "no comparison goes against it by more than twice its standard error, but at least one "
    "is within that: the runs neither confirm nor refute it",
    Outcome.FAILS: "at least one comparison goes against it by more than twice its standard error",
    Outcome.UNDECIDED: "a value it needs is missing or only bounded (runs that did not finish), or its "
    "premise does not hold",
}


def combine(outcomes: Iterable[Outcome]) -> Outcome:
    """The verdict of a claim made of several comparisons."""
    found = set(outcomes)
    for outcome in (Outcome.FAILS, Outcome.UNDECIDED, Outcome.NOISE):
        if outcome in found:
            return outcome
    return Outcome.HOLDS


Bound = Literal["exact", "at least", "at most", "unknown"]


@dataclass(frozen=True)
class Estimate:
    """A value with its standard error. `bound` says what is known of the true value:
    "exact" (the estimate), "at least" / "at most" (the estimate bounds it: some runs did not
    finish), "unknown" (no value)."""

    value: float
    error: float = 0.0
    bound: Bound = "exact"
    samples: tuple[float, ...] | None = None
    """The per-seed values behind a mean, in seed order, when it is exact: what pairs it
    with another mean of the same seeds."""

    @staticmethod
    def none() -> Estimate:
        return Estimate(math.nan, math.nan, "unknown")

    @property
    def known(self) -> bool:
        return self.bound != "unknown"

    def __str__(self) -> str:
        if not self.known:
            return "no value"
        prefix = {"exact": "", "at least": "≥ ", "at most": "≤ "}[self.bound]
        return f"{prefix}{self.value:.4g} ± {self.error:.2g}"


def mean_estimate(values: Sequence[float], lower_bounds: Sequence[float] = ()) -> Estimate:
    """The mean of per-seed values and its standard error. `lower_bounds` are the seeds whose
    value is only bounded from below (a run that did not finish: its horizon); with any, the
    mean is a lower bound too."""
    pooled = [*values, *lower_bounds]
    if not pooled:
        return Estimate.none()
    error = statistics.stdev(pooled) / math.sqrt(len(pooled)) if len(pooled) > 1 else 0.0
    if lower_bounds:
        return Estimate(statistics.fmean(pooled), error, "at least")
    return Estimate(statistics.fmean(pooled), error, "exact", tuple(values))


def paired(a: Estimate, b: Estimate) -> bool:
    """Whether two means come from the same seeds (their samples pair up)."""
    return a.samples is not None and b.samples is not None and len(a.samples) == len(b.samples) > 1


def seed_by_seed_error(residuals: Sequence[float]) -> float:
    """The standard error of a mean of per-seed residuals: exactly zero when every seed gives
    the same."""
    if all(r == residuals[0] for r in residuals):
        return 0.0
    return statistics.stdev(residuals) / math.sqrt(len(residuals))


def std_estimate(values: Sequence[float], lower_bounds: Sequence[float] = ()) -> Estimate:
    """The standard deviation of per-seed values and its standard error (normal theory:
    σ / √(2 (n − 1))). Unknown when some seeds have only a bound: the spread of values that
    are partly unknown is itself unknown."""
    if lower_bounds or len(values) < 2:
        return Estimate.none()
    std = statistics.stdev(values)
    return Estimate(std, std / math.sqrt(2 * (len(values) - 1)))


def _flip(bound: Bound) -> Bound:
    return {"at least": "at most", "at most": "at least"}.get(bound, bound)  # type: ignore[return-value]


def _joint(*bounds: Bound) -> Bound:
    """The bound of a sum of terms with these bounds (each "at least" term pushes the sum's
    true value up, each "at most" down; both at once leave it unknown)."""
    found = set(bounds) - {"exact"}
    if not found:
        return "exact"
    if len(found) > 1 or "unknown" in found:
        return "unknown"
    return found.pop()


def mean_of(estimates: Sequence[Estimate]) -> Estimate:
    """The mean of several estimates (independent)."""
    if not estimates:
        return Estimate.none()
    bound = _joint(*(e.bound for e in estimates))
    if bound == "unknown":
        return Estimate.none()
    value = statistics.fmean(e.value for e in estimates)
    first = estimates[0]
    if all(paired(first, e) for e in estimates) and bound == "exact":
        # Seed by seed: the mean's error then counts how the estimates move together.
        columns = [e.samples for e in estimates if e.samples is not None]
        samples = tuple(statistics.fmean(c) for c in zip(*columns))
        return Estimate(value, seed_by_seed_error(samples), "exact", samples)
    error = math.sqrt(sum(e.error**2 for e in estimates)) / len(estimates)
    return Estimate(value, error, bound)


def ratio(num: Estimate, den: Estimate) -> Estimate:
    """num / den, its error by the delta method."""
    bound = _joint(num.bound, _flip(den.bound))
    if bound == "unknown" or den.value == 0:
        return Estimate.none()
    value = num.value / den.value
    if paired(num, den) and bound == "exact":
        # The delta method seed by seed: num/den moves with num_i − value × den_i.
        assert num.samples is not None and den.samples is not None
        residuals = [a - value * b for a, b in zip(num.samples, den.samples)]
        return Estimate(value, seed_by_seed_error(residuals) / abs(den.value), bound)
    relative = math.hypot(num.error / num.value if num.value else 0.0, den.error / den.value)
    return Estimate(value, abs(value) * relative, bound)


def change(num: Estimate, den: Estimate) -> Estimate:
    """num / den − 1: a relative change (negative: lower)."""
    r = ratio(num, den)
    return Estimate(r.value - 1, r.error, r.bound)


def difference(high: Estimate, low: Estimate) -> Estimate:
    """high − low."""
    bound = _joint(high.bound, _flip(low.bound))
    if bound == "unknown":
        return Estimate.none()
    if paired(high, low) and bound == "exact":
        assert high.samples is not None and low.samples is not None
        differences = tuple(h - low_ for h, low_ in zip(high.samples, low.samples))
        return Estimate(high.value - low.value, seed_by_seed_error(differences), bound, differences)
    return Estimate(high.value - low.value, math.hypot(high.error, low.error), bound)


def positive(d: Estimate, margin: float = 0.0) -> Outcome:
    """Whether the true value of `d` exceeds `margin`: robustly (by more than Z standard
    errors), not at all (below it by more than that), or within noise. An exact zero error
    decides by the value alone; a bound decides only in its own direction."""
    if d.bound == "unknown":
        return Outcome.UNDECIDED
    slack = Z * d.error
    if d.value - margin > slack and d.bound != "at most":
        return Outcome.HOLDS
    if d.value - margin < -slack and d.bound != "at least":
        return Outcome.FAILS
    if d.bound != "exact":
        return Outcome.UNDECIDED  # a bound that points the other way says nothing
    if d.error == 0:
        return Outcome.FAILS  # known exactly, and exactly at the margin: not above it
    return Outcome.NOISE


def below(low: Estimate, high: Estimate, tolerance: float = 0.0) -> Outcome:
    """`low` < `high`: the ordering rule. `tolerance` is the paper's own margin, relative to
    `high` (0: none stated)."""
    return positive(difference(high, low), tolerance * high.value if high.known else 0.0)


def at_most(value: Estimate, limit: Estimate, slack: float) -> Outcome:
    """`value` ≤ `limit` × (1 + `slack`): "no slower than", with the slack a paper states."""
    return positive(difference(limit, value), -slack * limit.value if limit.known else 0.0)


def band(number: float, about: float = ABOUT) -> tuple[float, float]:
    """The band around a number a paper states (see `ABOUT`)."""
    low, high = number * (1 - about), number * (1 + about)
    return (min(low, high), max(low, high))


def range_band(low: float, high: float, about: float = ABOUT) -> tuple[float, float]:
    """The band around a range a paper states: widened by `about` at each end."""
    return (low * (1 - about), high * (1 + about))


def inside(value: Estimate, low: float, high: float) -> Outcome:
    """`value` lies in [low, high]: the magnitude rule."""
    if value.bound == "unknown":
        return Outcome.UNDECIDED
    slack = Z * value.error
    lo, hi = value.value - slack, value.value + slack
    if value.bound == "at least":
        return Outcome.FAILS if lo > high else Outcome.UNDECIDED
    if value.bound == "at most":
        return Outcome.FAILS if hi < low else Outcome.UNDECIDED
    if low <= lo and hi <= high:
        return Outcome.HOLDS
    if hi < low or lo > high:
        return Outcome.FAILS
    if value.error == 0:
        return Outcome.HOLDS if low <= value.value <= high else Outcome.FAILS
    return Outcome.NOISE
