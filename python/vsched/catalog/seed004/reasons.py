"""Why seed 004's claims do not hold: each reason's numbers are measured from the runs of the
paper's figures (over those this reproduction ran) or quoted from the paper."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from vsched.catalog import stats
from vsched.catalog.reasons import Evidence, Measured, MeasuredText, NotMeasured, Premise, Stated, Why
from vsched.catalog.seed004.checks import SOLO, con_waiting, difference, mean_over, pooled
from vsched.catalog.stats import Estimate

# The figures whose x are configurations (solo, dual domains), with their dual-CON points.
DUAL_XS = {
    "fig4": ["dual lu1", "dual lu2"],
    "fig7-bt": ["dual"],
    **{f"fig7-{b}": [f"dual {b}1", f"dual {b}2"] for b in ("cg", "ep", "lu", "ft", "mg")},
}
CPU_BOUND = ("fig4", "fig7-cg", "fig7-ep", "fig7-lu")
TIME_FIGURES = ("fig4", *(f"fig7-{b}" for b in ("bt", "cg", "ep", "lu", "ft", "mg")))


def present(ev: Evidence, figures: Iterable[str]) -> list[str]:
    """The figures of `figures` this reproduction ran (NotMeasured if none)."""
    found = [f for f in figures if f in ev.results]
    if not found:
        raise NotMeasured(", ".join(figures))
    return found


def gap(ev: Evidence, figure: str, xs: Sequence[str], series: str) -> float:
    """|series / Credit − 1| pooled over `xs`."""
    r = ev.result(figure)
    return abs(stats.change(pooled(r, xs, series), pooled(r, xs, "Credit")).value)


def largest_gap(figures: Sequence[str], series: Sequence[str], dual: bool) -> Callable[[Evidence], float]:
    """The largest |s / Credit − 1| over `series`, at solo-CON or dual-CON, over `figures`."""

    def compute(ev: Evidence) -> float:
        return max(
            gap(ev, f, DUAL_XS[f] if dual else [SOLO], s) for f in present(ev, figures) for s in series
        )

    return compute


def waiting(figures: Sequence[str], dual: bool) -> Callable[[Evidence], float]:
    """The largest share of time the CON domains' vCPUs spent waiting for a pCPU under Credit
    (mean over the seeds), over `figures`."""

    def compute(ev: Evidence) -> float:
        return max(
            ev.mean(f, (DUAL_XS[f][0] if dual else SOLO), "Credit", con_waiting).value
            for f in present(ev, figures)
        )

    return compute


def dual_ratios(ev: Evidence, figures: Sequence[str], series: Sequence[str]) -> list[float]:
    """s / Credit at dual-CON over `series` and `figures` (those with a value)."""
    values = []
    for f in present(ev, figures):
        r = ev.result(f)
        for s in series:
            q = stats.ratio(pooled(r, DUAL_XS[f], s), pooled(r, DUAL_XS[f], "Credit"))
            if q.known:
                values.append(q.value)
    return values


def smallest_ratio(figures: Sequence[str], series: Sequence[str]) -> Callable[[Evidence], float]:
    return lambda ev: min(dual_ratios(ev, figures, series), default=float("nan"))


def largest_ratio(figures: Sequence[str], series: Sequence[str]) -> Callable[[Evidence], float]:
    return lambda ev: max(dual_ratios(ev, figures, series), default=float("nan"))


def rates(x: str, series: Sequence[str]) -> Callable[[Evidence], str]:
    """Fig. 5's launch rates at `x`, as "CS 63, PCS 60 and BCS 42"."""

    def compute(ev: Evidence) -> str:
        shown = [f"{s} {ev.cell('fig5', x, s).value:,.0f}" for s in series]
        return ", ".join(shown[:-1]) + f" and {shown[-1]}"

    return compute


def rate(x: str, series: str) -> Callable[[Evidence], Estimate]:
    return lambda ev: ev.cell("fig5", x, series)


def lu_difference(series: Sequence[str]) -> Callable[[Evidence], Estimate]:
    return lambda ev: difference(ev.result("fig4"), ("dual lu1", "dual lu2"), series)


