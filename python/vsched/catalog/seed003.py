"""Seed 003: Weng et al., "The Hybrid Scheduling Framework for Virtual Machine Systems"
(VEE'09), §5.2, Figs. 7–9. Dom1, a 4-vCPU guest, runs SPLASH-2 LU (Fig. 7), SPLASH-2 Barnes
(Fig. 8) or a Tomcat web server driven by httperf (Fig. 9) beside Domain-0 (8 vCPUs, weight
256) on a dual quad-core Xeon X5310: 8 pCPUs, Xen 3.0.4. Three series: Dom1 under Xen's
Credit scheduler ("Credit"), and under the hybrid framework typed concurrent ("CON",
co-scheduled) or high-throughput ("HIT", scheduled vCPU by vCPU). We run them as `credit`,
and `hybrid` with `vm.dom1.type` set to CON or HIT.

What §5 leaves open, and our choices:
- **The x-axis.** Our copy of the paper has the figures' captions but not the plots, and the
  text names neither an x-axis nor Dom1's weight; it gives Dom0's weight (256) alone. We plot
  the three series against Dom1's weight, ¼ to 2× Dom0's (64, 128, 256, 512): the weight
  share ω(V_i) is the one parameter of the framework (§2.3–2.4, §3.2), and 256, Xen's
  default, is the point to read if the figures are three bars.
- **What Domain-0 runs.** Not stated. Its 8 vCPUs and weight 256 are Xen's defaults on this
  host, and our scenarios give it nothing to do but its kernel's timer wake-ups and, in
  Fig. 9, the web server's packets. A weight, or a scheduler, only matters to a 4-vCPU guest
  on 8 pCPUs when the other domain competes, so the series nearly tie. (Until issue 17 our
  Dom0 was CPU-bound, a guess that made them differ.)
- **Run times.** The paper states no numbers for Figs. 7–9 (bars only), so there are no
  `paper_values`; the claims are the orderings of §5.2's closing paragraphs.
- **Repetitions.** Not stated; we use 10 seeds (the runs are cheap).
- **The host.** What §5.1 states is modelled: 8 pCPUs on two sockets at the X5310's 1.6 GHz,
  Xen 3.0.4's Credit rules, Dom0's 8 vCPUs and weight 256. Approximated: the X5310's caches
  (pairs of cores sharing a 4 MB L2, no L3) are taken as the `nehalem-2010` era's.

The workload models (each scenario's header has the details): LU as 512 barrier phases of
19.5 ms per thread (n/B = 256 block steps, 2 barriers each), Barnes as 16 phases of 625 ms (4
time steps of 4 barriers; its hashed per-cell locks are left out), both on `runtime =
"pthreads"`: SPLASH-2's POSIX port blocks at its barriers (the paper names no port); \
the web server as `web` at its defaults, 20 s.
"""

from __future__ import annotations

from collections.abc import Callable

from vsched.catalog import claims, stats
from vsched.catalog.model import Case, Claim, Figure, Paper, Row, vm
from vsched.catalog.reasons import Evidence, Measured, Premise, Stated, Why
from vsched.catalog.stats import Estimate
from vsched.runs import Override

# Series as the paper's legend names them: (policy, Dom1's type under the hybrid framework).
# Credit ignores the type; Dom1 stays HIT there, Xen's default.
SERIES = {"Credit": ("credit", "HIT"), "CON": ("hybrid", "CON"), "HIT": ("hybrid", "HIT")}
# Dom1's weight (x-axis): a quarter to twice Dom0's 256 (see the module docstring).
WEIGHTS = ["64", "128", "256", "512"]
XLABEL = "Dom1's weight (Dom0's: 256)"


def overrides(weight: str, kind: str) -> tuple[Override, ...]:
    return (("vm.dom1.weight", int(weight)), ("vm.dom1.type", kind))


def cases(scenario: str) -> tuple[Case, ...]:
    return tuple(
        Case(weight, series, f"seed003/{scenario}", policy, overrides(weight, kind))
        for weight in WEIGHTS
        for series, (policy, kind) in SERIES.items()
    )


def better(winner: str, loser: str, higher_is_better: bool = False) -> claims.Check:
    """`winner` does better than `loser` at every weight (a lower mean time, or a higher mean
    throughput) by the ordering rule: a tie, or a difference within the noise, is not
    "better"."""
    order = [loser, winner] if higher_is_better else [winner, loser]
    return claims.ordered(order)


# ---------------------------------------------------------------------------------------------
# What the reasons measure


def largest_gap(figure: str, a: str, b: str) -> Callable[[Evidence], float]:
    """The largest |a / b − 1| over the weights."""
    return lambda ev: max(
        abs(stats.change(ev.cell(figure, x, a), ev.cell(figure, x, b)).value) for x in WEIGHTS
    )


