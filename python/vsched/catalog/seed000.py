"""Seed 000: VCPU collaborative scheduling based on a virtual domain (VDS; Liu, Li and Wang,
2018), §5 Experiments I–III, Figs. 2–7. Xen's Credit, strict co-scheduling (the paper's
Co_scheduling, our `cosched`) and VDS (`vds`) run a BSPCloud matrix multiplication C = AB in
one VM beside VMs whose threads multiply two variables in a loop; the figures plot the mean
(Figs. 2, 4, 6) and the standard deviation (Figs. 3, 5, 7) over 50 repetitions of the BSP
application's completion time.

Testbed (§5.1): two quad-core Xeons at 2.4 GHz (8 pCPUs), Xen 4.1.2, Ubuntu 12.04 guests with
2 GB each. We model it as one 8-pCPU host with Xen's default Domain-0 (8 vCPUs, idle but for
its kernel's timer wake-ups); the
BSP application as the `bsp` workload (50 supersteps of block multiplication ended by a
barrier, work growing as n³ with the matrix size, strong scaling over the VM's vCPUs; the
paper does not say how BSPCloud's threads wait, so they block as the guest's thread library
does, `runtime = "pthreads"`); the loop threads as `cpu_hog`, one per vCPU. Every guest VM is CON, since both
Co_scheduling and VDS co-schedule every VM. Each scenario file's header gives the details.

The paper gives no completion times, only each policy's percent decline against Credit at
every point (text of §5.3–5.5). `paper_values` therefore hold those declines as signed
changes against Credit, in percent (−17.3 means "declines 17.3 %"); they are not seconds and
Credit has none. The claims compare our changes against Credit with them.

The paper's text and its numbers disagree on one point: §5.3–5.5 say "the performance of
application under VDS scheduling is better than the application under Co_scheduling" (VDS
avoids CPU fragments), yet every stated mean decline of Co_scheduling (13.4–17.4 %) is larger
than VDS's at the same point (10.7–14.8 %), i.e. by the paper's own numbers Co_scheduling is
faster. The same holds for the standard deviation in Experiments II and III (Co_scheduling
declines 86–93 %, VDS 75–82 %), while in Experiment I VDS declines it more, as the text says.
We state both readings as claims; at most one of each pair can hold.

Two properties of our models shape the results (neither is tuned here; the reasons below
quote what they do to these runs):
- Credit, `cosched` and `vds` all share CPU per active vCPU (`csched_acct` weighs a domain
  by weight × active vCPUs, as Xen's credit1 does), so a wider BSP VM gets more CPU under
  each, and VDS stays close to Credit at every width.
- Domain-0 (8 HIT vCPUs, waking for their kernels' timers) costs `cosched` whole rounds: a
  dom0 vCPU that wakes while gangs fill the host waits for the round boundary, where each
  runnable HIT vCPU is planned as a unit ahead of the gangs (dom0's virtual time is the
  lowest) and keeps its pCPU for the round after blocking, so a second 4-wide gang no longer
  fits.

Not encoded: the conclusion's "the performance has increased by 5 %. Meanwhile, stability has
also increased by 5 %" (it matches none of the §5 numbers and names no baseline), and §5.5's
"the performance of application is also related to the number of VCPUs of the physical
machine" (no direction given). The paper's figures are not readable in our copy, so the plot
kind (bars) is our choice.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

from vsched.catalog import claims, stats
from vsched.catalog.model import Case, Claim, Figure, FigureResult, Paper, Row, Verdict, vm
from vsched.catalog.reasons import Evidence, Measured, Premise, Stated, Why
from vsched.catalog.stats import Estimate, Outcome, combine

# The paper's legend names and our policies.
POLICIES = {"Credit": "credit", "Co_scheduling": "cosched", "VDS": "vds"}
BASELINE = "Credit"

# Quick version: 20 of the 50 supersteps for every BSP VM, and 25 repetitions instead of 50
# (`quick_reps`). Each superstep keeps its grain against the 30 ms scheduling periods, which
# is what the policies act on. The standard deviations are noisier with 25 runs, so near-ties
# among them come out within noise; with 12, Fig. 5's Co_scheduling claim could not be
# decided where the full catalog decides it.
QUICK_SUPERSTEPS = 20
QUICK_REPS = 25
QUICK = (("vm.bsp.workload.supersteps", QUICK_SUPERSTEPS),)
QUICK_NOTE = (
    f"Quick version: {QUICK_SUPERSTEPS} supersteps instead of 50 (same grain per superstep) and "
    f"{QUICK_REPS} repetitions instead of 50; near-ties between standard deviations come out within noise."
)

# ---------------------------------------------------------------------------------------------
# The paper's numbers: percent declines against Credit, per x (§5.3–5.5)

SIZES = ["2000", "3000", "4000"]
VCPUS = ["3", "4", "5", "6", "7", "8"]
AUX_VCPUS = ["3", "4", "5", "6", "7", "8"]

Declines = Mapping[str, Mapping[str, float]]
"""series -> x -> the paper's decline against Credit, in percent (positive: lower)."""

