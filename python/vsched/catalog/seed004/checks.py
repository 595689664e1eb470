"""Seed 004's metrics and checks, under the catalog's one verdict rule (`stats`): times of
one domain or of the slowest CON domain, launch rates, differences between the two domains of
a dual-CON run, and co-start skews. Values over several x or series are pooled: a series'
seeds at several x form one sample (e.g. both domains of a dual-CON run), and a quotient of
two series is the quotient of the means of their pooled samples.
"""

from __future__ import annotations

from collections.abc import Sequence

from vsched.catalog import claims, stats
from vsched.catalog.model import AtLeast, Case, FigureResult, Row, Verdict, slowest, vm
from vsched.catalog.stats import Estimate, Outcome, combine

POLICIES = {"Credit": "credit", "CS": "cs", "CDS": "cds", "PCS": "pcs", "BCS": "bcs"}
CO_SCHEDULING = ["CS", "CDS", "PCS", "BCS"]
SOLO = "solo"
# Quantiles per VM and run in `costart_skew_us_quantiles`: p0, p5, ..., p100.
QUANTILES = 21
# Fig. 6: "almost all time differences are less than 1 ms": at least 90 % of co-starts.
ALMOST_ALL_QUANTILE = 18  # index of p90
SKEW_LIMIT_US = 1000.0
# "all the time edge differences ... are much shorter than the scheduling period (30 ms)":
# a third of it at most.
MUCH_SHORTER_US = 10_000.0

Band = tuple[float, float]

# ---------------------------------------------------------------------------------------------
# Metrics


def domain_case(x: str, series: str, scenario: str, domain: str | None) -> Case:
    """A bar of `series` at `x`: the scenario under the series' policy; `domain` names the CON
    VM to plot (None: the slowest CON VM, i.e. the job of a solo run or of a cross-domain one).
    The two domains of a dual-CON run are two cases of the same jobs."""
    metric = None if domain is None else vm(domain, "completion_s")
    return Case(x, series, scenario, POLICIES[series], metric=metric)


def con_vms(row: Row) -> list[str]:
    """The CON VMs of a run, in report order."""
    suffix = ".type"
    return [
        key[len("vm.") : -len(suffix)]
        for key, value in row.items()
        if key.startswith("vm.") and key.endswith(suffix) and value == "CON"
    ]


def completion(row: Row) -> float | AtLeast | None:
    """Execution time of the slowest CON VM (a lower bound if one had not finished)."""
    return slowest([vm(name, "completion_s")(row) for name in con_vms(row)])  # type: ignore[misc]


def skew_quantiles(row: Row) -> list[float]:
    """Fig. 6: the co-start skew quantiles (21 values, µs) of every CON VM that had a
    co-start, one VM after the other. A run without co-starts adds no skew (an empty list,
    not a missing value): under `bcs` on Xen 4.0.1 a boost rarely finds a sibling waiting,
    and a few runs have none."""
    lists = [row.get(f"vm.{name}.costart_skew_us_quantiles") for name in con_vms(row)]
    return [float(v) for q in lists if q is not None for v in q]


def con_waiting(row: Row) -> float:
    """The share of the CON domains' vCPU time spent runnable but not running."""
    names = con_vms(row)
    steal = sum(float(row[f"vm.{n}.steal_s"]) for n in names)
    cpu = sum(float(row[f"vm.{n}.cpu_s"]) for n in names)
    return steal / (steal + cpu) if steal + cpu else 0.0


# ---------------------------------------------------------------------------------------------
# Pooled estimates


def pooled(r: FigureResult, xs: Sequence[str], series: str) -> Estimate:
    """The mean of `series`' seeds pooled over `xs` (a lower bound if some did not finish)."""
    values = [v for x in xs for v in r.seeds(x, series)]
    bounds = [b for x in xs for b in r.bounds.get((x, series), [])]
    if any(r.missing.get((x, series)) for x in xs):
        return Estimate.none()
    return stats.mean_estimate(values, bounds)


