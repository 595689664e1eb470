"""Seed 004: Yu et al., hybrid co-scheduling optimizations, partial (PCS) and boost (BCS)
co-scheduling, §II-B Fig. 3 and §VI Figs. 4–7.

The paper's testbed: a quad-core Core i5 760 (2.8 GHz), Xen 4.0.1 with the Credit scheduler,
Domain-0 and four guest domains of 2 vCPUs each. In solo-CON one guest is a concurrent (CON)
domain running the benchmark and three stay idle as HIT; in dual-CON two CON domains run it at
once and two stay idle. Benchmarks: SPLASH-2 LU (n = 4096, B = 16, 2 threads) and NPB BT, CG,
EP, FT, LU, MG (MPI: 2 processes per domain; BT 1 process in solo-CON and one 4-process job
over both domains in dual-CON). Policies: Credit, hybrid co-scheduling (CS), co-descheduling
(CDS), PCS and BCS, all built on Credit (`credit`, `cs`, `cds`, `pcs`, `bcs`).

Our model (each scenario's header has the details): 4 pCPUs; Xen's default Domain-0 (4
vCPUs, one per pCPU, idle but for its kernel's timer wake-ups); idle guests as `idle` VMs; SPLASH-2 LU as
`bsp` (512 barrier phases of 39 ms, `runtime = "pthreads"`: SPLASH-2's POSIX port blocks); NPB
CG, EP and LU as the MPI models `npb-cg`, `npb-ep`, `npb-lu` at their classes; BT as `npb-lu`
with BT's shape (200 steps, 13 exchanges per step); FT and MG as `bsp` with their phase counts
(the paper gives no FT or MG time: their lengths are our estimates). Every NPB program runs on
`runtime = "openmpi"` (the paper names no MPI library; MPICH2 would poll alike). Each
benchmark's undisturbed run takes the paper's co-scheduled solo-CON time. Not modelled: the
disk that makes FT and MG "I/O-intensive" in dual-CON.

The paper does not say how often it repeated a run; we use 20 seeds. Execution times are
per domain, as the paper gives them ("dual lu1" and "dual lu2" are the two CON domains of
one dual-CON run); "the execution time difference between the two concurrent domains" is
computed per run, as |t1 − t2| over the faster one (the paper's 7.52 s = 16.06 % of 46.82 s).
"X % faster than Credit" is Credit's time over the scheme's, minus one (the paper's BT:
197.67 s / 180.7 s − 1 = 9.4 %).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TypedDict

from vsched.catalog import claims
from vsched.catalog.model import Case, Claim, Figure, FigureResult, Paper, Row, Verdict, Why, host, vm

POLICIES = {"Credit": "credit", "CS": "cs", "CDS": "cds", "PCS": "pcs", "BCS": "bcs"}
CO_SCHEDULING = ["CS", "CDS", "PCS", "BCS"]
SOLO = "solo"
# The paper's "about X": a single measurement per bar, rounded in the text. We accept X
# within a quarter of its value (e.g. "about 26 %" is 19.5–32.5 %): the paper's own
# co-scheduled solo LU times spread 7 % around their mean, and its dual-CON CS/CDS times
# differ 16–39 % between two domains of one run, so a quarter is loose enough for the
# paper's own noise and still tells "about 26 %" from nothing or from double. The band is
# around the number as stated: "about twice" is a ratio of 1.5–2.5, "almost 1X longer" an
# excess of 0.75–1.25, "8 % faster" a gain of 6–10 %.
ABOUT = 0.25
# "PCS and BCS keep the benefits brought by CS" (Fig. 7 caption): no slower than CS, within
# the 7 % spread of the paper's own co-scheduled solo LU times (19.93–21.41 s); we take 5 %.
KEEP = 0.05
# "Faster" elsewhere means faster by more than twice the standard error of the difference
# and by at least 1 %: more seeds would make any difference significant, and every gain the
# paper calls "faster" or "better" without a number is 8 % or more where it gives one.
MIN_GAIN = 0.01
# Quantiles per VM and run in `costart_skew_us_quantiles`: p0, p5, ..., p100.
QUANTILES = 21
# Fig. 6: "almost all time differences are less than 1 ms": at least 90 % of co-starts.
ALMOST_ALL_QUANTILE = 18  # index of p90
SKEW_LIMIT_US = 1000.0
# "all the time edge differences ... are much shorter than the scheduling period (30 ms)":
# a third of it at most.
MUCH_SHORTER_US = 10_000.0


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


def completion(row: Row) -> float | None:
    """Execution time of the slowest CON VM (None if unfinished)."""
    values = [row.get(f"vm.{name}.completion_s") for name in con_vms(row)]
    finished = [v for v in values if v is not None]
    if not values or len(finished) < len(values):
        return None
    return float(max(finished))


def skew_quantiles(row: Row) -> list[float]:
    """Fig. 6: the co-start skew quantiles (21 values, µs) of every CON VM that had a
    co-start, one VM after the other. A run without co-starts adds no skew (an empty list,
    not a missing value): under `bcs` on Xen 4.0.1 a boost rarely finds a sibling waiting,
    and a few runs have none."""
    lists = [row.get(f"vm.{name}.costart_skew_us_quantiles") for name in con_vms(row)]
    return [float(v) for q in lists if q is not None for v in q]


# ---------------------------------------------------------------------------------------------
# Checks specific to this paper


Band = tuple[float, float]


def about(value: float) -> Band:
    return value * (1 - ABOUT), value * (1 + ABOUT)


def mean_of(r: FigureResult, xs: Sequence[str], series: Sequence[str]) -> float:
    return statistics.fmean(r.value(x, s) for x in xs for s in series)


def named(series: Sequence[str]) -> str:
    return series[0] if len(series) == 1 else f"mean({', '.join(series)})"


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
        value = mean_of(r, xs, num) / mean_of(r, den_xs or xs, den) - (1 if as_gain else 0)
        where = f"{', '.join(xs)} over {', '.join(den_xs)}" if den_xs else ", ".join(xs)
        if as_gain:
            quotient = f"{named(num)} / {named(den)} − 1"
            shown = f"{claims.percent(value)} (band {claims.percent(band[0])} .. {claims.percent(band[1])})"
        else:
            quotient = f"{named(num)} / {named(den)}"
            shown = f"×{value:.2f} (band ×{band[0]:.2f} .. ×{band[1]:.2f})"
        return Verdict(band[0] <= value <= band[1], f"{quotient} ({where}): {shown}")

    return check


def ratio(
    num: Sequence[str],
    den: Sequence[str],
    xs: Sequence[str],
    band: Band,
    den_xs: Sequence[str] | None = None,
) -> claims.Check:
    """mean(`num`) / mean(`den`) lies in `band`: "`num` takes X times `den`'s time"."""
    return _relative(num, den, xs, band, den_xs, as_gain=False)


def gain(
    num: Sequence[str],
    den: Sequence[str],
    xs: Sequence[str],
    band: Band,
    den_xs: Sequence[str] | None = None,
) -> claims.Check:
    """mean(`num`) / mean(`den`) − 1 lies in `band`: "`den` is X % faster than `num`", or
    "`num` is X % slower than `den`"."""
    return _relative(num, den, xs, band, den_xs, as_gain=True)


def pooled(r: FigureResult, xs: Sequence[str], series: str) -> list[float]:
    return [v for x in xs for v in r.seeds(x, series)]


def faster(
    fast: Sequence[str], slow: Sequence[str], xs: Sequence[str], tie: float | None = None, unit: str = "s"
) -> claims.Check:
    """Each of `fast` has a lower mean over `xs` than each of `slow`, by at least `MIN_GAIN`
    and by more than twice the standard error of the difference (a smaller gap is a tie, not
    "faster"). With `tie`, "no slower": each of `fast` is at most that fraction above each
    of `slow`."""

    def check(r: FigureResult) -> Verdict:
        stats = {s: claims.mean_and_error(pooled(r, xs, s)) for s in [*fast, *slow]}

        def ahead(f: str, s: str) -> bool:
            if tie is not None:
                return stats[f][0] <= stats[s][0] * (1 + tie)
            return stats[s][0] - stats[f][0] >= MIN_GAIN * stats[s][0] and claims.clearly_below(
                stats[f], stats[s]
            )

        holds = all(ahead(f, s) for f in fast for s in slow)
        shown = ", ".join(f"{s} {mean:.4g} ± {error:.2g}" for s, (mean, error) in stats.items())
        return Verdict(holds, f"{shown} {unit} (mean ± standard error over {', '.join(xs)})")

    return check


def mean_within(series: Sequence[str], xs: Sequence[str], band: Band, unit: str) -> claims.Check:
    """The mean of `series` over `xs` lies in `band`."""

    def check(r: FigureResult) -> Verdict:
        value = mean_of(r, xs, series)
        shown = f"{named(series)} over {', '.join(xs)}: {value:.4g} {unit} (band {band[0]:g} .. {band[1]:g})"
        return Verdict(band[0] <= value <= band[1], shown)

    return check


def in_band(series: Sequence[str], x: str, low: float, high: float, unit: str) -> claims.Check:
    def check(r: FigureResult) -> Verdict:
        values = {s: r.value(x, s) for s in series}
        holds = all(low <= v <= high for v in values.values())
        shown = ", ".join(f"{s} {v:.4g}" for s, v in values.items())
        return Verdict(holds, f"{x}: {shown} {unit} (band {low:g} .. {high:g})")

    return check


def differences(r: FigureResult, pair: tuple[str, str], series: str) -> list[float]:
    """Per run: |t1 − t2| over the faster of the two domains (seeds paired in order)."""
    first, second = r.seeds(pair[0], series), r.seeds(pair[1], series)
    return [abs(a - b) / min(a, b) for a, b in zip(first, second)]


def mean_difference(r: FigureResult, pair: tuple[str, str], series: Sequence[str]) -> float:
    return statistics.fmean(d for s in series for d in differences(r, pair, s))


def fairer(fair: Sequence[str], unfair: Sequence[str], pair: tuple[str, str]) -> claims.Check:
    """Each of `fair` has a smaller mean difference between the two domains than each of
    `unfair`, by more than twice the standard error of the gap (as `faster`)."""

    def check(r: FigureResult) -> Verdict:
        stats = {s: claims.mean_and_error(differences(r, pair, s)) for s in [*fair, *unfair]}
        holds = all(claims.clearly_below(stats[f], stats[u]) for f in fair for u in unfair)
        shown = ", ".join(f"{s} {100 * mean:.2f} ± {100 * error:.2f} %" for s, (mean, error) in stats.items())
        return Verdict(holds, f"difference between the domains (mean ± standard error): {shown}")

    return check


def difference_within(series: Sequence[str], pair: tuple[str, str], band: Band) -> claims.Check:
    def check(r: FigureResult) -> Verdict:
        d = mean_difference(r, pair, series)
        per = ", ".join(f"{s} {100 * mean_difference(r, pair, [s]):.1f} %" for s in series)
        return Verdict(
            band[0] <= d <= band[1],
            f"mean difference {100 * d:.1f} % ({per}; band {100 * band[0]:.1f} .. {100 * band[1]:.1f} %)",
        )

    return check


def quantile_chunks(r: FigureResult, x: str, series: str) -> list[list[float]]:
    """The quantile lists of each VM and run, which `skew_quantiles` laid end to end."""
    samples = r.seeds(x, series)
    return [samples[i : i + QUANTILES] for i in range(0, len(samples), QUANTILES)]


def skew_below(index: int, limit_us: float, label: str, worst: bool) -> claims.Check:
    """At every x, the skew quantile `index` (mean over runs and domains, or the largest if
    `worst`) is at most `limit_us`."""

    def check(r: FigureResult) -> Verdict:
        values = {}
        for x in r.xs:
            chunks = quantile_chunks(r, x, r.series[0])
            picked = [c[index] for c in chunks if len(c) == QUANTILES]
            values[x] = (max(picked) if worst else statistics.fmean(picked)) if picked else float("nan")
        holds = all(v <= limit_us for v in values.values())
        shown = ", ".join(f"{x} {v:.0f} µs" for x, v in values.items())
        return Verdict(holds, f"{label}: {shown} (limit {limit_us:g} µs)")

    return check


# ---------------------------------------------------------------------------------------------
# Why the claims do not hold (or hold only narrowly)

# solo-CON: the co-scheduling schemes against Credit.
SOLO_NOTHING_CONTENDS = Why(
    "leaves-out",
    "§VI-A's solo-CON host runs the benchmark's 2-vCPU CON domain beside Domain-0 and three idle "
    "guests on 4 pCPUs, and the paper does not say what load Domain-0 or the idle guests carried. "
    "As described, nothing contends: in vsched (an idle Domain-0 and idle guests, whose kernels "
    "wake about 10 times a second per vCPU) a vCPU of the CON domain almost never waits for a "
    "pCPU, so every co-scheduling scheme ties "
    "Credit except CDS, whose descheduling of siblings slows it (SPLASH-2 LU: 26.2 s against "
    "21.1 s). The paper's own solo BT runs a single process, with nothing to co-schedule, and still "
    "gains 9.4 % (197.67 s to about 180 s): its speed-ups come from something its description of "
    "the host leaves out.",
)
# dual-CON: PCS and BCS against Credit.
DUAL_NOTHING_CONTENDS = Why(
    "leaves-out",
    "In dual-CON the two CON domains' 4 vCPUs fill the 4 pCPUs, beside Domain-0 and two idle "
    "guests whose load the paper does not state. In vsched those are nearly silent (their kernels "
    "wake about 10 times a second per vCPU), so under Credit a rank's vCPU is seldom preempted and PCS and "
    "BCS, which avoid CS's contention, tie Credit within about 1 % instead of beating it by the "
    "paper's 8–23 %: the gain needs a background load that preempts ranks under Credit and that "
    "co-scheduling keeps together.",
)
# dual-CON: CS and CDS against Credit.
CS_OPERATION_END = Why(
    "leaves-out",
    "Neither seed 004 nor the CS it takes from Weng et al. (seed 003 §4.3) says when a "
    "co-scheduling operation ends, i.e. when the other CON domain may launch one. vsched ends it "
    "when every signalled pCPU has rescheduled, so in dual-CON (SPLASH-2 LU, Fig. 5) the two "
    "domains launch about 1,100 times a second (the paper: 150–400 for CS), and CS and CDS take "
    "about 2.5 × Credit's time on NPB CG and LU, whose MPI ranks poll, against the paper's "
    "1.5–1.9 ×.",
)
# CDS against CS: unfairness and frequency.
CDS_RULE = Why(
    "leaves-out",
    'Seed 004 takes co-descheduling from VMware (§VII: the concurrent vCPUs "need to not only be '
    'scheduled concurrently but also be descheduled concurrently") without saying when its CDS '
    "deschedules the siblings: when one is preempted, when one blocks, or when their progress "
    "drifts apart. vsched co-deschedules on preemption only, so its CDS launches about 80 times a "
    'second in solo-CON (the paper: 300–1000, "because of the stricter rule in CDS") and is no '
    "more unfair than CS in dual-CON.",
)
# Fig. 5: frequencies.
FREQUENCY_COUNT = Why(
    "leaves-out",
    "The paper does not define what Fig. 5 counts as one co-scheduling: a launch by one pCPU, each "
    "signal it raises, or for BCS every boosting pass, whether or not it raised a waiting sibling; "
    "nor when an operation ends. vsched counts launches per simulated second (a BCS pass only if it "
    "boosted a sibling) and ends a CS operation when every signalled pCPU has rescheduled: BCS then "
    "launches about 42 times a second in solo-CON against CS's 63, and CS and PCS about 1,100 and "
    "660 times in dual-CON against the paper's 150–400 and 150–200.",
)
# Differences between the two domains of one run.
SINGLE_RUNS = Why(
    "leaves-out",
    "The paper gives one execution time per domain and scheme and does not say how many runs each "
    "is, so its differences between the two domains (16.06 % and 39.08 % for CS and CDS, 12.14 % "
    "and 2.99 % for PCS and BCS) read as single draws. That difference is itself random: over "
    "vsched's 20 runs it averages 13 % for CS and CDS with a standard deviation of 9–12 % from "
    "run to run, and stays under 0.5 % for PCS and BCS; one run decides neither a 27 % average nor "
    "whether BCS is fairer than PCS.",
)
# dual-CON against solo-CON under PCS and BCS (LU).
CO_RUNNERS = Why(
    "lacks-mechanism",
    "Contention between co-running domains for the shared L3 cache and memory bandwidth. §VI-C "
    "puts PCS's and BCS's dual-CON slowdown down to \"more virtualization cost\" (about 14 % by its "
    "text, 19 % by its own means: 24.29 s against 20.41 s); on the Core i5 760 two LU instances "
    "share one 8 MB L3 and one memory controller. vsched's co-runners only evict each other's "
    "cache lines when they switch (and `bsp` declares an 8 KiB working set, where LU's 4096 × 4096 "
    "matrix is 128 MiB), so PCS and BCS run dual-CON within about 2 % of solo-CON.",
)
# BT in dual-CON: one 4-rank job over the two domains.
BT_MESSAGE_PATH = Why(
    "leaves-out",
    "The paper does not say how dual BT's four ranks in two domains exchange their messages "
    "(presumably MPI over the virtual network through Domain-0's backend) nor what that path "
    "costs. It decides dual BT: by the paper's numbers four ranks take 106.13 s under Credit where "
    "one takes 197.67 s (about 50 s if they only computed), so half the run is communication and "
    "waiting, on which PCS runs 25 % faster and BCS three times slower. vsched passes each message "
    "through a 4-vCPU Domain-0 at its modelled cost: Credit takes 57 s, PCS and BCS tie it, and "
    "CS and CDS take about 2.7 × as long.",
)
# PCS and BCS against CS and CDS in dual-CON: a ratio of the two effects above.
CS_OVER_PCS = Why(
    "leaves-out",
    "This ratio compounds two things the paper leaves out: what CS and CDS cost in dual-CON, set "
    "by when a co-scheduling operation ends (not stated; vsched's CS and CDS take 1.8–2.6 × "
    "Credit's time), and how much PCS and BCS gain over Credit, which needs a background load "
    "the paper does not describe (vsched's tie Credit). Where CS costs more than the paper's, the "
    "ratio overshoots (CG, LU); where it costs about the same, the missing gain over Credit leaves "
    "it short (EP).",
)
# FT and MG (Figs. 7(e), 7(f)).
PAGING = Why(
    "lacks-mechanism",
    'Guest memory and paging to a shared disk. §VI-C says FT and MG "have more disk accesses, so '
    'they are I/O-intensive" and that "the limited I/O access channel" makes dual-CON 2.5X and '
    "4X slower than solo-CON. NPB's FT and MG read and write no files, but their arrays (128 MiB "
    "each: three of FT class A's 256×256×128 complex grid, three of MG class B's 256³ grid with "
    "its coarser levels) come to about 0.4 GB against a domain's 394 MB, so the disk accesses are "
    "most likely paging. vsched models no guest memory (its disk has no cache or request merging, "
    "and these scenarios do no I/O), so dual-CON costs FT and MG only the scheduling (×1.03 under "
    "Credit), and the disk contention under which the paper's PCS and BCS gain never arises.",
)


# ---------------------------------------------------------------------------------------------
# Figures 3 and 4: SPLASH-2 LU

LU_SOLO = "seed004/lu-solo-con.toml"
LU_DUAL = "seed004/lu-dual-con.toml"
LU_XS = [SOLO, "dual lu1", "dual lu2"]
LU_DUAL_XS = LU_XS[1:]
LU_PAIR = ("dual lu1", "dual lu2")


def lu_cases(series: Sequence[str]) -> tuple[Case, ...]:
    return tuple(
        case
        for s in series
        for case in (
            domain_case(SOLO, s, LU_SOLO, None),
            domain_case("dual lu1", s, LU_DUAL, "lu1"),
            domain_case("dual lu2", s, LU_DUAL, "lu2"),
        )
    )


# §VI-C: LU's execution times, solo (one value) and dual-CON (domain 1, domain 2).
LU_PAPER = {
    (SOLO, "Credit"): 26.47,
    (SOLO, "CS"): 21.41,
    (SOLO, "CDS"): 21.17,
    (SOLO, "PCS"): 19.93,
    (SOLO, "BCS"): 20.88,
    ("dual lu1", "CS"): 54.34,
    ("dual lu2", "CS"): 46.82,
    ("dual lu1", "CDS"): 45.91,
    ("dual lu2", "CDS"): 63.85,
    ("dual lu1", "PCS"): 23.13,
    ("dual lu2", "PCS"): 25.94,
    ("dual lu1", "BCS"): 24.39,
    ("dual lu2", "BCS"): 23.68,
}
LU_NOTES = (
    "SPLASH-2 LU (n = 4096, B = 16) as `bsp`: 512 blocking barrier phases of 39 ms "
    '(lu-solo-con.toml, lu-dual-con.toml). "dual lu1" and "dual lu2" are the two CON '
    "domains of each dual-CON run. The paper gives no Credit time for dual-CON, only that PCS "
    "and BCS are about 8 % faster. Quick: 5 seeds instead of 20, same work."
)

FIG3 = Figure(
    id="fig3",
    label="Fig. 3",
    title="SPLASH-2 LU under co-scheduling (CS) and co-descheduling (CDS)",
    xlabel="configuration (domain)",
    ylabel="execution time (s)",
    cases=lu_cases(["Credit", "CS", "CDS"]),
    metric=completion,
    paper_values={k: v for k, v in LU_PAPER.items() if k[1] in ("Credit", "CS", "CDS")},
    claims=(
        Claim(
            "solo-CON: CS and CDS speed LU up by about 26 % on average over Credit",
            gain(["Credit"], ["CS", "CDS"], [SOLO], about(0.26)),
            "26 % (26.47 s against 21.41 s and 21.17 s); caption: about 25 %",
            if_fails=SOLO_NOTHING_CONTENDS,
        ),
        Claim(
            "dual-CON: the execution time is about 50 s in CS and CDS",
            mean_within(["CS", "CDS"], LU_DUAL_XS, about(50.0), "s"),
            "54.34 s and 46.82 s (CS), 45.91 s and 63.85 s (CDS)",
            if_fails=CS_OPERATION_END,
        ),
        Claim(
            "dual-CON: CS and CDS take about twice Credit's time (performance degrades about 50 %)",
            ratio(["CS", "CDS"], ["Credit"], LU_DUAL_XS, about(2.0)),
            "about twice; caption: about 50 % lower performance",
            if_fails=CS_OPERATION_END,
        ),
        Claim(
            "dual-CON: the execution time difference between the two domains is about 27 % on average "
            "in CS and CDS",
            difference_within(["CS", "CDS"], LU_PAIR, about(0.27)),
            "27 % on average (16.06 % CS, 39.08 % CDS in §VI-C); caption: approximately 27 %",
            if_fails=SINGLE_RUNS,
        ),
    ),
    notes=LU_NOTES,
)
FIG4 = Figure(
    id="fig4",
    label="Fig. 4",
    title="SPLASH-2 LU execution time, every policy",
    xlabel="configuration (domain)",
    ylabel="execution time (s)",
    cases=lu_cases(list(POLICIES)),
    metric=completion,
    paper_values=LU_PAPER,
    claims=(
        Claim(
            "solo-CON: CS, CDS, PCS and BCS are all faster than Credit",
            faster(CO_SCHEDULING, ["Credit"], [SOLO]),
            "26.47 s (Credit) → 21.41, 21.17, 19.93, 20.88 s",
            if_fails=SOLO_NOTHING_CONTENDS,
        ),
        Claim(
            "solo-CON: the co-scheduling schemes are about 26 % faster than Credit on average",
            gain(["Credit"], CO_SCHEDULING, [SOLO], about(0.26)),
            "about 26 %",
            if_fails=SOLO_NOTHING_CONTENDS,
        ),
        Claim(
            "dual-CON: CS and CDS take almost 1X longer than Credit",
            gain(["CS", "CDS"], ["Credit"], LU_DUAL_XS, about(1.0)),
            "54.34, 46.82, 45.91, 63.85 s: almost 1X longer",
            if_fails=CS_OPERATION_END,
        ),
        Claim(
            "dual-CON: PCS and BCS are faster than Credit",
            faster(["PCS", "BCS"], ["Credit"], LU_DUAL_XS),
            "23.13, 25.94 s (PCS), 24.39, 23.68 s (BCS)",
            if_fails=DUAL_NOTHING_CONTENDS,
        ),
        Claim(
            "dual-CON: PCS and BCS are about 8 % faster than Credit",
            gain(["Credit"], ["PCS", "BCS"], LU_DUAL_XS, about(0.08)),
            "about 8 %",
            if_fails=DUAL_NOTHING_CONTENDS,
        ),
        Claim(
            "dual-CON: PCS and BCS are about 1X faster than CS and CDS on average",
            gain(["CS", "CDS"], ["PCS", "BCS"], LU_DUAL_XS, about(1.0)),
            "about 1X",
            if_fails=CS_OVER_PCS,
        ),
        Claim(
            "dual-CON: PCS and BCS are only about 14 % slower than in solo-CON",
            gain(["PCS", "BCS"], ["PCS", "BCS"], LU_DUAL_XS, about(0.14), den_xs=[SOLO]),
            "about 14 % (its own means give 19 %: 24.29 s against 20.41 s)",
            if_fails=CO_RUNNERS,
        ),
        Claim(
            "dual-CON: CS and CDS are unfair, especially CDS",
            fairer(["CS"], ["CDS"], LU_PAIR),
            "differences 7.52 s (16.06 %) CS, 17.94 s (39.08 %) CDS",
            if_fails=CDS_RULE,
        ),
        Claim(
            "dual-CON: PCS and BCS are fairer than CS and CDS, especially BCS",
            claims.all_of(fairer(["PCS", "BCS"], ["CS", "CDS"], LU_PAIR), fairer(["BCS"], ["PCS"], LU_PAIR)),
            "differences 2.81 s (12.14 %) PCS, 0.71 s (2.99 %) BCS; 16.06 % CS, 39.08 % CDS",
            if_fails=SINGLE_RUNS,
        ),
    ),
    notes=LU_NOTES,
)


# ---------------------------------------------------------------------------------------------
# Figure 5: co-scheduling frequency (launches per second), LU

FREQ_CASES = tuple(
    Case(x, s, scenario, POLICIES[s])
    for x, scenario in ((SOLO, LU_SOLO), ("dual", LU_DUAL))
    for s in CO_SCHEDULING
)
FIG5 = Figure(
    id="fig5",
    label="Fig. 5",
    title="Co-scheduling frequency, SPLASH-2 LU",
    xlabel="configuration",
    ylabel="co-scheduling launches per second",
    cases=FREQ_CASES,
    metric=host("co_launches_per_s"),
    # The paper gives ranges; these are their midpoints (the claims check the ranges).
    paper_values={
        (SOLO, "CS"): 65.0,
        (SOLO, "PCS"): 65.0,
        (SOLO, "BCS"): 65.0,
        (SOLO, "CDS"): 650.0,
        ("dual", "CS"): 275.0,
        ("dual", "CDS"): 1600.0,
        ("dual", "PCS"): 175.0,
        ("dual", "BCS"): 140.0,
    },
    claims=(
        Claim(
            "solo-CON: CS, PCS and BCS launch at nearly the same frequency, approximately 60–70 /s",
            in_band(["CS", "PCS", "BCS"], SOLO, 60 * (1 - ABOUT), 70 * (1 + ABOUT), "/s"),
            "60–70 /s",
            if_fails=FREQUENCY_COUNT,
        ),
        Claim(
            "solo-CON: CDS's frequency is much higher than the others', about 300–1000 /s",
            claims.all_of(
                in_band(["CDS"], SOLO, 300 * (1 - ABOUT), 1000 * (1 + ABOUT), "/s"),
                claims.ordered(["CS", "CDS"], [SOLO]),
                claims.ordered(["PCS", "CDS"], [SOLO]),
                claims.ordered(["BCS", "CDS"], [SOLO]),
            ),
            "300–1000 /s",
            if_fails=CDS_RULE,
        ),
        Claim(
            "dual-CON: CS launches about 150–400 /s and CDS about 200–3000 /s",
            claims.all_of(
                in_band(["CS"], "dual", 150 * (1 - ABOUT), 400 * (1 + ABOUT), "/s"),
                in_band(["CDS"], "dual", 200 * (1 - ABOUT), 3000 * (1 + ABOUT), "/s"),
            ),
            "150–400 /s (CS), 200–3000 /s (CDS)",
            if_fails=FREQUENCY_COUNT,
        ),
        Claim(
            "dual-CON: PCS launches about 150–200 /s and BCS about 100–180 /s",
            claims.all_of(
                in_band(["PCS"], "dual", 150 * (1 - ABOUT), 200 * (1 + ABOUT), "/s"),
                in_band(["BCS"], "dual", 100 * (1 - ABOUT), 180 * (1 + ABOUT), "/s"),
            ),
            "150–200 /s (PCS), 100–180 /s (BCS)",
            if_fails=FREQUENCY_COUNT,
        ),
        Claim(
            "dual-CON: PCS and BCS launch less often than CS and CDS",
            faster(["PCS", "BCS"], ["CS", "CDS"], ["dual"], unit="/s"),
            "150–200 and 100–180 /s against 150–400 and 200–3000 /s",
            if_fails=FREQUENCY_COUNT,
        ),
    ),
    notes=(
        "`host.co_launches_per_s`: co-scheduling operations per simulated second, the mean over "
        "the run (the paper plots it over time; we do not). A BCS boosting pass counts as a "
        "launch (docs/policies.md). The paper's values are ranges; `paper_values` holds their "
        "midpoints. Quick: 5 seeds, same work."
    ),
)


# ---------------------------------------------------------------------------------------------
# Figure 6: BCS's co-start skew (CDF)

FIG6 = Figure(
    id="fig6",
    label="Fig. 6",
    title="BCS: co-start skew of a CON domain's vCPUs, SPLASH-2 LU (CDF)",
    # A CDF's horizontal axis is the value; the cases (configurations) are its curves.
    xlabel="scheduling time edge difference between the vCPUs (µs)",
    ylabel="cumulative fraction",
    cases=(Case("dual", "BCS", LU_DUAL, "bcs"),),
    metric=skew_quantiles,
    kind="cdf",
    claims=(
        Claim(
            "almost all time differences are less than 1 ms (90th percentile below 1 ms)",
            skew_below(ALMOST_ALL_QUANTILE, SKEW_LIMIT_US, "p90 of the skew", worst=False),
            "almost all below 1 ms",
        ),
        Claim(
            "all time differences are much shorter than the 30 ms scheduling period (at most 10 ms)",
            skew_below(20, MUCH_SHORTER_US, "largest skew", worst=True),
            "all much shorter than 30 ms",
        ),
    ),
    notes=(
        "`costart_skew_us_quantiles` of each CON VM (21 quantiles, p0..p100), per co-scheduling "
        "operation: from a BCS launch to the switch-in of each sibling that was waiting in a run "
        "queue when it was boosted; siblings already running are not counted "
        "(crates/vsched-model/src/metrics.rs). The paper does not say which configuration Fig. 6 "
        "shows; measured per operation, solo-CON has nothing to show (its two vCPUs never wait "
        "for a pCPU, so no launch finds a sibling waiting), so the figure is dual-CON, pooling the "
        "domains that had co-starts in each run. Quick: 5 seeds, same work."
    ),
)


# ---------------------------------------------------------------------------------------------
# Figure 7: NPB


def npb_cases(bench: str) -> tuple[Case, ...]:
    solo, dual = f"seed004/npb-{bench}-solo-con.toml", f"seed004/npb-{bench}-dual-con.toml"
    cases = []
    for s in POLICIES:
        cases.append(domain_case(SOLO, s, solo, None))
        if bench == "bt":
            cases.append(domain_case("dual", s, dual, None))  # one job over both domains
        else:
            cases.extend(domain_case(f"dual {bench}{i}", s, dual, f"{bench}{i}") for i in (1, 2))
    return tuple(cases)


def npb_dual_xs(bench: str) -> list[str]:
    return ["dual"] if bench == "bt" else [f"dual {bench}1", f"dual {bench}2"]


def caption_claims(bench: str) -> list[Claim]:
    """Fig. 7's caption, for every benchmark."""
    dual = npb_dual_xs(bench)
    dual_why = BT_MESSAGE_PATH if bench == "bt" else PAGING if bench in IO_BOUND else DUAL_NOTHING_CONTENDS
    found = [
        Claim(
            "solo-CON: PCS and BCS keep the benefits brought by CS (no slower than CS)",
            faster(["PCS", "BCS"], ["CS"], [SOLO], tie=KEEP),
            "caption",
        ),
        Claim(
            "dual-CON: PCS speeds the system up and avoids the degradation of CS and CDS",
            faster(["PCS"], ["Credit", "CS", "CDS"], dual),
            "caption",
            if_fails=dual_why,
        ),
    ]
    if bench != "bt":
        found.append(
            Claim(
                "dual-CON: BCS too is faster than Credit, CS and CDS (all benchmarks but BT)",
                faster(["BCS"], ["Credit", "CS", "CDS"], dual),
                "caption",
                if_fails=dual_why,
            )
        )
    return found