def dom0_share(row: Row) -> float:
    return float(row["vm.dom0.cpu_share"])


def dom1_waiting(row: Row) -> float:
    """The share of Dom1's lifetime its vCPUs spent runnable but not running."""
    return float(row["vm.dom1.steal_s"]) / (float(row["vm.dom1.vcpus"]) * float(row["sim_s"]))


def at_default_weight(
    figure: str, series: str, metric: Callable[[Row], float]
) -> Callable[[Evidence], Estimate]:
    return lambda ev: ev.mean(figure, "256", series, metric)


# ---------------------------------------------------------------------------------------------
# Why the claims do not hold.

# LU and Barnes (Figs. 7, 8): CON against Credit.
SPLASH2_WAITING = Why(
    "splash2-uncontended",
    "leaves-out",
    "§5 says neither what Dom0's 8 vCPUs run nor how its SPLASH-2 threads wait at a barrier (it "
    "names no port), and both decide CON against Credit. With Xen's default Dom0, idle but for "
    "its timer wake-ups (it uses {dom0} of the host under Credit, LU), little competes with Dom1's "
    "4 vCPUs for the 8 pCPUs: they wait for a pCPU {waiting} of their time under Credit (LU, "
    "weight 256), and their threads block as SPLASH-2's POSIX port does. Credit and CON then stay "
    "within {lu} of each other on LU and {barnes} on Barnes at every weight. Co-scheduling can "
    "only gain where Dom1's vCPUs wait for pCPUs, i.e. beside a Dom0 (or another guest) that "
    "competes for them, and most where waiting threads spin.",
    numbers=(
        Measured(
            "dom0",
            "Dom0's share of the host, Credit, LU, weight 256",
            at_default_weight("fig7", "Credit", dom0_share),
            " %",
            100,
            2,
        ),
        Measured(
            "waiting",
            "Dom1's runnable-not-running share, Credit, LU, weight 256",
            at_default_weight("fig7", "Credit", dom1_waiting),
            " %",
            100,
            2,
        ),
        Measured("lu", "largest |CON / Credit − 1|, LU", largest_gap("fig7", "CON", "Credit"), " %", 100, 2),
        Measured(
            "barnes", "largest |CON / Credit − 1|, Barnes", largest_gap("fig8", "CON", "Credit"), " %", 100, 2
        ),
    ),
    premises=(
        Premise("Dom0 uses under 5 % of the host", lambda v: v["dom0"] < 0.05),
        Premise("Credit and CON stay within 5 % of each other", lambda v: max(v["lu"], v["barnes"]) < 0.05),
    ),
)
# LU and Barnes: CON against HIT.
DOM1_WEIGHT = Why(
    "dom1-weight",
    "leaves-out",
    "§5 gives neither Dom1's weight nor what Dom0's 8 vCPUs run, and they decide whether Dom1's "
    "vCPUs ever wait for a pCPU. With Xen's default Dom0, idle but for its timer wake-ups, they "
    "seldom wait, whatever Dom1's weight: CON and HIT stay within {lu} of each other on LU and "
    "{barnes} on Barnes at every weight. Only a Dom0 that competes for the pCPUs would let "
    "co-scheduling, or the weight, matter.",
    numbers=(
        Measured("lu", "largest |CON / HIT − 1|, LU", largest_gap("fig7", "CON", "HIT"), " %", 100, 2),
        Measured(
            "barnes", "largest |CON / HIT − 1|, Barnes", largest_gap("fig8", "CON", "HIT"), " %", 100, 2
        ),
    ),
    premises=(
        Premise("CON and HIT stay within 5 % of each other", lambda v: max(v["lu"], v["barnes"]) < 0.05),
    ),
)
# The web server (Fig. 9).
WEB_REQUEST_PATH = Why(
    "web-request-path",
    "leaves-out",
    "§5 says neither what Dom0's 8 vCPUs run nor at what rate httperf sent requests (its "
    '"default value" is a single call), and they decide whether a co-scheduled (CON) Dom1 '
    "delays the Dom0 vCPUs that deliver its own packets. vsched routes every request and reply "
    "through Dom0's netback, but with Xen's default Dom0, otherwise idle, and our rate ({rate}) "
    "a Dom0 vCPU always finds a pCPU: CON serves within {con_credit} of Credit and {con_hit} of "
    "HIT at every weight. Approximated: Tomcat's thread pool, which can outnumber the vCPUs, is "
    "one server thread per vCPU.",
    numbers=(
        Stated("rate", "a request every 2 ms per vCPU", "scenarios/papers/seed003/fig9-web.toml"),
        Measured(
            "con_credit",
            "largest |CON / Credit − 1| of the throughput",
            largest_gap("fig9", "CON", "Credit"),
            " %",
            100,
            2,
        ),
        Measured(
            "con_hit",
            "largest |CON / HIT − 1| of the throughput",
            largest_gap("fig9", "CON", "HIT"),
            " %",
            100,
            2,
        ),
    ),
    premises=(
        Premise(
            "the three series serve within 5 % of each other",
            lambda v: max(v["con_credit"], v["con_hit"]) < 0.05,
        ),
    ),
)


