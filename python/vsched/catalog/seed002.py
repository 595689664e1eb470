"""Seed 002: communication-driven scheduling of virtual clusters (CVS), §4.2 Fig. 3 and §4.3
Fig. 4. Credit, balance scheduling (BS), hybrid scheduling (HS, seed 003's framework) and CVS
(`cvs-comm`) run NPB lu, is and ep on every virtual cluster at once, one 4-vCPU VM per host
in each; every host has 8 pCPUs and a 4-vCPU Domain-0 that carries the network I/O.

The figure of merit is the paper's: the mean execution time of the virtual clusters. The
paper ran each configuration ten times (§4.2: "We run lu on these four virtual clusters
simultaneously for ten times"); we use 10 seeds.
"""

from __future__ import annotations

from vsched.catalog import claims
from vsched.catalog.model import Case, Claim, Figure, FigureResult, Paper, Verdict, Why, mean_clusters

POLICIES = {"CREDIT": "credit", "BS": "balance", "HS": "hybrid", "CVS": "cvs-comm"}
HOSTS = ["2", "4", "8", "16", "32"]
VMS_PER_HOST = ["4", "5", "6", "7"]
# "Almost the same" (ep): every policy within this fraction of the fastest; "not obvious" (BS
# against Credit, Fig. 4): within this fraction of Credit. The paper gives no number for
# either; we read both as 5 %, a difference a reader of a bar chart would call small.
SAME = 0.05
NOT_OBVIOUS = 0.05


# Why the claims do not hold (or hold only narrowly).
# HS fastest (CVS not best, HS not between CVS and BS).
HS_SETUP = Why(
    "leaves-out",
    'Seed 002 compares with "Hybrid Scheduling (HS)" (its reference [3], seed 003, built on Xen '
    "3.0.4) without saying how HS was set up on its cluster: its slot length, its accounting, what "
    "it does with Domain-0. vsched's `hybrid` follows seed 003: 10 ms slots, and one whole CON VM "
    "per pCPU at a time in turn, so a rank waiting for its peer on another host waits a few "
    "slots, while CVS inherits Credit's 30 ms slices and co-schedules only when Credit's order "
    "reaches a parallel VM. HS is then the fastest by far. The slice is part of it: for lu on 8 "
    "hosts (10 seeds) CVS with 10 ms slices drops from 25.1 s to 11.0 s, and HS with 30 ms "
    "slots rises from 5.1 s to 9.1 s.",
)
# CVS's growth with the host count.
CVS_PROMOTION = Why(
    "leaves-out",
    '§3.2 says CVS picks the parallel VM with the most packets received "and promotes its '
    "priority\", but not how far: above BOOST, above other VMs' UNDER vCPUs, or within Credit's "
    "order. Read literally (ahead of every non-parallel vCPU) it starves Domain-0, which carries "
    "every packet, and the clusters hang; vsched keeps Credit's order (`cvs_precedence = "
    "\"queue\"`), so a cluster's VMs on different hosts are co-scheduled only when each host's "
    "Credit turn comes, and CVS's time grows with the host count as Credit's does.",
)
# Balance scheduling against Credit.
BS_SETUP = Why(
    "leaves-out",
    "Seed 002 does not say how its BS was built: balance scheduling (Sukwong and Kim, EuroSys'11) "
    "was published on KVM, and the paper's platform is Xen 3.2's Credit. vsched's `balance` is "
    "Credit that keeps a VM's vCPUs in different run queues, which changes little for 4-vCPU VMs "
    'on 8 pCPUs: it is within ±2 % of Credit at every point, so whether its gain is "slight" at '
    "2 hosts and fades after is decided by noise.",
)
# ep: "almost the same".
EP_TYPE = Why(
    "leaves-out",
    "The paper does not say whether its ep clusters' VMs were declared parallel (§5: the type "
    'comes "directly from end users"). As §3.2 describes CVS, a parallel VM is picked '
    '"without any hesitation" and all its vCPUs are co-scheduled whatever its traffic, so '
    "§4.2's \"CVS and HS will gracefully degrade into CREDIT\" for ep holds only if ep's VMs were "
    "not declared parallel (nor does it give ep's NPB class, i.e. how long a run is). vsched "
    "declares every cluster's VMs CON, so CVS and HS co-schedule ep too, and its ep runs are short "
    "(0.3–4 s), so the start and the final reduction weigh: HS's whole-VM turns make 32 hosts 30 % "
    "faster than Credit, and CVS's gangs cost it 5–18 %.",
)