def fairness_claims(bench: str, paper: str) -> list[Claim]:
    pair = (f"dual {bench}1", f"dual {bench}2")
    return [
        Claim(
            "dual-CON: PCS and BCS are fairer than CS and CDS (smaller difference between the domains)",
            fairer(["PCS", "BCS"], ["CS", "CDS"], pair),
            paper,
        )
    ]


def bt_claims() -> list[Claim]:
    return [
        Claim(
            "solo-CON: the co-scheduling schemes speed BT up about 9.4 % (197.67 s → about 180 s)",
            gain(["Credit"], CO_SCHEDULING, [SOLO], about(0.094)),
            "9.4 %",
            if_fails=SOLO_NOTHING_CONTENDS,
        ),
        Claim(
            "dual-CON: CS and CDS take about 375 s, 3.5X Credit's 106.13 s",
            ratio(["CS", "CDS"], ["Credit"], ["dual"], about(3.5)),
            "about 375 s against 106.13 s: 3.5X",
            if_fails=BT_MESSAGE_PATH,
        ),
        Claim(
            "dual-CON: PCS (84.90 s) is 25 % faster than Credit",
            gain(["Credit"], ["PCS"], ["dual"], about(0.25)),
            "25 %",
            if_fails=BT_MESSAGE_PATH,
        ),
        Claim(
            "dual-CON: PCS is 3.7X faster than CS and CDS on average",
            gain(["CS", "CDS"], ["PCS"], ["dual"], about(3.7)),
            "3.7X",
            if_fails=BT_MESSAGE_PATH,
        ),
        Claim(
            "dual-CON: BCS (335.11 s) is worse than PCS but still better than CS and CDS",
            claims.all_of(faster(["PCS"], ["BCS"], ["dual"]), faster(["BCS"], ["CS", "CDS"], ["dual"])),
            "84.90 s (PCS) < 335.11 s (BCS) < about 375 s (CS, CDS)",
            if_fails=BT_MESSAGE_PATH,
        ),
    ]