def mean_over(r: FigureResult, xs: Sequence[str], series: Sequence[str]) -> Estimate:
    """The mean of several series' pooled means."""
    return stats.mean_of([pooled(r, xs, s) for s in series])


def named(series: Sequence[str]) -> str:
    return series[0] if len(series) == 1 else f"mean({', '.join(series)})"


# ---------------------------------------------------------------------------------------------
# Checks


def _relative(
    num: Sequence[str],
    den: Sequence[str],
    xs: Sequence[str],
    band: Band,
    den_xs: Sequence[str] | None,
    as_gain: bool,
) -> claims.Check:
    """mean(`num` over `xs`) / mean(`den` over `den_xs`, default `xs`), minus one if `as_gain`,
    lies in `band`."""

    def check(r: FigureResult) -> Verdict:
        quotient = stats.ratio(mean_over(r, xs, num), mean_over(r, den_xs or xs, den))
        value = Estimate(quotient.value - 1, quotient.error, quotient.bound) if as_gain else quotient
        where = f"{', '.join(xs)} over {', '.join(den_xs)}" if den_xs else ", ".join(xs)
        if as_gain:
            text = f"{named(num)} / {named(den)} − 1"
            shown = (
                f"{claims.shown_change(value)} (band {claims.percent(band[0])} .. {claims.percent(band[1])})"
            )
        else:
            text = f"{named(num)} / {named(den)}"
            shown = f"×{claims.shown(value)} (band ×{band[0]:.2f} .. ×{band[1]:.2f})"
        return Verdict(stats.inside(value, *band), f"{text} ({where}): {shown}")

    return check


def ratio(
    num: Sequence[str], den: Sequence[str], xs: Sequence[str], band: Band, den_xs: Sequence[str] | None = None
) -> claims.Check:
    """mean(`num`) / mean(`den`) lies in `band`: "`num` takes X times `den`'s time"."""
    return _relative(num, den, xs, band, den_xs, as_gain=False)


def gain(
    num: Sequence[str], den: Sequence[str], xs: Sequence[str], band: Band, den_xs: Sequence[str] | None = None
) -> claims.Check:
    """mean(`num`) / mean(`den`) − 1 lies in `band`: "`den` is X % faster than `num`", or
    "`num` is X % slower than `den`"."""
    return _relative(num, den, xs, band, den_xs, as_gain=True)


def faster(
    fast: Sequence[str], slow: Sequence[str], xs: Sequence[str], tie: float | None = None, unit: str = "s"
) -> claims.Check:
    """Each of `fast` has a lower pooled mean over `xs` than each of `slow`, by more than
    `claims.SAME` (the ordering rule). With `tie`, "no slower": each of `fast` is at most that
    fraction above each of `slow`."""

    def check(r: FigureResult) -> Verdict:
        found = {s: pooled(r, xs, s) for s in [*fast, *slow]}
        if tie is None:
            outcomes = [stats.below(found[f], found[s], claims.SAME) for f in fast for s in slow]
        else:
            outcomes = [stats.at_most(found[f], found[s], tie) for f in fast for s in slow]
        shown = ", ".join(f"{s} {claims.shown(e, 4)}" for s, e in found.items())
        return Verdict(combine(outcomes), f"{shown} {unit} (mean ± standard error over {', '.join(xs)})")

    return check


def mean_within(series: Sequence[str], xs: Sequence[str], band: Band, unit: str) -> claims.Check:
    """The mean of `series` over `xs` lies in `band`."""

    def check(r: FigureResult) -> Verdict:
        value = mean_over(r, xs, series)
        where = f"{named(series)} over {', '.join(xs)}"
        shown = f"{where}: {claims.shown(value, 4)} {unit} (band {band[0]:g} .. {band[1]:g})"
        return Verdict(stats.inside(value, *band), shown)

    return check