# §5.3, Fig. 2 and Fig. 3.
EXP1_MEAN: Declines = {
    "Co_scheduling": dict(zip(SIZES, [17.3, 17.41, 17.38])),
    "VDS": dict(zip(SIZES, [12.69, 12.78, 12.72])),
}
EXP1_STD: Declines = {
    "Co_scheduling": dict(zip(SIZES, [84.49, 74.84, 74.89])),
    "VDS": dict(zip(SIZES, [90.28, 86.91, 90.05])),
}
# §5.4, Fig. 4 and Fig. 5 (the text calls the latter "Fig. 3").
EXP2_MEAN: Declines = {
    "Co_scheduling": dict(zip(VCPUS, [13.43, 15.55, 14.76, 16.24, 16.35, 16.14])),
    "VDS": dict(zip(VCPUS, [11.72, 14.84, 10.73, 12.89, 13.06, 13.11])),
}
EXP2_STD: Declines = {
    "Co_scheduling": dict(zip(VCPUS, [91.92, 90.19, 90.0, 90.36, 91.9, 92.53])),
    "VDS": dict(zip(VCPUS, [80.75, 76.28, 81.99, 74.53, 78.62, 80.88])),
}
# §5.5, Fig. 6 and Fig. 7.
EXP3_MEAN: Declines = {
    "Co_scheduling": dict(zip(AUX_VCPUS, [16.17, 15.77, 16.06, 14.83, 14.16, 13.59])),
    "VDS": dict(zip(AUX_VCPUS, [12.56, 12.49, 13.0, 12.75, 12.78, 12.8])),
}
EXP3_STD: Declines = {
    "Co_scheduling": dict(zip(AUX_VCPUS, [86.92, 88.61, 89.07, 91.34, 90.19, 86.13])),
    "VDS": dict(zip(AUX_VCPUS, [78.04, 77.68, 75.74, 78.76, 78.85, 76.32])),
}


def as_paper_values(declines: Declines) -> dict[tuple[str, str], float]:
    """The declines as `Figure.paper_values`: signed percent change against Credit."""
    return {(x, series): -value for series, by_x in declines.items() for x, value in by_x.items()}


def stated(declines: Declines, series: str) -> str:
    return ", ".join(f"−{value:g} %" for value in declines[series].values())


# ---------------------------------------------------------------------------------------------
# Evidence runs: what the reasons measure beyond the figures

# The strict co-scheduler's cost with and without Domain-0: Experiment I at 3000 × 3000 and
# Experiment II at 8 vCPUs, with no driver domain.
NO_DOM0 = Figure(
    id="no-dom0",
    label="evidence: without Domain-0",
    title="The BSP VM without a driver domain",
    xlabel="scenario",
    ylabel="completion time of the BSP application (s)",
    cases=(
        *(
            Case("exp1-3000", series, "seed000/exp1-3000.toml", policy, (("host.dom0_vcpus", 0),))
            for series, policy in (("Credit", "credit"), ("Co_scheduling", "cosched"))
        ),
        Case(
            "exp2-vcpus-8", "Co_scheduling", "seed000/exp2-vcpus-8.toml", "cosched", (("host.dom0_vcpus", 0),)
        ),
    ),
    metric=vm("bsp", "completion_s"),
    claims=(),
    quick_overrides=QUICK,
)
# How BSPCloud's threads wait decides VDS against Credit: the same run with spinning barriers.
SPINNING = Figure(
    id="spinning",
    label="evidence: spinning barriers",
    title="Experiment I at 2000 × 2000 with threads that spin at the barrier",
    xlabel="scenario",
    ylabel="completion time of the BSP application (s)",
    cases=tuple(
        Case("exp1-2000", series, "seed000/exp1-2000.toml", policy, (("vm.bsp.workload.wait", "spin"),))
        for series, policy in (("Credit", "credit"), ("VDS", "vds"))
    ),
    metric=vm("bsp", "completion_s"),
    claims=(),
    quick_overrides=QUICK,
)