class CpuBound(TypedDict):
    """What §VI-C states of a CPU-bound benchmark (CG, EP, LU)."""

    solo: float
    """Solo-CON time of the co-scheduling schemes (s)."""
    speedup: float
    """Their solo-CON gain over Credit."""
    cs: float
    """Dual-CON CS time as a multiple of Credit's."""
    cds: float
    """Dual-CON CDS time as a multiple of Credit's."""
    pcs: float
    """Dual-CON PCS gain over Credit."""
    bcs: float
    """Dual-CON BCS gain over Credit."""
    pcs_x: float
    """Dual-CON PCS gain over the mean of CS and CDS."""
    bcs_x: float
    """Dual-CON BCS gain over the mean of CS and CDS."""
    diff: str
    """The differences between the two domains, as the paper lists them."""


# CG, EP, LU (§VI-C): solo time and speed-up over Credit; dual CS and CDS as multiples of
# Credit; PCS and BCS faster than Credit, and than CS and CDS on average; differences
# between the domains (CS, CDS, PCS, BCS).
CPU_BOUND = {
    "cg": CpuBound(
        solo=45.0,
        speedup=0.238,
        cs=1.6,
        cds=1.9,
        pcs=0.175,
        bcs=0.114,
        pcs_x=1.0,
        bcs_x=0.96,
        diff="17.8 % CS, 47.4 % CDS, 1.3 % PCS, 0.03 % BCS",
    ),
    "ep": CpuBound(
        solo=43.0,
        speedup=0.194,
        cs=1.7,
        cds=2.0,
        pcs=0.204,
        bcs=0.229,
        pcs_x=1.2,
        bcs_x=1.2,
        diff="8.6 % CS, 30.7 % CDS, 0.4 % PCS, 0.3 % BCS",
    ),
    "lu": CpuBound(
        solo=53.0,
        speedup=0.202,
        cs=1.5,
        cds=1.9,
        pcs=0.158,
        bcs=0.177,
        pcs_x=0.87,
        bcs_x=0.88,
        diff="15.1 % CS, 30.2 % CDS, 0.17 % PCS, 0.12 % BCS",
    ),
}