def ratio(vms: str) -> str:
    return f"{vms} ({(int(vms) * 4 + 4) / 8:g})"


def cases(files: dict[str, str]) -> tuple[Case, ...]:
    return tuple(
        Case(x, series, f"seed002/{file}", policy)
        for x, file in files.items()
        for series, policy in POLICIES.items()
    )


def grows_least(series: str) -> claims.Check:
    def check(r: FigureResult) -> Verdict:
        growth = {s: r.value(r.xs[-1], s) / r.value(r.xs[0], s) for s in r.series}
        return Verdict(
            min(growth, key=lambda s: growth[s]) == series,
            f"growth from {r.xs[0]} to {r.xs[-1]} hosts: "
            + ", ".join(f"{s} ×{g:.2f}" for s, g in growth.items()),
        )

    return check


def bs_gain_fades(r: FigureResult) -> Verdict:
    gain = {x: 1 - r.value(x, "BS") / r.value(x, "CREDIT") for x in r.xs}
    holds = gain[r.xs[0]] > 0 and gain[r.xs[-1]] < gain[r.xs[0]]
    return Verdict(
        holds, "BS gain over CREDIT: " + ", ".join(f"{x}: {claims.percent(g)}" for x, g in gain.items())
    )


def kernel_figures(kernel: str) -> tuple[Figure, Figure]:
    if kernel == "ep":
        fig3_claims: tuple[Claim, ...] = (
            Claim("all four perform almost the same", claims.spread_below(SAME), if_fails=EP_TYPE),
        )
        fig4_claims: tuple[Claim, ...] = fig3_claims
    else:
        fig3_claims = (
            Claim("CVS performs best at every host count", claims.lowest("CVS"), if_fails=HS_SETUP),
            Claim(
                "CVS scales best (least growth from 2 to 32 hosts)",
                grows_least("CVS"),
                if_fails=CVS_PROMOTION,
            ),
            Claim("HS is better than BS", claims.ordered(["HS", "BS"])),
            Claim(
                "BS gains a little over CREDIT at 2 hosts; the gain fades with more hosts",
                bs_gain_fades,
                if_fails=BS_SETUP,
            ),
        )
        fig4_claims = (
            Claim("CVS performs best at every ratio", claims.lowest("CVS"), if_fails=HS_SETUP),
            Claim("HS lies between CVS and BS", claims.ordered(["CVS", "HS", "BS"]), if_fails=HS_SETUP),
            Claim(
                "BS's gain over CREDIT is not obvious",
                claims.change_within("BS", "CREDIT", -NOT_OBVIOUS, NOT_OBVIOUS),
                if_fails=BS_SETUP,
            ),
        )
    fig3 = Figure(
        id=f"fig3-{kernel}",
        label=f"Fig. 3 ({kernel})",
        title=f"NPB {kernel}, VCPU:PCPU 2.5, scaling the hosts",
        xlabel="hosts",
        ylabel="mean execution time of the virtual clusters (s)",
        cases=cases({h: f"fig3-{kernel}-hosts-{h}.toml" for h in HOSTS}),
        metric=mean_clusters(),
        claims=fig3_claims,
        kind="line",
    )
    fig4 = Figure(
        id=f"fig4-{kernel}",
        label=f"Fig. 4 ({kernel})",
        title=f"NPB {kernel}, 8 hosts, VMs per host (VCPU:PCPU)",
        xlabel="guest VMs per host (VCPU:PCPU)",
        ylabel="mean execution time of the virtual clusters (s)",
        cases=cases({ratio(v): f"fig4-{kernel}-vms-{v}.toml" for v in VMS_PER_HOST}),
        metric=mean_clusters(),
        claims=fig4_claims,
        kind="line",
    )
    return fig3, fig4


_FIGURES = [kernel_figures(kernel) for kernel in ("lu", "is", "ep")]

PAPER = Paper(
    id="seed002",
    title="Communication-driven scheduling for virtual clusters in cloud (seed 002)",
    reps=10,
    # Quick: 2 seeds of the full runs. A fifth of the iterations would have cost 5 times less, but
    # it changes the orderings (at 8 hosts, lu under cvs-comm beats Credit in full runs and loses
    # to it with a fifth of the iterations), so only the seeds are cut.
    quick_reps=2,
    figures=tuple(f for pair in _FIGURES for f in pair),
    notes=__doc__ or "",
)