MEAN_FIGURES = {"fig2": SIZES, "fig4": VCPUS, "fig6": AUX_VCPUS}
STD_FIGURES = {"fig3": SIZES, "fig5": VCPUS, "fig7": AUX_VCPUS}


def host_share(metric: str) -> Callable[[Row], float]:
    return lambda row: float(row[f"host.{metric}"])


def largest_gap(ev: Evidence, series: str, figures: Mapping[str, Sequence[str]]) -> float:
    """The largest |series / Credit − 1| over every point of `figures`."""
    return max(
        abs(stats.change(ev.cell(f, x, series), ev.cell(f, x, BASELINE)).value)
        for f, xs in figures.items()
        for x in xs
    )


def std_ratio_range(ev: Evidence, series: str) -> tuple[float, float]:
    """The smallest and largest standard deviation of `series` over Credit's, over Figs. 3, 5, 7
    (points where both are known)."""
    ratios = [
        stats.ratio(ev.cell(f, x, series), ev.cell(f, x, BASELINE))
        for f, xs in STD_FIGURES.items()
        for x in xs
    ]
    values = [r.value for r in ratios if r.known]
    return min(values), max(values)


def credit_variation(ev: Evidence) -> float:
    """Credit's largest standard deviation over its mean, over every point."""
    return max(
        ev.cell(s, x, BASELINE).value / ev.cell(m, x, BASELINE).value
        for (m, xs), s in zip(MEAN_FIGURES.items(), STD_FIGURES)
        for x in xs
    )


def cosched_idle(ev: Evidence) -> float:
    """The share of the host idle under Co_scheduling at 3000 × 3000 without Domain-0."""
    return 1 - ev.mean("no-dom0", "exp1-3000", "Co_scheduling", host_share("utilization")).value


# ---------------------------------------------------------------------------------------------
# Why the claims do not hold

