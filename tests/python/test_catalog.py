"""The reproduction catalog: every paper's figures refer to scenarios that exist and validate
in both their full and quick versions, the installed package embeds the scenario files as
they are in the checkout, and `vsched reproduce` writes results, figures, a report and claims
that are the same on every run."""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path
from typing import Callable

import pyarrow.parquet as pq
import pytest

import vsched
from vsched import _core, catalog, reproduce
from vsched.catalog import claims as checks
from vsched.catalog.model import AtLeast, Case, Claim, Figure, FigureResult, Paper, last_vm
from vsched.catalog.reasons import PLACEHOLDER, Evidence, Measured, Premise, Why
from vsched.catalog.stats import Outcome
from vsched.runs import Store, run_jobs

from helpers import CliResult

Cli = Callable[..., CliResult]
PAPERS_DIR = Path(__file__).resolve().parents[2] / "scenarios" / "papers"
FIGURES = [(paper_id, figure) for paper_id in catalog.PAPER_IDS for figure in catalog.load(paper_id).figures]


def workloads_by_file() -> dict[str, list[dict[str, object]]]:
    """Every workload table (VMs and virtual clusters) of every paper scenario, by file, with
    the scenario's header (its first paragraph) under "header"."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python < 3.11
        import tomli as tomllib

    found: dict[str, list[dict[str, object]]] = {}
    for path in sorted(PAPERS_DIR.glob("*/*.toml")):
        text = path.read_text()
        doc = tomllib.loads(text)
        tables = [vm["workload"] for vm in doc.get("vm", []) + doc.get("virtual_cluster", [])]
        found[f"{path.parent.name}/{path.name}"] = [
            {**t, "header": text.split("\n#\n", 1)[0]} for t in tables
        ]
    return found


def test_every_splash2_program_runs_on_pthreads_in_every_paper() -> None:
    # SPLASH-2's POSIX port builds its barrier from a mutex and a condition variable; no seed
    # paper says its threads spin, so every paper's SPLASH-2 program is modelled alike.
    splash2 = {
        name: [t for t in tables if t["kind"] == "bsp"]
        for name, tables in workloads_by_file().items()
        if tables and "SPLASH-2" in str(tables[0]["header"])
    }
    assert {"seed003/fig7-lu.toml", "seed004/lu-solo-con.toml", "seed004/lu-dual-con.toml"} <= set(splash2)
    assert all(t.get("runtime") == "pthreads" and "wait" not in t for ts in splash2.values() for t in ts), (
        splash2
    )


def test_every_parallel_workload_names_its_runtime_and_none_overrides_it() -> None:
    # No seed paper states how its threads wait, so no scenario keeps a `wait` override; every
    # parallel program names the runtime its paper used (or our choice where it is silent).
    parallel = {"bsp", "npb-ep", "npb-is", "npb-lu", "npb-cg"}
    for name, tables in workloads_by_file().items():
        for t in tables:
            assert "wait" not in t and "spin_limit_us" not in t, name
            if t["kind"] in parallel:
                assert t.get("runtime") in {"pthreads", "libgomp", "iomp", "openmpi", "mpich2"}, name
            if str(t["kind"]).startswith("npb-"):
                assert t["runtime"] == "openmpi", name


def test_the_package_embeds_every_paper_scenario_as_it_is_on_disk() -> None:
    on_disk = {
        p.relative_to(PAPERS_DIR).as_posix(): p.read_text(encoding="utf-8")
        for p in PAPERS_DIR.rglob("*.toml")
    }
    assert _core.paper_scenarios() == on_disk


@pytest.mark.parametrize("paper_id", catalog.PAPER_IDS)
def test_every_paper_has_figures_with_claims(paper_id: str) -> None:
    paper: Paper = catalog.load(paper_id)
    assert paper.id == paper_id and paper.figures and 1 <= paper.quick_reps <= paper.reps
    assert len({f.id for f in paper.figures}) == len(paper.figures)
    for figure in paper.figures:
        assert figure.claims, f"{figure.label} states no claim"
        assert len(set(figure.cases)) == len(figure.cases)
        assert {(c.x, c.series) for c in figure.cases} >= set(figure.paper_values)


@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
@pytest.mark.parametrize(("paper_id", "figure"), FIGURES, ids=[f"{p}-{f.id}" for p, f in FIGURES])
def test_every_case_of_every_figure_validates(paper_id: str, figure: Figure, quick: bool) -> None:
    for case in figure.cases:
        job = catalog.case_jobs(figure, case, 1, quick)[0]
        vsched.validate(job.text)
        if case.policy is not None:
            assert case.policy in {p["name"] for p in vsched.policies()}


def test_reproduce_writes_results_figures_report_and_claims_the_same_each_time(
    cli: Cli, tmp_path: Path
) -> None:
    # Seed 002's ep figure, quick, 2 seeds: 20 short runs.
    args = ["reproduce", "seed002", "--figure", "fig3-ep", "--quick", "--reps", "2", "--jobs", "2", "--json"]
    first = cli(*args, "--out", tmp_path / "a", "--markdown", tmp_path / "doc.md")
    assert first.exit_code == 0, first.stderr
    claims = json.loads(first.stdout)["claims"]
    assert [c["figure"] for c in claims] == ["Fig. 3 (ep)"]
    assert set(claims[0]) == {"paper", "figure", "claim", "verdict", "holds", "sim", "paper_value", "why"}
    assert claims[0]["verdict"] in {o.value for o in Outcome} and "largest difference" in claims[0]["sim"]
    rows = pq.read_table(tmp_path / "a" / "results.parquet").to_pylist()
    assert len(rows) == 5 * 4 * 2  # host counts x policies x seeds
    assert {r["policy"] for r in rows} == {"credit", "balance", "hybrid", "cvs-comm"}
    assert all(r["paper"] == "seed002" and r["vc.vc1.completion_s"] > 0 for r in rows)
    for name in (
        "report.md",
        "report.html",
        "claims.json",
        "figures/seed002-fig3-ep.png",
        "figures/seed002-fig3-ep.svg",
    ):
        assert (tmp_path / "a" / name).is_file(), name
    report = (tmp_path / "a" / "report.md").read_text()
    assert "## Claims: " in report and "unclassified: " in report and "hold within noise" in report
    assert "![seed002 Fig. 3 (ep)](figures/seed002-fig3-ep.png)" in report
    assert f"]({Path('a') / 'figures' / 'seed002-fig3-ep.png'})" in (tmp_path / "doc.md").read_text()

    second = cli(*args, "--out", tmp_path / "b")
    assert second.exit_code == 0, second.stderr
    for name in ("claims.json", "figures/seed002-fig3-ep.svg", "figures/seed002-fig3-ep.png"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    # The report names the command that made it (--out and --markdown differ); otherwise it is the same.
    a, b = (re.sub(r"Generated by `[^`]*`", "", (tmp_path / d / "report.md").read_text()) for d in "ab")
    assert a == b and "Fig. 3 (ep)" in a


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["seed009"],
            "error: paper: expected one of seed000, seed001, seed002, seed003, seed004 or all, got 'seed009'",
        ),
        (["seed002", "--figure", "fig9"], "error: --figure: no figure 'fig9' in seed002"),
        (["seed002", "--reps", "0"], "error: --reps: expected at least 1, got 0"),
        (["seed002", "--backend", "slurm"], "error: --backend: expected local or ray, got 'slurm'"),
    ],
)
def test_reproduce_names_a_bad_argument(cli: Cli, tmp_path: Path, args: list[str], message: str) -> None:
    result = cli("reproduce", *args, "--out", tmp_path)
    assert result.exit_code == 2
    assert len(result.stderr_lines) == 1 and result.stderr_lines[0].startswith(message)


def reduced(paper_id: str, figure_id: str, reps: int, tmp_path: Path) -> FigureResult:
    """One figure of the quick catalog with `reps` seeds, run here (2 worker processes)."""
    settings = reproduce.Settings(reps=reps, quick=True, figures=(figure_id,))
    papers = reproduce.select([paper_id])
    with Store(tmp_path / "runs.jsonl") as store:
        run_jobs(reproduce.plan(papers, settings), store, workers=2)
        (outcome,) = reproduce.evaluate(papers, settings, store.rows)
    return outcome.result


def test_reduced_seed000_fig2_vds_is_faster_than_co_scheduling(tmp_path: Path) -> None:
    # Seed 000 §5.3: VDS improves the application's completion time over Credit and is better
    # than Co_scheduling (its text; its percentages say the opposite). Quick: 20 of 50
    # supersteps, 12 seeds (108 runs, a few seconds). VDS is about 25-30 % faster than
    # Co_scheduling against seed-to-seed deviations under 2 % of the means, so a 10 % margin
    # tests that ordering without riding on noise.
    # Not asserted: VDS faster than Credit. It held by 25-30 % while `vds` shared CPU per
    # domain; since issue 16 it shares as Xen's csched_acct does (weight x active vCPUs),
    # and VDS ties Credit within about 3 % either way (5.24 / 5.39 s, 17.14 / 16.96 s,
    # 39.90 / 39.75 s): the claim rested on the fairness model, as the fidelity audit
    # predicted. Co_scheduling faster than Credit does not hold either (dom0 costs `cosched`
    # whole rounds; docs/reproductions.md).
    r = reduced("seed000", "fig2", 12, tmp_path)
    assert r.xs == ["2000", "3000", "4000"]
    for x in r.xs:
        assert r.mean(x, "VDS") < 0.9 * r.mean(x, "Co_scheduling"), x


def test_reduced_seed004_fig4_partial_and_boost_co_scheduling_beat_cs_and_cds_in_dual_con(
    tmp_path: Path,
) -> None:
    # Seed 004 §VI-C, Fig. 4: with two concurrent domains, CS and CDS take almost twice
    # Credit's time, PCS and BCS about half of CS's and CDS's, and PCS and BCS keep the two
    # domains' times close (differences 12 % and 3 % against CS's 16 % and CDS's 39 %). Quick:
    # the full LU runs, 4 seeds. Margins: "almost 1X" is read as at least 1.5x (seed-to-seed
    # deviation is a few %); "close" as a domain difference under 5 % for PCS and BCS.
    # Not asserted any more: CS and CDS being the unfair ones (over 10 %). That held (about
    # 30 %) while LU's barrier was modelled as spinning; since issue 16 it blocks, as
    # SPLASH-2's POSIX barrier does, and on this quick run CS's difference is about 10 % and
    # CDS's about 4 %: the paper's claim does not hold, and docs/reproductions.md says so.
    # The solo-CON ordering (every scheme faster than Credit) does not hold in vsched: a solo
    # CON domain never contends for the 4 pCPUs, so all five policies tie.
    r = reduced("seed004", "fig4", 4, tmp_path)
    dual = ["dual lu1", "dual lu2"]
    for x in dual:
        for fast in ("PCS", "BCS"):
            for slow in ("CS", "CDS"):
                assert r.mean(x, slow) > 1.5 * r.mean(x, fast), (x, fast, slow)
        for slow in ("CS", "CDS"):
            assert r.mean(x, slow) > 1.5 * r.mean(x, "Credit"), (x, slow)

    def difference(series: str) -> float:
        lu1, lu2 = r.samples["dual lu1", series], r.samples["dual lu2", series]
        return statistics.fmean(abs(a - b) / min(a, b) for a, b in zip(lu1, lu2))

    assert max(difference("PCS"), difference("BCS")) < 0.05


def test_a_why_of_an_unknown_kind_without_text_or_with_a_typed_number_is_refused() -> None:
    kinds = "contradicts, leaves-out, lacks-mechanism"
    with pytest.raises(ValueError, match=f"Why.kind: expected one of {kinds}, got 'unclear'"):
        Why("vague", "unclear", "The paper is vague.")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Why.text: empty"):
        Why("empty", "leaves-out", "  ")
    # A measured quantity typed into the text goes stale: every number is a placeholder.
    with pytest.raises(ValueError, match="Why.text: a number outside a placeholder"):
        Why("typed", "leaves-out", "CDS launches about 80 times a second.")
    with pytest.raises(ValueError, match=r"Why.text: placeholder \{rate\} has no number"):
        Why("unfilled", "leaves-out", "CDS launches {rate} times a second.")
    # Quotations, sections, figures, releases and setups may hold digits.
    Why("quoted", "contradicts", '§5.3 says "17.3 %" in Fig. 2 on Xen 4.1.2 with 8 pCPUs.')


COMMITTED = Path(__file__).parents[2] / "docs" / "reproduction" / "claims.json"


def committed_claims() -> list[dict[str, object]]:
    claims: list[dict[str, object]] = json.loads(COMMITTED.read_text(encoding="utf-8"))["claims"]
    assert claims
    return claims


def test_every_claim_failing_in_the_committed_reproduction_has_a_reason() -> None:
    # docs/reproduction/claims.json is the last full `vsched reproduce all`: each claim that did
    # not hold there must say why in the catalog (a claim renamed since is caught too).
    reasons = {(p, f.label, c.text): c.if_fails for p, f in FIGURES for c in f.claims}
    failing = [c for c in committed_claims() if c["verdict"] == Outcome.FAILS.value]
    assert failing
    for c in failing:
        key = (c["paper"], c["figure"], c["claim"])
        assert key in reasons, f"claim no longer in the catalog: {key}"
        assert reasons[key] is not None, f"no reason for a failing claim: {key}"
        assert c["why"] is not None, f"the committed reproduction has no reason for {key}"


def test_no_reason_of_the_committed_reproduction_is_contradicted_by_its_runs() -> None:
    # The check over the stored runs: every reason the committed reproduction gives for a claim
    # that does not hold had its numbers measured from those runs; each of its premises about
    # our runs, re-checked here with the catalog's current premises against the stored numbers,
    # must hold, and its text must be the catalog's current template filled with those numbers
    # (a reason edited since the reproduction was made is caught: run it again).
    whys = {(p, c.if_fails.id): c.if_fails for p, f in FIGURES for c in f.claims if c.if_fails is not None}
    checked = 0
    for claim in committed_claims():
        why = claim["why"]
        if why is None:
            continue
        assert isinstance(why, dict)
        key = (claim["paper"], why["id"])
        assert key in whys, f"reason no longer in the catalog: {key}"
        current = whys[key]
        numbers = why["numbers"]
        assert set(numbers) == {n.name for n in current.numbers}, f"{key}: its numbers changed"
        values = {name: n["measured"] for name, n in numbers.items() if isinstance(n.get("measured"), float)}
        for premise in current.premises:
            if len(values) == sum("measured" in n for n in numbers.values()):
                assert premise.check(values), f"{key}: the runs contradict the premise '{premise.text}'"
        shown = {name: n.get("shown", n.get("stated")) for name, n in numbers.items()}

        def fill(m: re.Match[str], shown: dict[str, object] = shown) -> str:
            return str(shown[m.group(1)])

        filled = PLACEHOLDER.sub(fill, " ".join(current.text.split()))
        assert why["text"] == filled, (
            f"{key}: the committed text is not the catalog's template filled with the stored numbers"
        )
        checked += 1
    assert checked


def test_no_figure_of_the_committed_reproduction_is_left_without_a_decided_claim() -> None:
    # A figure whose every claim cannot be decided measured nothing: its metric reads no run,
    # as seed001's total time did while it took the last completion over every VM, Xen's
    # default Domain-0 (which never finishes) included.
    by_figure: dict[tuple[object, object], list[bool]] = {}
    for c in committed_claims():
        by_figure.setdefault((c["paper"], c["figure"]), []).append(c["verdict"] == Outcome.UNDECIDED.value)
    assert [figure for figure, undecided in by_figure.items() if all(undecided)] == []


def test_the_last_vm_is_the_last_guest_the_driver_domain_left_out() -> None:
    row: dict[str, object] = {
        "sim_s": 30.0,
        "vm.dom0.workload": "dom0",
        "vm.dom0.completion_s": None,
        "vm.vm1.workload": "kernbench",
        "vm.vm1.completion_s": 1.5,
        "vm.vm2.workload": "kernbench",
        "vm.vm2.completion_s": 2.0,
    }
    assert last_vm()(row) == 2.0
    assert last_vm(prefix="vm1")(row) == 1.5
    row["vm.vm2.completion_s"] = None
    assert last_vm()(row) is None, "a guest with no completion and no sign of unfinished work has no time"
    row["vm.vm2.finished"] = False
    assert last_vm()(row) == AtLeast(30.0), "an unfinished guest took at least the run's length"
    assert last_vm(prefix="absent")(row) is None


def two_point_figure(claims: tuple[Claim, ...], series: tuple[str, ...] = ("A", "B")) -> Figure:
    return Figure(
        id="figx",
        label="Fig. X",
        title="a test figure",
        xlabel="x",
        ylabel="y",
        cases=tuple(Case(x, s, "seed002/fig3-ep-hosts-2.toml") for x in ("1", "2") for s in series),
        metric=lambda row: None,
        claims=claims,
    )


def test_the_report_states_each_reason_once_and_links_the_claims_to_it() -> None:
    # Two points, two series, values given (no run): A is clearly below B at "1" and clearly
    # above at "2". Four claims: one holds, two do not (both for the same reason), one does
    # not with no reason (unclassified).
    reason = Why(
        "a-wins-twice",
        "contradicts",
        'The paper says "A wins" (§5.3) and "B wins" (§5.4); here A is at {a} at the first point.',
        numbers=(Measured("a", "A's mean at 1", lambda ev: ev.cell("figx", "1", "A"), " s"),),
        premises=(Premise("A is below one second at point 1", lambda v: v["a"] < 1.0),),
    )
    figure = two_point_figure(
        (
            Claim("A is below B at 1", checks.ordered(["A", "B"], at=["1"]), if_fails=reason),
            Claim("A is below B everywhere", checks.ordered(["A", "B"]), if_fails=reason),
            Claim("A is below B at 2", checks.ordered(["A", "B"], at=["2"]), if_fails=reason),
            Claim("B is below A everywhere", checks.ordered(["B", "A"])),
        )
    )
    paper = Paper(id="seed002", title="a test paper", reps=2, quick_reps=1, figures=(figure,))
    samples = {("1", "A"): [1.0, 1.1], ("1", "B"): [2.0, 2.1], ("2", "A"): [3.0, 3.1], ("2", "B"): [2.0, 2.1]}
    result = FigureResult(figure, samples)
    found = reproduce.claim_results(paper, figure, result, reproduce.renderer(Evidence({"figx": result})))
    assert [c.outcome for c in found] == [Outcome.HOLDS, Outcome.FAILS, Outcome.FAILS, Outcome.FAILS]
    as_json = [json.loads(json.dumps(c.as_json())) for c in found]
    assert as_json[0]["why"] is None and as_json[3]["why"] is None
    assert as_json[1]["why"]["text"] == (
        'The paper says "A wins" (§5.3) and "B wins" (§5.4); here A is at 1.05 s at the first point.'
    )
    assert as_json[1]["why"]["premises"] == [{"text": "A is below one second at point 1", "holds": False}]

    outcome = reproduce.FigureOutcome(paper, figure, result, found)
    report = reproduce.markdown([outcome], reproduce.Settings(), "vsched reproduce seed002", "figures")
    assert (
        "## Claims: 1 hold robustly, 0 hold within noise, 3 do not hold, 0 cannot be decided (of 4)" in report
    )
    assert "unclassified: 1); reasons the runs contradict: 1" in report
    assert report.count("here A is at 1.05 s") == 1, "a reason is stated once"
    assert report.count("(#seed002-a-wins-twice)") == 4, (
        "and linked from the table and the figure, twice each"
    )
    assert "**contradicted by the runs**" in report
    table = [line for line in report.splitlines() if line.startswith("| seed002 | Fig. X |")]
    assert table[0].endswith("| holds robustly | A < B at all 1 points | — | — |")
    assert table[3].endswith("| unclassified |")


def test_runs_that_never_finish_decide_a_claim_about_speed_when_their_bound_is_enough() -> None:
    # C's runs at "2" did not finish: their time is at least the horizon (100 s). That is
    # enough to say C is slower than B (2 s) there, not whether it is slower than D, whose
    # runs took 150 s. A claim reading a value no run produced cannot be decided.
    figure = two_point_figure(
        (
            Claim("C is below B at 1", checks.ordered(["C", "B"], at=["1"])),
            Claim("C is below B everywhere", checks.ordered(["C", "B"])),
            Claim("B is below C at 2", checks.ordered(["B", "C"], at=["2"])),
            Claim("C is below D at 2", checks.ordered(["C", "D"], at=["2"])),
            Claim("A is lowest everywhere", checks.lowest("A")),
        ),
        series=("A", "B", "C", "D"),
    )
    samples = {
        ("1", "A"): [1.0, 1.1],
        ("1", "B"): [2.0, 2.1],
        ("1", "C"): [1.5, 1.6],
        ("1", "D"): [1.5, 1.6],
        ("2", "A"): [1.0, 1.1],
        ("2", "B"): [2.0, 2.1],
        ("2", "C"): [],
        ("2", "D"): [150.0, 151.0],
    }
    result = FigureResult(figure, samples, bounds={("2", "C"): [100.0, 100.0]}, missing={("1", "D"): 0})
    verdicts = [verdict for _, verdict in reproduce.check(figure, result)]
    assert [v.outcome for v in verdicts] == [
        Outcome.HOLDS,
        Outcome.FAILS,
        Outcome.HOLDS,
        Outcome.UNDECIDED,
        Outcome.HOLDS,
    ]
    assert "≥ 100 ± 0 (2 of 2 runs unfinished)" in verdicts[1].sim

    missing = FigureResult(
        figure, {k: v for k, v in samples.items() if k != ("2", "B")}, missing={("2", "B"): 2}
    )
    assert [v.outcome for _, v in reproduce.check(figure, missing)][1] is Outcome.UNDECIDED


def test_a_full_runs_report_leaves_out_what_the_quick_version_shortens() -> None:
    from vsched.reproduce import figure_notes

    notes = "Three 6-vCPU VMs. Quick: 5 seeds instead of 20, same work."
    assert figure_notes(notes, quick=False) == "Three 6-vCPU VMs."
    assert figure_notes(notes, quick=True) == notes
    assert figure_notes("Quick version: 20 supersteps instead of 50.", quick=False) == ""


def test_the_committed_quick_and_full_reproductions_agree_on_every_verdict_not_within_noise() -> None:
    # docs/reproduction/claims-quick.json is `vsched reproduce all --quick` on the same commit
    # as claims.json: the quick settings (fewer seeds, shorter runs) may leave a verdict within
    # noise, never undecided where the full one is decided, never turned round.
    quick = json.loads((COMMITTED.parent / "claims-quick.json").read_text(encoding="utf-8"))["claims"]
    assert len(quick) == len(committed_claims())
    assert reproduce.disagreements(quick, committed_claims()) == []


def test_a_quick_verdict_other_than_the_full_one_and_not_within_noise_is_a_disagreement() -> None:
    def claim(verdict: Outcome) -> dict[str, object]:
        return {"paper": "seed000", "figure": "Fig. 2", "claim": "A", "verdict": verdict.value}

    assert reproduce.disagreements([claim(Outcome.HOLDS)], [claim(Outcome.NOISE)]) == []
    assert reproduce.disagreements([claim(Outcome.FAILS)], [claim(Outcome.FAILS)]) == []
    assert reproduce.disagreements([claim(Outcome.HOLDS)], [claim(Outcome.FAILS)]) == [
        "seed000 Fig. 2: A: quick holds robustly, full does not hold"
    ]
    assert reproduce.disagreements([claim(Outcome.FAILS)], [claim(Outcome.HOLDS)]) != []
    assert reproduce.disagreements([claim(Outcome.UNDECIDED)], [claim(Outcome.FAILS)]) != []
    assert reproduce.disagreements([claim(Outcome.NOISE)], [claim(Outcome.HOLDS)]) == []