def difference_spread(series: str) -> Callable[[Evidence], float]:
    """The standard deviation from run to run of the difference between the domains (LU)."""

    def compute(ev: Evidence) -> float:
        e = difference(ev.result("fig4"), ("dual lu1", "dual lu2"), [series])
        runs = ev.seeds("fig4", "dual lu1", series)
        return float(e.error * runs**0.5)

    return compute


def dual_over_solo(figure: str, series: Sequence[str]) -> Callable[[Evidence], Estimate]:
    def compute(ev: Evidence) -> Estimate:
        r = ev.result(figure)
        return stats.change(mean_over(r, DUAL_XS[figure], series), mean_over(r, [SOLO], series))

    return compute


def bt(series: str) -> Callable[[Evidence], Estimate]:
    return lambda ev: ev.cell("fig7-bt", "dual", series)


def bt_over_credit(series: Sequence[str]) -> Callable[[Evidence], str]:
    def compute(ev: Evidence) -> str:
        credit = ev.cell("fig7-bt", "dual", "Credit")
        return " and ".join(
            f"×{stats.ratio(ev.cell('fig7-bt', 'dual', s), credit).value:.2f}" for s in series
        )

    return compute


def solo_cds(ev: Evidence) -> Estimate:
    r = ev.result("fig4")
    return stats.change(r.estimate(SOLO, "CDS"), r.estimate(SOLO, "Credit"))


# ---------------------------------------------------------------------------------------------
# The reasons