# Co_scheduling against Credit, means and standard deviations (Figs. 2-7).
CO_SCHEDULING_BASELINE = Why(
    "cosched-strict",
    "leaves-out",
    'The paper defines its Co_scheduling baseline only as "either all VCPUs of a VM are scheduled '
    'at the same time or none of the VCPU is scheduled" (§1, §5.3), not what runs on the pCPUs a '
    "gang leaves free, how it shares CPU among VMs, or how it treats Domain-0. vsched's `cosched` is "
    "strict: a pCPU that no whole gang fits on idles. Beside the three hog VMs of Experiment I that "
    "leaves {idle} of the host idle even with no Domain-0, and the BSP VM takes {slower} longer than "
    "under Credit ({cosched_s} against {credit_s} at 3000 × 3000). With Domain-0, whose timer "
    "wake-ups are planned ahead of the gangs at each round, the wider BSP VMs lose whole rounds: "
    "at 8 vCPUs (Fig. 4) {unfinished} of {runs} runs do not finish within the horizon, where the "
    "same scenario without Domain-0 takes {alone_s}. A Co_scheduling that filled its fragments "
    "(the paper credits only VDS with that) could beat Credit.",
    numbers=(
        Measured(
            "idle",
            "share of the host idle under Co_scheduling, 3000 × 3000, no Domain-0",
            cosched_idle,
            " %",
            100,
            2,
        ),
        Measured(
            "slower",
            "Co_scheduling over Credit − 1, 3000 × 3000, no Domain-0",
            lambda ev: stats.change(
                ev.cell("no-dom0", "exp1-3000", "Co_scheduling"), ev.cell("no-dom0", "exp1-3000", "Credit")
            ),
            " %",
            100,
            2,
        ),
        Measured(
            "cosched_s",
            "Co_scheduling's mean time, 3000 × 3000, no Domain-0",
            lambda ev: ev.cell("no-dom0", "exp1-3000", "Co_scheduling"),
            " s",
        ),
        Measured(
            "credit_s",
            "Credit's mean time, 3000 × 3000, no Domain-0",
            lambda ev: ev.cell("no-dom0", "exp1-3000", "Credit"),
            " s",
        ),
        Measured(
            "unfinished",
            "unfinished Co_scheduling runs at 8 vCPUs (Fig. 4)",
            lambda ev: ev.unfinished("fig4", "8", "Co_scheduling"),
        ),
        Measured(
            "runs",
            "Co_scheduling runs at 8 vCPUs (Fig. 4)",
            lambda ev: ev.seeds("fig4", "8", "Co_scheduling"),
        ),
        Measured(
            "alone_s",
            "Co_scheduling's mean time at 8 vCPUs without Domain-0",
            lambda ev: ev.cell("no-dom0", "exp2-vcpus-8", "Co_scheduling"),
            " s",
        ),
    ),
    premises=(
        Premise("strict co-scheduling alone is slower than Credit (no Domain-0)", lambda v: v["slower"] > 0),
        Premise("it idles part of the host", lambda v: v["idle"] > 0.05),
        Premise(
            "with Domain-0 the 8-vCPU runs are far slower or do not finish",
            lambda v: v["unfinished"] > 0,
        ),
    ),
    evidence=(NO_DOM0,),
)
# VDS against Credit, means (Figs. 2, 4, 6).
VDS_SHARES = Why(
    "vds-shares",
    "leaves-out",
    'The paper does not say how VDS picks the VM of each scheduling period (§3.2: "In each '
    'scheduling period, VCPUs of a VM is scheduled"), i.e. how it divides CPU among VMs, nor how '
    "BSPCloud's threads wait at a barrier. vsched's `vds` picks the VM with the lowest virtual time "
    "weighted as Credit weighs a domain (weight × active vCPUs), so the BSP VM gets Credit's share, "
    "and its threads block, so Credit wastes no CPU on waiting: VDS stays within {gap} of Credit at "
    "every point of Figs. 2, 4 and 6, against the paper's {paper_declines}. How the threads wait "
    "moves the result: with spinning barriers VDS's time changes by {spin_change} against Credit "
    "(2000 × 2000).",
    numbers=(
        Measured(
            "gap",
            "largest |VDS / Credit − 1| over Figs. 2, 4, 6",
            lambda ev: largest_gap(ev, "VDS", MEAN_FIGURES),
            " %",
            100,
            2,
        ),
        Stated("paper_declines", "10.73–14.84 % declines", "§5.3–5.5"),
        Measured(
            "spin_change",
            "VDS / Credit − 1 with spinning barriers, 2000 × 2000",
            lambda ev: stats.change(
                ev.cell("spinning", "exp1-2000", "VDS"), ev.cell("spinning", "exp1-2000", "Credit")
            ),
            " %",
            100,
            2,
            signed=True,
        ),
    ),
    premises=(
        Premise("VDS's gain over Credit is under half the paper's smallest", lambda v: v["gap"] < 0.0537),
    ),
    evidence=(SPINNING,),
)
# VDS against Credit, standard deviations (Figs. 3, 5, 7).
STD_SOURCES = Why(
    "std-sources",
    "leaves-out",
    "The paper gives only percent declines of the standard deviation, never the deviations or the "
    "means they belong to, so how much its Credit runs varied, and from what (§5.3 says only "
    '"the uncertainty of VCPUs\' scheduling order"), is not stated; a decline of {paper_declines} '
    "depends on it. In vsched Credit's runs vary by at most {credit_cv} of their mean (from the BSP "
    "workload's drawn imbalance per superstep, the pCPUs' clock phases and the start offsets, which "
    "every policy shares); VDS removes little of that: its deviation is {low} to {high} of Credit's.",
    numbers=(
        Stated("paper_declines", "75–90 %", "§5.3–5.5"),
        Measured(
            "credit_cv", "Credit's largest standard deviation over its mean", credit_variation, " %", 100, 2
        ),
        Measured(
            "low",
            "VDS's smallest standard deviation over Credit's",
            lambda ev: std_ratio_range(ev, "VDS")[0],
            " %",
            100,
            2,
        ),
        Measured(
            "high",
            "VDS's largest standard deviation over Credit's",
            lambda ev: std_ratio_range(ev, "VDS")[1],
            " %",
            100,
            2,
        ),
    ),
    premises=(
        Premise("Credit's runs vary by under 5 % of their mean", lambda v: v["credit_cv"] < 0.05),
        Premise("VDS keeps more than half of Credit's deviation somewhere", lambda v: v["high"] > 0.5),
    ),
)
# §5.3: VDS's deviation below Co_scheduling's.
MIGRATION_COST = Why(
    "migration-cost",
    "leaves-out",
    "§5.3 puts VDS's lower deviation down to Co_scheduling's migrations (\"The migration of VCPUs "
    'may influence the stability of the application") without saying what a migration costs '
    "BSPCloud, i.e. its working set. In vsched the refills after migrations take {refill} of the "
    "host's CPU time under Co_scheduling at 2000 × 2000, so migrations move the deviation little.",
    numbers=(
        Measured(
            "refill",
            "cache refill time over CPU time of the host, Co_scheduling, 2000 × 2000",
            lambda ev: ev.mean(
                "fig2",
                "2000",
                "Co_scheduling",
                lambda row: (
                    float(row["host.cache_refill_s"]) / (float(row["sim_s"]) * float(row["host.pcpus"]))
                ),
            ),
            " %",
            100,
            2,
        ),
    ),
    premises=(Premise("refills are under 1 % of the host's time", lambda v: v["refill"] < 0.01),),
)
# Fig. 4: "The performance of application is not always increase with the increase of the
# number of VCPUs".
THREAD_SCALING = Why(
    "thread-scaling",
    "leaves-out",
    '§5.4 explains the decline by "the overhead of scheduling is increases and the allocated CPU '
    "resources of each VCPU is decreases\", but does not say how BSPCloud's run time scales with "
    "its thread count on its own (its communication and per-thread costs, or how many threads "
    "it ran per vCPU). vsched splits a fixed amount of work over one thread per vCPU with no "
    "per-thread cost, and Credit and VDS give a wider VM a larger share (weight × active vCPUs): "
    "Credit takes {credit_3} with 3 vCPUs and {credit_8} with 8 vCPUs.",
    numbers=(
        Measured(
            "credit_3",
            "Credit's mean time, 3 vCPUs (Fig. 4)",
            lambda ev: ev.cell("fig4", "3", "Credit"),
            " s",
        ),
        Measured(
            "credit_8",
            "Credit's mean time, 8 vCPUs (Fig. 4)",
            lambda ev: ev.cell("fig4", "8", "Credit"),
            " s",
        ),
    ),
    premises=(Premise("Credit is faster with 8 vCPUs than with 3", lambda v: v["credit_8"] < v["credit_3"]),),
)