def cpu_bound_claims(bench: str) -> list[Claim]:
    p = CPU_BOUND[bench]
    dual = npb_dual_xs(bench)
    name = bench.upper()
    return [
        Claim(
            f"solo-CON: the co-scheduling schemes take about {p['solo']:g} s, "
            f"{100 * p['speedup']:.1f} % faster than Credit",
            gain(["Credit"], CO_SCHEDULING, [SOLO], about(p["speedup"])),
            f"about {p['solo']:g} s, {100 * p['speedup']:.1f} %",
            if_fails=SOLO_NOTHING_CONTENDS,
        ),
        Claim(
            f"dual-CON: {name} takes about {p['cs']}X Credit's time in CS and {p['cds']}X in CDS",
            claims.all_of(
                ratio(["CS"], ["Credit"], dual, about(p["cs"])),
                ratio(["CDS"], ["Credit"], dual, about(p["cds"])),
            ),
            f"{p['cs']}X (CS), {p['cds']}X (CDS)",
            if_fails=CS_OPERATION_END,
        ),
        Claim(
            f"dual-CON: PCS is about {100 * p['pcs']:.1f} % and BCS about {100 * p['bcs']:.1f} % "
            "faster than Credit",
            claims.all_of(
                gain(["Credit"], ["PCS"], dual, about(p["pcs"])),
                gain(["Credit"], ["BCS"], dual, about(p["bcs"])),
            ),
            f"{100 * p['pcs']:.1f} % (PCS), {100 * p['bcs']:.1f} % (BCS)",
            if_fails=DUAL_NOTHING_CONTENDS,
        ),
        Claim(
            f"dual-CON: PCS is about {p['pcs_x']}X and BCS about {p['bcs_x']}X faster than CS and CDS "
            "on average",
            claims.all_of(
                gain(["CS", "CDS"], ["PCS"], dual, about(p["pcs_x"])),
                gain(["CS", "CDS"], ["BCS"], dual, about(p["bcs_x"])),
            ),
            f"{p['pcs_x']}X (PCS), {p['bcs_x']}X (BCS)",
            if_fails=CS_OVER_PCS,
        ),
        Claim(
            "dual-CON: CS and CDS are unfair, CDS the more",
            fairer(["CS"], ["CDS"], (dual[0], dual[1])),
            p["diff"],
            if_fails=CDS_RULE,
        ),
        *fairness_claims(bench, p["diff"]),
    ]