def in_band(series: Sequence[str], x: str, band: Band, unit: str) -> claims.Check:
    """Each of `series` at `x` lies in `band`."""

    def check(r: FigureResult) -> Verdict:
        values = {s: r.estimate(x, s) for s in series}
        shown = ", ".join(f"{s} {claims.shown(v, 4)}" for s, v in values.items())
        return Verdict(
            combine(stats.inside(v, *band) for v in values.values()),
            f"{x}: {shown} {unit} (band {band[0]:g} .. {band[1]:g})",
        )

    return check


def differences(r: FigureResult, pair: tuple[str, str], series: str) -> list[float]:
    """Per run: |t1 − t2| over the faster of the two domains (seeds paired in order; runs in
    which a domain did not finish are left out)."""
    first, second = r.seeds(pair[0], series), r.seeds(pair[1], series)
    return [abs(a - b) / min(a, b) for a, b in zip(first, second)]


def difference(r: FigureResult, pair: tuple[str, str], series: Sequence[str]) -> Estimate:
    """The mean difference between the two domains, pooled over `series`' runs."""
    return stats.mean_estimate([d for s in series for d in differences(r, pair, s)])


def fairer(fair: Sequence[str], unfair: Sequence[str], pair: tuple[str, str]) -> claims.Check:
    """Each of `fair` has a smaller mean difference between the two domains than each of
    `unfair`, by the ordering rule."""

    def check(r: FigureResult) -> Verdict:
        found = {s: difference(r, pair, [s]) for s in [*fair, *unfair]}
        outcomes = [stats.below(found[f], found[u]) for f in fair for u in unfair]
        shown = ", ".join(
            f"{s} {100 * e.value:.2f} ± {100 * e.error:.2f} %" if e.known else f"{s} no value"
            for s, e in found.items()
        )
        return Verdict(combine(outcomes), f"difference between the domains (mean ± standard error): {shown}")

    return check


def difference_within(series: Sequence[str], pair: tuple[str, str], band: Band) -> claims.Check:
    def check(r: FigureResult) -> Verdict:
        d = difference(r, pair, series)
        per = ", ".join(f"{s} {100 * difference(r, pair, [s]).value:.1f} %" for s in series)
        return Verdict(
            stats.inside(d, *band),
            f"mean difference {claims.shown_change(d).lstrip('+')} "
            f"({per}; band {100 * band[0]:.1f} .. {100 * band[1]:.1f} %)",
        )

    return check


def quantile_chunks(r: FigureResult, x: str, series: str) -> list[list[float]]:
    """The quantile lists of each VM and run, which `skew_quantiles` laid end to end."""
    samples = r.seeds(x, series)
    return [samples[i : i + QUANTILES] for i in range(0, len(samples), QUANTILES)]


def skew_below(index: int, limit_us: float, label: str, worst: bool) -> claims.Check:
    """At every x, the skew quantile `index` is at most `limit_us`: its mean over runs and
    domains by the ordering rule, or, if `worst`, its largest value (a maximum has no error:
    it is compared as it is)."""

    def check(r: FigureResult) -> Verdict:
        outcomes = []
        values = {}
        for x in r.xs:
            picked = [c[index] for c in quantile_chunks(r, x, r.series[0]) if len(c) == QUANTILES]
            if not picked:
                outcomes.append(Outcome.UNDECIDED)
                values[x] = "no co-starts"
                continue
            if worst:
                value = max(picked)
                outcomes.append(Outcome.HOLDS if value <= limit_us else Outcome.FAILS)
                values[x] = f"{value:.0f} µs"
            else:
                estimate = stats.mean_estimate(picked)
                outcomes.append(stats.positive(stats.difference(Estimate(limit_us), estimate)))
                values[x] = f"{claims.shown(estimate)} µs"
        shown = ", ".join(f"{x} {v}" for x, v in values.items())
        return Verdict(combine(outcomes), f"{label}: {shown} (limit {limit_us:g} µs)")

    return check