# solo-CON: the co-scheduling schemes against Credit.
SOLO_NOTHING_CONTENDS = Why(
    "solo-uncontended",
    "leaves-out",
    "§VI-A's solo-CON host runs the benchmark's 2-vCPU CON domain beside Domain-0 and three idle "
    "guests on 4 pCPUs, and the paper does not say what load Domain-0 or the idle guests carried. "
    "As described, nothing contends: in vsched (Domain-0 and the idle guests wake only for their "
    "kernels' timers) the CON domain's vCPUs wait for a pCPU at most {waiting} of their time under "
    "Credit, so CS, PCS and BCS stay within {tie} of Credit on every benchmark, and CDS, whose "
    "descheduling of siblings slows it, changes SPLASH-2 LU's time by {cds} against Credit. The "
    "paper's own solo BT runs a single process, with nothing to co-schedule, and still gains "
    "{bt_gain} ({bt_times}): its speed-ups come from something its description of the host leaves "
    "out.",
    numbers=(
        Measured(
            "waiting",
            "largest waiting share of the CON vCPUs under Credit, solo-CON",
            waiting(TIME_FIGURES, dual=False),
            " %",
            100,
            2,
        ),
        Measured(
            "tie",
            "largest |s / Credit − 1| of CS, PCS, BCS, solo-CON",
            largest_gap(TIME_FIGURES, ["CS", "PCS", "BCS"], dual=False),
            " %",
            100,
            2,
        ),
        Measured("cds", "CDS / Credit − 1, SPLASH-2 LU, solo-CON", solo_cds, " %", 100, 2, signed=True),
        Stated("bt_gain", "9.4 %", "§VI-C, BT"),
        Stated("bt_times", "197.67 s to about 180 s", "§VI-C, BT"),
    ),
    premises=(
        Premise("the CON vCPUs seldom wait for a pCPU (under 5 %)", lambda v: v["waiting"] < 0.05),
        Premise("CS, PCS and BCS stay within 5 % of Credit", lambda v: v["tie"] < 0.05),
    ),
)
# dual-CON: PCS and BCS against Credit.
DUAL_NOTHING_CONTENDS = Why(
    "dual-uncontended",
    "leaves-out",
    "In dual-CON the two CON domains' 4 vCPUs fill the 4 pCPUs, beside Domain-0 and two idle "
    "guests whose load the paper does not state. In vsched those wake only for their kernels' "
    "timers, so under Credit the ranks' vCPUs wait for a pCPU at most {waiting} of their time, and "
    "PCS and BCS stay within {tie} of Credit on SPLASH-2 LU and NPB CG, EP and LU instead of "
    "beating it by the paper's {paper}: the gain needs a background load that preempts ranks under "
    "Credit and that co-scheduling keeps together.",
    numbers=(
        Measured(
            "waiting",
            "largest waiting share of the CON vCPUs under Credit, dual-CON",
            waiting(CPU_BOUND, dual=True),
            " %",
            100,
            2,
        ),
        Measured(
            "tie",
            "largest |s / Credit − 1| of PCS and BCS, dual-CON",
            largest_gap(CPU_BOUND, ["PCS", "BCS"], dual=True),
            " %",
            100,
            2,
        ),
        Stated("paper", "8–23 %", "§VI-C"),
    ),
    premises=(Premise("PCS and BCS stay within 5 % of Credit", lambda v: v["tie"] < 0.05),),
)
# dual-CON: CS and CDS against Credit.
CS_OPERATION_END = Why(
    "cs-operation-end",
    "leaves-out",
    "Neither seed 004 nor the CS it takes from Weng et al. (seed 003 §4.3) says when a "
    "co-scheduling operation ends, i.e. for how long the other CON domain may not launch one. "
    "Every launch signals every pCPU (§II-B), so the two dual-CON domains run mostly in turn, and "
    "how much they overlap between operations decides the slowdown. vsched ends an operation when "
    "every signalled pCPU has rescheduled: CS launches {cs_rate} times a second in dual-CON "
    "SPLASH-2 LU (the paper: {paper_rate}), and CS and CDS take {low} to {high} Credit's time "
    "on SPLASH-2 LU and NPB CG, EP and LU, against the paper's {paper_ratios}.",
    numbers=(
        Measured("cs_rate", "CS's launches per second, dual-CON LU", rate("dual", "CS"), digits=3),
        Stated("paper_rate", "150–400", "Fig. 5"),
        Measured(
            "low",
            "smallest of CS and CDS over Credit, dual-CON",
            smallest_ratio(CPU_BOUND, ["CS", "CDS"]),
            " ×",
        ),
        Measured(
            "high",
            "largest of CS and CDS over Credit, dual-CON",
            largest_ratio(CPU_BOUND, ["CS", "CDS"]),
            " ×",
        ),
        Stated("paper_ratios", "1.5 to 2 ×", "§VI-C"),
    ),
    premises=(
        Premise(
            "the two domains run mostly in turn under CS and CDS (over 1.5 times Credit's time)",
            lambda v: v["low"] > 1.5,
        ),
    ),
)
# CDS against CS: unfairness and frequency.
CDS_RULE = Why(
    "cds-rule",
    "leaves-out",
    'Seed 004 takes co-descheduling from VMware (§VII: the concurrent vCPUs "need to not only be '
    'scheduled concurrently but also be descheduled concurrently") without saying when its CDS '
    "deschedules the siblings: when one is preempted, when one blocks, or when their progress "
    "drifts apart. vsched's CDS deschedules them whenever one leaves its pCPU, blocking included; "
    "it launches {cds_solo} times a second in solo-CON against CS's {cs_solo} (the paper: "
    '{paper_cds}, "because of the stricter rule in CDS"), and in dual-CON the two domains\' times '
    "differ by {cds_diff} under CDS against {cs_diff} under CS (SPLASH-2 LU).",
    numbers=(
        Measured("cds_solo", "CDS's launches per second, solo-CON LU", rate(SOLO, "CDS"), digits=3),
        Measured("cs_solo", "CS's launches per second, solo-CON LU", rate(SOLO, "CS"), digits=3),
        Stated("paper_cds", "300–1000", "Fig. 5"),
        Measured(
            "cds_diff",
            "mean difference between the domains under CDS, dual-CON LU",
            lu_difference(["CDS"]),
            " %",
            100,
            2,
        ),
        Measured(
            "cs_diff",
            "mean difference between the domains under CS, dual-CON LU",
            lu_difference(["CS"]),
            " %",
            100,
            2,
        ),
    ),
    premises=(
        Premise("CDS launches more often than CS in solo-CON", lambda v: v["cds_solo"] > v["cs_solo"]),
    ),
)
# Fig. 5: frequencies.
FREQUENCY_COUNT = Why(
    "launch-count",
    "leaves-out",
    "The paper does not define what Fig. 5 counts as one co-scheduling: a launch by one pCPU, each "
    "signal it raises, or for BCS every boosting pass, whether or not it raised a waiting sibling; "
    "nor when an operation ends. vsched counts launches per simulated second (a BCS pass only if it "
    "boosted a sibling) and ends a CS operation when every signalled pCPU has rescheduled: in "
    "solo-CON {solo} times a second (the paper: {paper_solo}), in dual-CON {dual} (the paper: "
    "{paper_dual}).",
    numbers=(
        MeasuredText("solo", "launches per second, solo-CON LU", rates(SOLO, ["CS", "PCS", "BCS", "CDS"])),
        Stated("paper_solo", "about 60–70 for CS, PCS and BCS, 300–1000 for CDS", "Fig. 5"),
        MeasuredText("dual", "launches per second, dual-CON LU", rates("dual", ["CS", "CDS", "PCS", "BCS"])),
        Stated("paper_dual", "150–400 for CS, 200–3000 for CDS, 150–200 for PCS, 100–180 for BCS", "Fig. 5"),
    ),
)
# Differences between the two domains of one run.
SINGLE_RUNS = Why(
    "single-runs",
    "leaves-out",
    "The paper gives one execution time per domain and scheme and does not say how many runs each "
    "is, so its differences between the two domains ({paper}) read as single draws. That "
    "difference is itself random: over vsched's {runs} runs of dual-CON SPLASH-2 LU it averages "
    "{cs} under CS and {cds} under CDS, varying by {cs_spread} (CS) from run to run, and {fair} "
    "under PCS and BCS; one run decides neither a {paper_avg} average nor whether BCS is fairer "
    "than PCS.",
    numbers=(
        Stated("paper", "16.06 % and 39.08 % for CS and CDS, 12.14 % and 2.99 % for PCS and BCS", "§VI-C"),
        Stated("paper_avg", "27 %", "§VI-C"),
        Measured("runs", "runs per scheme", lambda ev: ev.seeds("fig4", "dual lu1", "CS")),
        Measured("cs", "mean difference under CS", lu_difference(["CS"]), " %", 100, 2),
        Measured("cds", "mean difference under CDS", lu_difference(["CDS"]), " %", 100, 2),
        Measured(
            "cs_spread",
            "standard deviation of CS's difference from run to run",
            difference_spread("CS"),
            " %",
            100,
            2,
        ),
        Measured("fair", "mean difference under PCS and BCS", lu_difference(["PCS", "BCS"]), " %", 100, 2),
    ),
    premises=(
        Premise(
            "CS's difference varies from run to run by more than a third of its mean",
            lambda v: v["cs_spread"] > v["cs"] / 3,
        ),
    ),
)
# dual-CON against solo-CON under PCS and BCS (LU).
CO_RUNNERS = Why(
    "shared-cache",
    "lacks-mechanism",
    "Contention between co-running domains for the shared L3 cache and memory bandwidth. §VI-C "
    "puts PCS's and BCS's dual-CON slowdown down to \"more virtualization cost\" ({paper_text} by "
    "its text, {paper_means} by its own means); on the {cpu} two LU instances share one L3 "
    "and one memory controller. vsched's co-runners evict each other's cache lines only when they "
    "switch, and slow each other down in no other way (`bsp` declares {working_set} of working "
    "set, where LU's matrix is {matrix}), so PCS and BCS run dual-CON {ours} slower than solo-CON.",
    numbers=(
        Stated("paper_text", "about 14 %", "§VI-C"),
        Stated("cpu", "Core i5 760", "§VI-A"),
        Stated("paper_means", "19 %: 24.29 s against 20.41 s", "§VI-C, Fig. 4"),
        Stated("working_set", "8 KiB", "crates/vsched-workloads/src/working_set.rs"),
        Stated("matrix", "128 MiB (n = 4096 doubles squared)", "§VI-B"),
        Measured(
            "ours",
            "mean(PCS, BCS) dual-CON over solo-CON − 1, LU",
            dual_over_solo("fig4", ["PCS", "BCS"]),
            " %",
            100,
            2,
        ),
    ),
    premises=(Premise("PCS and BCS lose under 10 % from solo- to dual-CON", lambda v: v["ours"] < 0.10),),
)
# BT in dual-CON: one 4-rank job over the two domains.
BT_MESSAGE_PATH = Why(
    "bt-message-path",
    "leaves-out",
    "The paper does not say how dual BT's four ranks in two domains exchange their messages "
    "(presumably MPI over the virtual network through Domain-0's backend) nor what that path "
    "costs. It decides dual BT: by the paper's numbers four ranks take {paper_credit} under Credit "
    "where one takes {paper_solo} (about a quarter of that if they only computed), so half the run "
    "is communication and waiting, on which PCS runs {paper_pcs} faster and BCS three times slower. "
    "vsched passes each message through Domain-0 at its modelled cost: Credit takes {credit}, "
    "PCS and BCS {pcs_bcs} of it, and CS and CDS {cs_cds}.",
    numbers=(
        Stated("paper_credit", "106.13 s", "§VI-C"),
        Stated("paper_solo", "197.67 s", "§VI-C"),
        Stated("paper_pcs", "25 %", "§VI-C"),
        Measured("credit", "Credit's mean time, dual BT", bt("Credit"), " s"),
        MeasuredText("pcs_bcs", "PCS and BCS over Credit, dual BT", bt_over_credit(["PCS", "BCS"])),
        MeasuredText("cs_cds", "CS and CDS over Credit, dual BT", bt_over_credit(["CS", "CDS"])),
    ),
)