def text_against_numbers(section: str, text: str, mean: Declines, figure: str) -> Why:
    """§5.3-5.5 each say VDS is faster than Co_scheduling, and each states declines against
    Credit that put Co_scheduling ahead."""
    return Why(
        f"text-vs-numbers-{figure.lower().replace('. ', '')}",
        "contradicts",
        f'{section} says "{text}", yet the declines against Credit it states for {figure} are '
        "larger for Co_scheduling ({co}) than for VDS ({vds}), i.e. by its own numbers "
        "Co_scheduling is the faster. At most one of the two readings can hold.",
        numbers=(
            Stated("co", stated(mean, "Co_scheduling"), f"{section}, {figure}"),
            Stated("vds", stated(mean, "VDS"), f"{section}, {figure}"),
        ),
    )


def std_text_against_numbers(section: str, std: Declines, figure: str) -> Why:
    """§5.4 and §5.5 give §5.3's reason for the deviations, which says VDS's is lower; their
    numbers put Co_scheduling's lower."""
    return Why(
        f"std-text-vs-numbers-{figure.lower().replace('. ', '')}",
        "contradicts",
        f'{section} explains {figure} with "The reason is same as which has been explained in the '
        "subsection 5.3\", and §5.3's reason is that VDS's stable mapping of vCPUs to pCPUs means "
        '"The standard deviation of application is further reduced" than under Co_scheduling; yet '
        f"the declines {section} states are larger for Co_scheduling ({{co}}) than for VDS ({{vds}}).",
        numbers=(
            Stated("co", stated(std, "Co_scheduling"), f"{section}, {figure}"),
            Stated("vds", stated(std, "VDS"), f"{section}, {figure}"),
        ),
    )