class IoBound(TypedDict):
    """What §VI-C states of an I/O-bound benchmark (FT, MG)."""

    dual: float
    """Dual-CON time as a multiple of solo-CON's, in any scheme."""
    gain: float
    """The gain of PCS and BCS over the other schemes on average."""
    diff: str
    """The differences between the two domains, as the paper lists them."""


# FT, MG: dual-CON several times slower than solo-CON (the disk); PCS and BCS faster than
# the other schemes by this much on average; differences between the domains.
IO_BOUND = {
    "ft": IoBound(dual=2.5, gain=0.091, diff="1.8 % PCS, 0.4 % BCS"),
    "mg": IoBound(dual=4.0, gain=0.261, diff="1.1 % PCS, 1.9 % BCS"),
}


def io_bound_claims(bench: str) -> list[Claim]:
    p = IO_BOUND[bench]
    dual = npb_dual_xs(bench)
    every = [SOLO, *dual]
    return [
        Claim(
            f"dual-CON is about {p['dual']:g}X slower than solo-CON in any scheme (the shared disk)",
            claims.all_of(*(ratio([s], [s], dual, about(p["dual"]), den_xs=[SOLO]) for s in POLICIES)),
            f"about {p['dual']:g}X",
            if_fails=PAGING,
        ),
        Claim(
            "PCS and BCS perform better than Credit, CS and CDS (in solo- and in dual-CON)",
            claims.all_of(
                faster(["PCS", "BCS"], ["Credit", "CS", "CDS"], [SOLO]),
                faster(["PCS", "BCS"], ["Credit", "CS", "CDS"], dual),
            ),
            "",
            if_fails=PAGING,
        ),
        Claim(
            f"PCS and BCS are about {100 * p['gain']:.1f} % faster than the other schemes on average",
            gain(["Credit", "CS", "CDS"], ["PCS", "BCS"], every, about(p["gain"])),
            f"{100 * p['gain']:.1f} %",
            if_fails=PAGING,
        ),
        *fairness_claims(bench, p["diff"]),
    ]