def concurrent_claims(workload: str) -> tuple[Claim, ...]:
    """§5.2's closing paragraphs, for a concurrent workload (LU, Barnes): times, lower is better."""
    return (
        Claim(
            f"The performance of the credit scheduler is lower than that of the coscheduling strategy "
            f"for the high concurrent application ({workload}: Credit slower than CON at every weight)",
            better("CON", "Credit"),
            if_fails=SPLASH2_WAITING,
        ),
        Claim(
            f"The hybrid framework performs better when the appropriate strategy is selected "
            f"({workload} is concurrent: CON faster than HIT at every weight)",
            better("CON", "HIT"),
            if_fails=DOM1_WEIGHT,
        ),
    )


CONCURRENT_NOTES = (
    "Dom1's completion time (s), mean over seeds. §5.2 states no values. The claims compare "
    "mean times at every weight: a win must exceed twice the standard error of the difference, "
    "so a tie (the same schedule under two series) or a difference within the seeds' noise is "
    "not a win."
)

FIG7 = Figure(
    id="fig7",
    label="Fig. 7",
    title="LU workload (SPLASH-2 LU, n = 4096, B = 16, 4 threads)",
    xlabel=XLABEL,
    ylabel="LU execution time (s)",
    cases=cases("fig7-lu.toml"),
    metric=vm("dom1", "completion_s"),
    claims=concurrent_claims("LU"),
    kind="bar",
    # Quick: a quarter of LU's block steps (128 phases); the barrier structure and the
    # contention are the same, only the run is shorter.
    quick_overrides=(("vm.dom1.workload.supersteps", 128),),
    notes=CONCURRENT_NOTES + " Quick: 128 of the 512 phases.",
)

FIG8 = Figure(
    id="fig8",
    label="Fig. 8",
    title="Barnes workload (SPLASH-2 Barnes, 262144 bodies, 4 threads)",
    xlabel=XLABEL,
    ylabel="Barnes execution time (s)",
    cases=cases("fig8-barnes.toml"),
    metric=vm("dom1", "completion_s"),
    claims=concurrent_claims("Barnes"),
    kind="bar",
    # Quick: a quarter of each phase's compute; the 16 barriers stay.
    quick_overrides=(("vm.dom1.workload.compute_ms", 156.25),),
    notes=CONCURRENT_NOTES + " Quick: phases of 156.25 ms instead of 625 ms (the 16 barriers stay).",
)

FIG9 = Figure(
    id="fig9",
    label="Fig. 9",
    title="Web server workload (Tomcat measured by httperf)",
    xlabel=XLABEL,
    ylabel="throughput (requests/s)",
    cases=cases("fig9-web.toml"),
    metric=vm("dom1", "throughput_rps"),
    claims=(
        Claim(
            "The coscheduling strategy may deteriorate the performance when the workload is not "
            "concurrent; the framework does better with the appropriate type (web server: HIT's "
            "throughput above CON's at every weight)",
            better("HIT", "CON", higher_is_better=True),
            if_fails=WEB_REQUEST_PATH,
        ),
        Claim(
            "The credit scheduler achieves a good performance for high-throughput workloads, unlike "
            "co-scheduling (web server: Credit's throughput above CON's at every weight)",
            better("Credit", "CON", higher_is_better=True),
            if_fails=WEB_REQUEST_PATH,
        ),
    ),
    kind="bar",
    # Quick: 5 simulated seconds instead of 20 (about 9000 requests instead of 36000).
    quick_overrides=(("run.horizon_s", 5),),
    notes=(
        "Dom1's throughput (requests served per second), mean over seeds; higher is better. The "
        "undisturbed maximum is 4 vCPUs / 2.2 ms = 1818 requests/s. §5.2 states no values. Quick: "
        "5 simulated seconds instead of 20."
    ),
)

PAPER = Paper(
    id="seed003",
    title="The hybrid scheduling framework for virtual machine systems (seed 003)",
    reps=10,
    quick_reps=3,
    figures=(FIG7, FIG8, FIG9),
    notes=__doc__ or "",
)