# ---------------------------------------------------------------------------------------------
# Checks specific to this paper


def change(r: FigureResult, x: str, series: str) -> Estimate:
    """Our change of `series` against Credit at `x` (negative: lower)."""
    return stats.change(r.estimate(x, series), r.estimate(x, BASELINE))


def declines_near(series: str, paper: Mapping[str, float]) -> claims.Check:
    """At every x, `series`' decline against Credit lies in the band around the paper's
    decline there (`stats.band`: ±25 % of it)."""

    def check(r: FigureResult) -> Verdict:
        outcomes = []
        parts = []
        for x in r.xs:
            low, high = stats.band(-paper[x] / 100)
            ours = change(r, x, series)
            outcomes.append(stats.inside(ours, low, high))
            parts.append(f"{x}: {claims.shown_change(ours)} (paper −{paper[x]:g} %)")
        return Verdict(
            combine(outcomes), f"{series} vs {BASELINE}: " + ", ".join(parts) + "; band ±25 % of the paper's"
        )

    return check


def largest_decline_at(series: str, x_best: str) -> claims.Check:
    """`series`' decline against Credit is largest at `x_best`: its change there is below its
    change at every other x."""

    def check(r: FigureResult) -> Verdict:
        changes = {x: change(r, x, series) for x in r.xs}
        outcomes = [stats.below(changes[x_best], c) for x, c in changes.items() if x != x_best]
        listed = ", ".join(f"{x}: {claims.shown_change(c)}" for x, c in changes.items())
        return Verdict(combine(outcomes), f"{series} vs {BASELINE}: {listed}")

    return check


def not_fastest_at_last(series_names: Sequence[str]) -> claims.Check:
    """For each series, the time does not keep falling as x grows: some earlier x is faster
    than the last (§5.4: performance "begins to decline when the total number of VCPUs
    increases to some extent")."""

    def check(r: FigureResult) -> Verdict:
        last = r.xs[-1]
        outcomes = []
        for s in series_names:
            earlier = [stats.below(r.estimate(x, s), r.estimate(last, s)) for x in r.xs[:-1]]
            if Outcome.HOLDS in earlier:
                outcomes.append(Outcome.HOLDS)
            elif all(stats.below(r.estimate(last, s), r.estimate(x, s)) is Outcome.HOLDS for x in r.xs[:-1]):
                outcomes.append(Outcome.FAILS)
            else:
                outcomes.append(Outcome.NOISE)
        shown = "; ".join(
            f"{s}: {claims.cell(r, r.xs[0], s)} at {r.xs[0]}, {claims.cell(r, last, s)} at {last}"
            for s in series_names
        )
        return Verdict(combine(outcomes), shown)

    return check


# ---------------------------------------------------------------------------------------------
# Figures


def cases(files: Mapping[str, str]) -> tuple[Case, ...]:
    return tuple(
        Case(x, series, f"seed000/{file}", policy)
        for x, file in files.items()
        for series, policy in POLICIES.items()
    )


def credit_claims(declines: Declines, improves: str, quantity: str, vds_why: Why) -> tuple[Claim, ...]:
    """ "Compared with xen credit scheduling, Co_scheduling and VDS scheduling can both ...":
    one ordering claim per policy (so that each verdict says which of the two does), then
    one claim per policy on the paper's percent declines of `quantity`. `vds_why` says why
    VDS's may not hold (Co_scheduling's is always how strict it is)."""
    why = {"Co_scheduling": CO_SCHEDULING_BASELINE, "VDS": vds_why}
    return (
        *(
            Claim(
                f"Compared with Credit, {series} {improves}",
                claims.ordered([series, BASELINE]),
                stated(declines, series),
                if_fails=why[series],
            )
            for series in ("Co_scheduling", "VDS")
        ),
        *(
            Claim(
                f"{series}'s {quantity} declines against Credit by the paper's percentages",
                declines_near(series, declines[series]),
                stated(declines, series),
                if_fails=why[series],
            )
            for series in ("Co_scheduling", "VDS")
        ),
    )


