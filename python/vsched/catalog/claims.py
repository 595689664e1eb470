"""Checks shared by the papers' claims, all under the one verdict rule of `stats`. Each builds
a `Claim.check`: a function of a `FigureResult` that returns a `Verdict` (an `Outcome` and our
numbers behind it, each value with its standard error). The plotted value is the figure's
stat over the seeds (a mean time, or a standard deviation); lower is better unless said.

A paper-specific claim can be any function `FigureResult -> Verdict`; these cover the common
shapes: who is best, an ordering, a change against a baseline within a band, values that are
the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Callable

from vsched.catalog import stats
from vsched.catalog.model import FigureResult, Verdict
from vsched.catalog.stats import Estimate, Outcome, combine

Check = Callable[[FigureResult], Verdict]

SAME = 0.05
"""Two values a paper calls the same, or a difference it calls small, without a number
("almost the same", "not obvious", "keeps the benefits"): within 5 % of each other, less than
a reader tells apart on a bar chart. Used by every paper's claims of that kind, and by its
converse: "A is faster (better, lower) than B" with no number must win by more than this
(`lowest`, `ordered`), or a win of 0.02 % that common random numbers make significant would
count as the difference a paper plots."""


def _at(result: FigureResult, at: Sequence[str] | None) -> list[str]:
    return list(at) if at is not None else result.xs


def percent(value: float) -> str:
    return f"{100 * value:+.1f} %"


def shown(e: Estimate, digits: int = 3) -> str:
    """An estimate in a verdict: "17.7 ± 0.3", "≥ 299 ± 12", or "no value"."""
    if not e.known:
        return "no value"
    prefix = {"exact": "", "at least": "≥ ", "at most": "≤ "}[e.bound]
    return f"{prefix}{e.value:.{digits}g} ± {e.error:.2g}"


def shown_change(e: Estimate) -> str:
    if not e.known:
        return "no value"
    prefix = {"exact": "", "at least": "≥ ", "at most": "≤ "}[e.bound]
    return f"{prefix}{percent(e.value)} ± {100 * e.error:.1f}"


def cell(r: FigureResult, x: str, series: str) -> str:
    """One case's value in a verdict, with how many of its runs did not finish."""
    text = shown(r.estimate(x, series))
    unfinished = r.unfinished(x, series)
    if unfinished:
        text += f" ({unfinished} of {len(r.seeds(x, series)) + unfinished} runs unfinished)"
    return text


def verdict(parts: Sequence[Outcome], sim: str) -> Verdict:
    return Verdict(combine(parts), sim)


def lowest(series: str, at: Sequence[str] | None = None) -> Check:
    """`series` has the lowest value at every x (of `at`): below each other series by more than
    `SAME`."""

    def check(r: FigureResult) -> Verdict:
        xs = _at(r, at)
        others = [s for s in r.series if s != series]
        outcomes = {
            x: combine(stats.below(r.estimate(x, series), r.estimate(x, s), SAME) for s in others) for x in xs
        }
        wrong = [x for x, o in outcomes.items() if o is not Outcome.HOLDS]
        detail = "; ".join(
            f"{x}: " + ", ".join(f"{s} {cell(r, x, s)}" for s in [series, *others]) for x in wrong
        )
        sim = f"{series} lowest at all {len(xs)} points" if not wrong else f"not clearly lowest at {detail}"
        return verdict(list(outcomes.values()), sim)

    return check


def ordered(order: Sequence[str], at: Sequence[str] | None = None, tolerance: float = SAME) -> Check:
    """Values increase along `order` (e.g. ["VDS", "Co_scheduling", "Credit"]: VDS lowest) at
    every x, each by more than `tolerance` (relative): the paper's own margin where it states
    one, else `SAME`."""

    def check(r: FigureResult) -> Verdict:
        xs = _at(r, at)
        outcomes = []
        bad = []
        for x in xs:
            pairs = [
                stats.below(r.estimate(x, a), r.estimate(x, b), tolerance) for a, b in zip(order, order[1:])
            ]
            outcomes += pairs
            if combine(pairs) is not Outcome.HOLDS:
                bad.append(f"{x}: " + " / ".join(f"{s} {cell(r, x, s)}" for s in order))
        sim = (
            f"{' < '.join(order)} at all {len(xs)} points"
            if not bad
            else f"not clearly {' < '.join(order)} at {len(bad)} of {len(xs)}: " + "; ".join(bad)
        )
        return verdict(outcomes, sim)

    return check


def change_within(
    series: str, baseline: str, low: float, high: float, at: Sequence[str] | None = None
) -> Check:
    """`series` / `baseline` − 1 lies in [low, high] at every x (e.g. −0.25 .. −0.10 for a
    10–25 % reduction)."""

    def check(r: FigureResult) -> Verdict:
        changes = {x: stats.change(r.estimate(x, series), r.estimate(x, baseline)) for x in _at(r, at)}
        listed = ", ".join(f"{x}: {shown_change(c)}" for x, c in changes.items())
        return verdict(
            [stats.inside(c, low, high) for c in changes.values()],
            f"{series} vs {baseline}: {listed} (band {percent(low)} .. {percent(high)})",
        )

    return check


def same(at: Sequence[str] | None = None, series: Sequence[str] | None = None, limit: float = SAME) -> Check:
    """At every x, every series is within `limit` of every other ("almost the same")."""

    def check(r: FigureResult) -> Verdict:
        names = list(series) if series is not None else r.series
        outcomes = []
        worst = (0.0, "")
        for x in _at(r, at):
            for i, a in enumerate(names):
                for b in names[i + 1 :]:
                    c = stats.change(r.estimate(x, a), r.estimate(x, b))
                    outcomes.append(stats.inside(c, -limit, limit))
                    if c.known and abs(c.value) >= worst[0]:
                        worst = (abs(c.value), f"{a} vs {b} at {x}: {shown_change(c)}")
        return verdict(outcomes, f"largest difference {worst[1]} (the same within ±{100 * limit:g} %)")

    return check


def all_of(*checks: Check) -> Check:
    def check(r: FigureResult) -> Verdict:
        verdicts = [c(r) for c in checks]
        return Verdict(combine(v.outcome for v in verdicts), "; ".join(v.sim for v in verdicts))

    return check


def given(premise: Check, claim: Check, what: str) -> Check:
    """A claim that means something only if `premise` holds (e.g. "keeps the benefits of CS"
    needs CS to have some): when the premise does not hold robustly, the claim cannot be
    decided, and says why."""

    def check(r: FigureResult) -> Verdict:
        first = premise(r)
        if first.outcome is not Outcome.HOLDS:
            return Verdict(Outcome.UNDECIDED, f"vacuous: {what} is not established ({first.sim})")
        return claim(r)

    return check