def cs_over_pcs(figure: str) -> Why:
    """PCS and BCS against CS and CDS in dual-CON: a ratio of two effects."""
    name = figure.removeprefix("fig7-").upper() if figure != "fig4" else "SPLASH-2 LU"
    dual = DUAL_XS[figure]

    def over_credit(series: Sequence[str]) -> Callable[[Evidence], Estimate]:
        def compute(ev: Evidence) -> Estimate:
            r = ev.result(figure)
            return stats.ratio(mean_over(r, dual, series), mean_over(r, dual, ["Credit"]))

        return compute

    return Why(
        f"ratio-of-two-effects-{figure}",
        "leaves-out",
        "This ratio compounds two things the paper leaves out: what CS and CDS cost in dual-CON, "
        "set by when a co-scheduling operation ends (not stated; on {name} vsched's CS and CDS take "
        "{cs} of Credit's time), and how much PCS and BCS gain over Credit, which needs a background "
        "load the paper does not describe (vsched's take {pcs} of Credit's time). Where CS costs more "
        "than the paper's, the ratio overshoots; where about as much, the missing gain over Credit "
        "leaves it short.",
        numbers=(
            Stated("name", name, "the figure"),
            Measured(
                "cs", "mean(CS, CDS) over Credit, dual-CON", over_credit(["CS", "CDS"]), digits=3, unit=" ×"
            ),
            Measured(
                "pcs",
                "mean(PCS, BCS) over Credit, dual-CON",
                over_credit(["PCS", "BCS"]),
                digits=3,
                unit=" ×",
            ),
        ),
    )