NPB = {
    "bt": ("7(a)", "NPB BT.A (solo 1 process, dual 4 over 2 domains)"),
    "cg": ("7(b)", "NPB CG.B (2 processes per domain)"),
    "ep": ("7(c)", "NPB EP.B (2 processes per domain)"),
    "lu": ("7(d)", "NPB LU.A (2 processes per domain)"),
    "ft": ("7(e)", "NPB FT.A (2 processes per domain)"),
    "mg": ("7(f)", "NPB MG.B (2 processes per domain)"),
}
CO_ONLY = ["CS", "CDS", "PCS", "BCS"]


def npb_paper_values(bench: str) -> dict[tuple[str, str], float]:
    """The times §VI-C states: BT's, and the co-scheduled solo times of CG, EP and LU ("about")."""
    if bench == "bt":
        return {
            (SOLO, "Credit"): 197.67,
            **{(SOLO, s): 180.0 for s in CO_ONLY},
            ("dual", "Credit"): 106.13,
            ("dual", "CS"): 375.0,
            ("dual", "CDS"): 375.0,
            ("dual", "PCS"): 84.90,
            ("dual", "BCS"): 335.11,
        }
    if bench in CPU_BOUND:
        return {(SOLO, s): CPU_BOUND[bench]["solo"] for s in CO_ONLY}
    return {}