def mean_claims(declines: Declines, contradiction: Why) -> tuple[Claim, ...]:
    """The claims of a mean-completion-time figure (Figs. 2, 4, 6); `contradiction` quotes the
    paper's text and numbers on VDS against Co_scheduling."""
    return (
        *credit_claims(
            declines,
            "improves the performance of the application (lower mean completion time at every point)",
            "mean completion time",
            VDS_SHARES,
        ),
        # §5.3, §5.4 and §5.5 each say so in words ...
        Claim(
            "The performance of the application under VDS is better than under Co_scheduling "
            "(the paper's text: VDS avoids CPU fragments)",
            claims.ordered(["VDS", "Co_scheduling"]),
            "text only; the paper's numbers say the opposite",
            if_fails=contradiction,
        ),
        # ... while every decline they state is larger for Co_scheduling.
        Claim(
            "By the paper's numbers, Co_scheduling's mean completion time is below VDS's at every point "
            "(larger decline against Credit)",
            claims.ordered(["Co_scheduling", "VDS"]),
            f"Co_scheduling {stated(declines, 'Co_scheduling')} vs VDS {stated(declines, 'VDS')}",
            if_fails=contradiction,
        ),
    )


def std_claims(declines: Declines, lower_by_numbers: str, text: str, order_why: Why) -> tuple[Claim, ...]:
    """The claims of a standard-deviation figure (Figs. 3, 5, 7); `order_why` says why the
    order of VDS and Co_scheduling may not hold."""
    higher = "VDS" if lower_by_numbers == "Co_scheduling" else "Co_scheduling"
    return (
        *credit_claims(
            declines,
            "declines the standard deviation of the application at every point",
            "standard deviation",
            STD_SOURCES,
        ),
        Claim(
            text,
            claims.ordered([lower_by_numbers, higher]),
            f"{lower_by_numbers} {stated(declines, lower_by_numbers)} vs {higher} {stated(declines, higher)}",
            if_fails=order_why,
        ),
    )


def figure_pair(
    number: int,
    experiment: str,
    what: str,
    xlabel: str,
    files: Mapping[str, str],
    mean_declines: Declines,
    std_declines: Declines,
    extra_mean_claims: tuple[Claim, ...],
    std_order: tuple[str, str],
    setup: str,
    mean_contradiction: Why,
    std_order_why: Why,
) -> tuple[Figure, Figure]:
    """The mean figure (number) and the standard-deviation figure (number + 1) of one
    experiment: the same cases, so the same runs. The two `Why`s say why the claims on VDS
    against Co_scheduling may not hold."""
    # The same cases (so the same runs), metric and notes; they differ in the statistic.
    figure = functools.partial(
        Figure,
        xlabel=xlabel,
        cases=cases(files),
        metric=vm("bsp", "completion_s"),
        kind="bar",
        paper_unit=" % vs Credit",
        quick_overrides=QUICK,
        notes=f"{setup} The paper's values are its percent changes against Credit, not seconds. {QUICK_NOTE}",
    )
    mean_figure = figure(
        id=f"fig{number}",
        label=f"Fig. {number}",
        title=f"{experiment}: average completion time of the application under different {what}",
        ylabel="mean completion time of the BSP application (s)",
        claims=(*mean_claims(mean_declines, mean_contradiction), *extra_mean_claims),
        stat="mean",
        paper_values=as_paper_values(mean_declines),
    )
    std_figure = figure(
        id=f"fig{number + 1}",
        label=f"Fig. {number + 1}",
        title=f"{experiment}: standard deviation of the application's completion time under different {what}",
        ylabel="standard deviation of the BSP application's completion time (s)",
        claims=std_claims(std_declines, *std_order, std_order_why),
        stat="std",
        paper_values=as_paper_values(std_declines),
    )
    return mean_figure, std_figure


# Experiments II and III: the text only says both policies reduce the standard deviation; the
# numbers (Co_scheduling 86–93 %, VDS 75–82 %) put Co_scheduling lower at every point.
CO_SCHEDULING_STD_LOWER = (
    "Co_scheduling",
    "By the paper's numbers, Co_scheduling's standard deviation is below VDS's at every point",
)