# FT and MG (Figs. 7(e), 7(f)).
PAGING = Why(
    "paging",
    "lacks-mechanism",
    'Guest memory and paging to a shared disk. §VI-C says FT and MG "have more disk accesses, so '
    'they are I/O-intensive" and that "the limited I/O access channel" makes dual-CON {paper} '
    "slower than solo-CON. NPB's FT and MG read and write no files, but their arrays ({arrays}) "
    "come to more than a domain's {memory}, so the disk accesses are most likely paging. vsched "
    "models no guest memory (its disk has no cache or request merging, and these scenarios do no "
    "I/O), so dual-CON costs FT {ft} and MG {mg} over solo-CON under Credit, and the disk contention "
    "under which the paper's PCS and BCS gain never arises.",
    numbers=(
        Stated("paper", "2.5X (FT) and 4X (MG)", "§VI-C"),
        Stated(
            "arrays",
            "about 0.4 GB: three 128 MiB arrays each, FT class A's complex grid and MG class B's grid",
            "NPB 3 sources, class sizes",
        ),
        Stated("memory", "394 MB", "§VI-A"),
        Measured(
            "ft",
            "Credit's dual-CON over solo-CON − 1, FT",
            dual_over_solo("fig7-ft", ["Credit"]),
            " %",
            100,
            2,
            signed=True,
        ),
        Measured(
            "mg",
            "Credit's dual-CON over solo-CON − 1, MG",
            dual_over_solo("fig7-mg", ["Credit"]),
            " %",
            100,
            2,
            signed=True,
        ),
    ),
    premises=(Premise("dual-CON costs FT and MG under 50 %", lambda v: max(v["ft"], v["mg"]) < 0.5),),
)
