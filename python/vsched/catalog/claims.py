"""Checks shared by the papers' claims. Each builds a `Claim.check`: a function of a
`FigureResult` that returns a `Verdict` holding our numbers. The plotted value is the figure's
stat over the seeds (a mean time, or a standard deviation); lower is better unless said.

A paper-specific claim can be any function `FigureResult -> Verdict`; these cover the common
shapes: who is best, an ordering, a change against a baseline within a band, a spread.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Callable

from vsched.catalog.model import FigureResult, Verdict

Check = Callable[[FigureResult], Verdict]


def _at(result: FigureResult, at: Sequence[str] | None) -> list[str]:
    return list(at) if at is not None else result.xs


def percent(value: float) -> str:
    return f"{100 * value:+.1f} %"


def mean_and_error(values: Sequence[float]) -> tuple[float, float]:
    """The mean and its standard error."""
    error = statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else 0.0
    return statistics.fmean(values), error


def clearly_below(low: tuple[float, float], high: tuple[float, float]) -> bool:
    """Two (mean, standard error) pairs: the first mean is lower by more than twice the
    standard error of the difference (a smaller gap is a tie)."""
    # typeshed types float ** float as Any (a negative base gives a complex); this base is >= 0.
    error: float = (low[1] ** 2 + high[1] ** 2) ** 0.5
    return high[0] - low[0] > 2 * error


def lowest(series: str, at: Sequence[str] | None = None) -> Check:
    """`series` has the lowest value at every x (of `at`)."""

    def check(r: FigureResult) -> Verdict:
        winners = {x: min(r.series, key=lambda s: r.value(x, s)) for x in _at(r, at)}
        wrong = [f"{x}: {w}" for x, w in winners.items() if w != series]
        holds = not wrong
        return Verdict(
            holds, f"{series} lowest at every point" if holds else "lowest instead: " + ", ".join(wrong)
        )

    return check


def ordered(order: Sequence[str], at: Sequence[str] | None = None, tie: float = 0.0) -> Check:
    """Values increase along `order` (e.g. ["VDS", "Co_scheduling", "Credit"]: VDS lowest) at
    every x; `tie` lets consecutive values be within that fraction of each other."""

    def check(r: FigureResult) -> Verdict:
        xs = _at(r, at)
        bad = []
        for x in xs:
            values = [r.value(x, s) for s in order]
            if any(b < a * (1 - tie) for a, b in zip(values, values[1:])):
                bad.append(f"{x}: " + " / ".join(f"{s} {v:.3g}" for s, v in zip(order, values)))
        return Verdict(
            not bad,
            f"{' < '.join(order)} at all {len(xs)} points"
            if not bad
            else f"order broken at {len(bad)} of {len(xs)}: " + "; ".join(bad),
        )

    return check


def change_within(
    series: str, baseline: str, low: float, high: float, at: Sequence[str] | None = None
) -> Check:
    """`series` / `baseline` − 1 lies in [low, high] at every x (e.g. −0.25 .. −0.10 for a
    10–25 % reduction)."""

    def check(r: FigureResult) -> Verdict:
        changes = {x: r.value(x, series) / r.value(x, baseline) - 1 for x in _at(r, at)}
        holds = all(low <= c <= high for c in changes.values())
        shown = ", ".join(f"{x}: {percent(c)}" for x, c in changes.items())
        return Verdict(holds, f"{series} vs {baseline}: {shown} (band {percent(low)} .. {percent(high)})")

    return check


def spread_below(limit: float, at: Sequence[str] | None = None, series: Sequence[str] | None = None) -> Check:
    """At every x, the largest value is within `limit` (a fraction) of the smallest."""

    def check(r: FigureResult) -> Verdict:
        names = list(series) if series is not None else r.series
        spreads = {
            x: max(r.value(x, s) for s in names) / min(r.value(x, s) for s in names) - 1 for x in _at(r, at)
        }
        worst = max(spreads, key=lambda x: spreads[x])
        return Verdict(
            spreads[worst] <= limit,
            f"largest spread {100 * spreads[worst]:.1f} % at {worst} (limit {100 * limit:g} %)",
        )

    return check


def all_of(*checks: Check) -> Check:
    def check(r: FigureResult) -> Verdict:
        verdicts = [c(r) for c in checks]
        return Verdict(all(v.holds for v in verdicts), "; ".join(v.sim for v in verdicts))

    return check