NPB_NOTES = {
    "bt": "BT as `npb-lu` with BT's shape: 200 steps of 13 polled exchanges, 180 s of "
    "serial compute. Solo: one process in a 2-vCPU domain whose second vCPU stays halted "
    "(`idle_vcpus = 1`). Dual: one 4-rank job over two 2-vCPU domains (a virtual cluster on "
    "the one host) whose messages pass through Domain-0 as the driver domain "
    '(4 vCPUs, Xen\'s default); x "dual" is the job\'s time. The paper\'s "about 180 s" and '
    '"about 375 s" are given for every co-scheduling scheme and for both CS and CDS. Under '
    "Xen 4.0.1's `__runq_tickle` a waking Domain-0 vCPU, BOOSTed, preempts the spinning rank "
    "on its pCPU (under current Xen's idlers-first tickle `pcs` never runs Domain-0 at all). "
    "`pcs` finishes in every seed. With the pCPUs' clocks in lockstep it finished in only 4 of "
    "the 20: a Domain-0 vCPU queued on a partner pCPU is passed over at every co-scheduling "
    "signal (Algorithm 1), and the partner's own slice end, re-armed at each signal as Xen's "
    "`schedule()` does, fell at the very instant of its launcher's next signal, which the "
    "engine handles first; Xen's timer slop (docs/realism.md) breaks that tie.",
    "cg": "CG as `npb-cg`, class B (75 iterations, na = 75,000), 45 s per rank.",
    "ep": "EP as `npb-ep`, 43 s per rank, no synchronisation but at the start and end.",
    "lu": "LU as `npb-lu`, class A (250 iterations, 64³, one plane per pipeline step), 53 s per rank.",
    "ft": "FT as `bsp`: 36 polled phases of 111 ms (our estimate: the paper gives no FT "
    "time). The disk that makes dual-CON 2.5X slower is not modelled.",
    "mg": "MG as `bsp`: 600 polled phases of 13.3 ms (our estimate: the paper gives no MG "
    "time). The disk that makes dual-CON 4X slower is not modelled.",
}


def npb_figure(bench: str) -> Figure:
    label, title = NPB[bench]
    if bench == "bt":
        found = [*bt_claims(), *caption_claims(bench)]
    elif bench in CPU_BOUND:
        found = [*cpu_bound_claims(bench), *caption_claims(bench)]
    else:
        found = [*io_bound_claims(bench), *caption_claims(bench)]
    return Figure(
        id=f"fig7-{bench}",
        label=f"Fig. {label}",
        title=f"{title}: execution time",
        xlabel="configuration (domain)",
        ylabel="execution time (s)",
        cases=npb_cases(bench),
        metric=completion,
        claims=tuple(found),
        paper_values=npb_paper_values(bench),
        notes=NPB_NOTES[bench] + " Quick: 5 seeds instead of 20, same work.",
    )


PAPER = Paper(
    id="seed004",
    title="Hybrid co-scheduling optimizations: partial and boost co-scheduling (seed 004)",
    reps=20,
    quick_reps=5,
    figures=(FIG3, FIG4, FIG5, FIG6, *(npb_figure(b) for b in NPB)),
    notes=__doc__ or "",
)