# §5.3 Experiment I: a 4-vCPU BSP VM beside three 6-vCPU VMs of 6 loop threads each.
FIG2, FIG3 = figure_pair(
    2,
    "Experiment I",
    "data size",
    "matrix size (n × n)",
    {size: f"exp1-{size}.toml" for size in SIZES},
    EXP1_MEAN,
    EXP1_STD,
    (),
    # §5.3: VDS's stable vCPU-to-pCPU mapping removes migrations: "The standard deviation of
    # application is further reduced" (numbers agree: 90.28 % vs 84.49 % ...).
    ("VDS", "VDS's standard deviation is below Co_scheduling's at every size (\"further reduced\")"),
    "§5.3: 8 pCPUs; the BSP VM has 4 vCPUs, beside three 6-vCPU VMs running 6 loop threads each.",
    text_against_numbers(
        "§5.3",
        "We can also see that the performance of application under VDS scheduling is better than the "
        "application under Co_scheduling",
        EXP1_MEAN,
        "Fig. 2",
    ),
    MIGRATION_COST,
)

# §5.4 Experiment II: the BSP VM's vCPUs vary from 3 to 8 (3000×3000) beside three 4-vCPU VMs
# of 4 loop threads each.
FIG4, FIG5 = figure_pair(
    4,
    "Experiment II",
    "number of VCPUs",
    "vCPUs of the BSP VM",
    {n: f"exp2-vcpus-{n}.toml" for n in VCPUS},
    EXP2_MEAN,
    EXP2_STD,
    (
        # §5.4: "when the total number of VCPUs is 16 ... The CPU fragment is not generated.
        # Thus, the performance improves better than others." The paper's numbers agree for
        # VDS (−14.84 % at 4 vCPUs, the largest) but not for Co_scheduling (largest at 7).
        Claim(
            "With 16 vCPUs in total (4 in the BSP VM) no CPU fragment arises, so VDS's improvement over "
            "Credit is the largest",
            largest_decline_at("VDS", "4"),
            stated(EXP2_MEAN, "VDS"),
            if_fails=VDS_SHARES,
        ),
        # §5.4: "the performance of application is not always increase with the increase of
        # the number of VCPUs ... begins to declines when the total number of VCPUs increases
        # to some extent" (overheads grow, each vCPU gets less CPU).
        Claim(
            "The performance does not always increase with the number of vCPUs (no series is fastest at 8)",
            not_fastest_at_last(list(POLICIES)),
            if_fails=THREAD_SCALING,
        ),
    ),
    CO_SCHEDULING_STD_LOWER,
    "§5.4: 8 pCPUs, 3000×3000; the BSP VM has 3 to 8 vCPUs (one BSP thread per vCPU, fixed total "
    "work), beside three 4-vCPU VMs running 4 loop threads each.",
    text_against_numbers(
        "§5.4",
        "The performance of application under VDS scheduling is better than the application of "
        "application under Co_scheduling",
        EXP2_MEAN,
        "Fig. 4",
    ),
    std_text_against_numbers("§5.4", EXP2_STD, "Fig. 5"),
)

# §5.5 Experiment III: a 4-vCPU BSP VM (3000×3000) beside two auxiliary VMs of 3 to 8 vCPUs.
FIG6, FIG7 = figure_pair(
    6,
    "Experiment III",
    "number of auxiliary VCPUs",
    "vCPUs of each auxiliary VM",
    {k: f"exp3-aux-{k}.toml" for k in AUX_VCPUS},
    EXP3_MEAN,
    EXP3_STD,
    (),
    CO_SCHEDULING_STD_LOWER,
    "§5.5: 8 pCPUs, 3000×3000; the BSP VM has 4 vCPUs, beside two auxiliary VMs of 3 to 8 vCPUs "
    "each (read as per VM) running as many loop threads.",
    text_against_numbers(
        "§5.5",
        "the performance of application under VDS scheduling is better than the application under "
        "Co_scheduling",
        EXP3_MEAN,
        "Fig. 6",
    ),
    std_text_against_numbers("§5.5", EXP3_STD, "Fig. 7"),
)

PAPER = Paper(
    id="seed000",
    title="Research on VCPU collaborative scheduling mechanism based on virtual domain (seed 000)",
    # §5.2: "N is set to 50 in this paper".
    reps=50,
    quick_reps=QUICK_REPS,
    figures=(FIG2, FIG3, FIG4, FIG5, FIG6, FIG7),
    notes=__doc__ or "",
)
