"""`vsched reproduce`: run the catalog, check the papers' claims, write results, figures and a
report. The pieces: `plan` lists the jobs of the chosen papers, `runs.run_jobs` runs those not
stored yet, `evaluate` turns the rows into figure values and verdicts, `write_outputs` draws
the figures and writes the results and the report.

Outputs in the chosen directory: `runs.jsonl` (the store of finished runs, which makes a rerun
resume), `results.parquet` (one row per run: paper, job, every metric), `figures/<paper>-<figure>.png`
and `.svg`, `report.md`, `report.html` and `claims.json`. The same rows give the same files,
byte for byte (wall-clock times are left out of the report).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from vsched import catalog
from vsched.catalog.claims import SAME
from vsched.catalog.model import Claim, Figure, FigureResult, Paper, Row, Verdict
from vsched.catalog.reasons import WHY_KINDS, WHY_LABELS, Evidence, Reason, Stated, Why
from vsched.catalog.stats import ABOUT, MEANINGS, OUTCOMES, Outcome
from vsched.runs import Job, write_parquet


@dataclass(frozen=True)
class Settings:
    """How the catalog is run: repetitions per case (None: each paper's own), quick or full."""

    reps: int | None = None
    quick: bool = False
    figures: tuple[str, ...] = ()
    """Only these figures (by id, e.g. "fig4"); empty: all."""

    def figures_of(self, paper: Paper) -> list[Figure]:
        return [f for f in paper.figures if not self.figures or f.id in self.figures]

    def reps_for(self, paper: Paper) -> int:
        if self.reps is not None:
            return self.reps
        return paper.quick_reps if self.quick else paper.reps


@dataclass
class ClaimResult:
    paper: str
    figure: str
    claim: str
    outcome: Outcome
    sim: str
    paper_value: str
    reason: Reason | None = None
    """Why the claim does not hold, rendered from the runs (None when it holds, or when it
    has no reason: unclassified)."""

    @property
    def holds(self) -> bool:
        """Holds robustly."""
        return self.outcome is Outcome.HOLDS

    def as_json(self) -> dict[str, object]:
        return {
            "paper": self.paper,
            "figure": self.figure,
            "claim": self.claim,
            "verdict": self.outcome.value,
            "holds": self.holds,
            "sim": self.sim,
            "paper_value": self.paper_value,
            "why": None if self.reason is None else self.reason.as_json(),
        }


@dataclass
class FigureOutcome:
    paper: Paper
    figure: Figure
    result: FigureResult
    claims: list[ClaimResult]


def select(names: Sequence[str]) -> list[Paper]:
    """The papers named (ids such as seed000, or "all")."""
    ids: list[str] = []
    for name in names or ["all"]:
        for paper_id in catalog.PAPER_IDS if name == "all" else [name]:
            if paper_id not in ids:
                ids.append(paper_id)
    return [catalog.load(paper_id) for paper_id in ids]


def check_figures(papers: Sequence[Paper], figure_ids: Sequence[str]) -> None:
    """Raise ValueError naming the first of `figure_ids` that no paper of `papers` has."""
    known = sorted({f.id for p in papers for f in p.figures})
    for name in figure_ids:
        if name not in known:
            within = ", ".join(p.id for p in papers)
            raise ValueError(f"--figure: no figure '{name}' in {within} (expected one of {', '.join(known)})")


def evidence_of(figures: Sequence[Figure]) -> list[Figure]:
    """The evidence runs the reasons of `figures`' claims measure (each once)."""
    found: dict[str, Figure] = {}
    for figure in figures:
        for claim in figure.claims:
            for extra in claim.if_fails.evidence if claim.if_fails is not None else ():
                found.setdefault(extra.id, extra)
    return list(found.values())


def plan(papers: Sequence[Paper], settings: Settings) -> list[Job]:
    """The jobs of the chosen figures and of the evidence runs their reasons measure."""
    return [
        job
        for paper in papers
        for figure in (*settings.figures_of(paper), *evidence_of(settings.figures_of(paper)))
        for job in catalog.figure_jobs(figure, settings.reps_for(paper), settings.quick)
    ]


def check(figure: Figure, result: FigureResult) -> list[tuple[Claim, Verdict]]:
    """Each claim's verdict (a claim whose check cannot compute cannot be decided, and says
    why)."""
    verdicts = []
    for claim in figure.claims:
        try:
            verdict = claim.check(result)
        except (ValueError, ZeroDivisionError) as error:
            verdict = Verdict(Outcome.UNDECIDED, f"could not be checked: {error}")
        verdicts.append((claim, verdict))
    return verdicts


def claim_results(
    paper: Paper, figure: Figure, result: FigureResult, render: Callable[[Why], Reason] | None = None
) -> list[ClaimResult]:
    """Each claim's verdict, with its reason (`Claim.if_fails`, rendered by `render`) when it
    does not hold."""
    found = []
    for claim, verdict in check(figure, result):
        reason = None
        if verdict.outcome is Outcome.FAILS and claim.if_fails is not None and render is not None:
            reason = render(claim.if_fails)
        found.append(
            ClaimResult(
                paper.id, figure.label, claim.text, verdict.outcome, verdict.sim, claim.paper_value, reason
            )
        )
    return found


def renderer(evidence: Evidence) -> Callable[[Why], Reason]:
    """Render reasons against `evidence`, each once."""
    rendered: dict[str, Reason] = {}

    def render(why: Why) -> Reason:
        if why.id not in rendered:
            rendered[why.id] = why.render(evidence)
        return rendered[why.id]

    return render


def evaluate(papers: Sequence[Paper], settings: Settings, rows: dict[str, Row]) -> list[FigureOutcome]:
    outcomes = []
    for paper in papers:
        reps = settings.reps_for(paper)
        results = {
            figure.id: catalog.figure_result(figure, reps, settings.quick, rows)
            for figure in (*settings.figures_of(paper), *evidence_of(settings.figures_of(paper)))
        }
        render = renderer(Evidence(results))
        for figure in settings.figures_of(paper):
            result = results[figure.id]
            outcomes.append(
                FigureOutcome(paper, figure, result, claim_results(paper, figure, result, render))
            )
    return outcomes


def disagreements(quick: Sequence[dict[str, object]], full: Sequence[dict[str, object]]) -> list[str]:
    """The claims on which a quick and a full reproduction (their claims.json entries) reach
    different verdicts, neither of them within noise: what the quick settings must not do.
    Fewer seeds may leave a comparison within noise; they must not leave a claim undecided
    that the full catalog decides, nor turn it round."""
    noise = Outcome.NOISE.value
    full_verdicts = {(c["paper"], c["figure"], c["claim"]): c["verdict"] for c in full}
    found = []
    for c in quick:
        key = (c["paper"], c["figure"], c["claim"])
        other = full_verdicts.get(key)
        if other is not None and noise not in (c["verdict"], other) and c["verdict"] != other:
            found.append(f"{key[0]} {key[1]}: {key[2]}: quick {c['verdict']}, full {other}")
    return found


# ---------------------------------------------------------------------------------------------
# Writing the outputs


def _cell(outcome: FigureOutcome, x: str, series: str) -> str:
    """A case in the figure's table: mean ± standard deviation over the seeds (a standard
    deviation alone for "std" figures); "≥" and the unfinished runs when some did not finish."""
    result = outcome.result
    estimate = result.estimate(x, series)
    if not estimate.known:
        unfinished = result.unfinished(x, series)
        return f"— ({unfinished} runs unfinished)" if unfinished else "—"
    value = estimate.value
    text = f"{value:.3g}" if outcome.figure.stat == "std" else f"{value:.3g} ± {result.std(x, series):.2g}"
    unfinished = result.unfinished(x, series)
    if unfinished:
        total = len(result.seeds(x, series)) + unfinished
        text = f"≥ {text} ({unfinished} of {total} runs unfinished, counted at the horizon)"
    paper = outcome.figure.paper_values.get((x, series))
    return f"{text} (paper {paper:g}{outcome.figure.paper_unit})" if paper is not None else text


def figure_notes(notes: str, quick: bool) -> str:
    """A figure's notes for this run: what the quick version shortens (the notes' last
    sentences, from "Quick:" or "Quick version:") only in a quick run."""
    if quick:
        return notes.strip()
    return re.split(r"\s*\bQuick(?: version)?:", notes, maxsplit=1)[0].strip()


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def verdict_counts(claims: Sequence[ClaimResult]) -> dict[Outcome, int]:
    return {outcome: sum(c.outcome is outcome for c in claims) for outcome in OUTCOMES}


def headline(claims: Sequence[ClaimResult]) -> str:
    """The verdicts in one line: "38 hold robustly, 5 within noise, 80 do not hold, 2 cannot be
    decided (of 125)"."""
    counts = verdict_counts(claims)
    return (
        f"{counts[Outcome.HOLDS]} hold robustly, {counts[Outcome.NOISE]} hold within noise, "
        f"{counts[Outcome.FAILS]} do not hold, {counts[Outcome.UNDECIDED]} cannot be decided "
        f"(of {len(claims)})"
    )


def why_summary(claims: Sequence[ClaimResult]) -> str:
    """How many claims do not hold, by the kind of their reason, how many have none, and how
    many reasons the runs contradict."""
    failing = [c for c in claims if c.outcome is Outcome.FAILS]
    counts = {
        kind: sum(c.reason is not None and c.reason.why.kind == kind for c in failing) for kind in WHY_KINDS
    }
    unclassified = sum(c.reason is None for c in failing)
    by_kind = "; ".join(f"{WHY_LABELS[kind]}: {n}" for kind, n in counts.items())
    contradicted = {c.reason.why.id for c in failing if c.reason is not None and c.reason.contradicted}
    return (
        f"{len(failing)} do not hold ({by_kind}; unclassified: {unclassified}); "
        f"reasons the runs contradict: {len(contradicted)}"
    )


def anchor(paper: str, why_id: str) -> str:
    return f"{paper}-{why_id}"


def _why_link(c: ClaimResult) -> str:
    """The reason of a claim that does not hold, as a link to where it is stated ("" for the
    others, "unclassified" for one without a reason)."""
    if c.outcome is not Outcome.FAILS:
        return ""
    if c.reason is None:
        return "unclassified"
    return f"[{c.reason.why.id}](#{anchor(c.paper, c.reason.why.id)}) (*{c.reason.why.label}*)"


def reason_lines(paper: str, reason: Reason) -> list[str]:
    """A reason stated once: its text, the numbers it rests on, and its premises."""
    why = reason.why
    lines = [f'- <a id="{anchor(paper, why.id)}"></a>**{why.id}** (*{why.label}*): {reason.text}']
    rests = [
        f"{reason.shown[n.name]} ({n.source})"
        if isinstance(n, Stated)
        else f"{n.what}: {reason.shown[n.name]}"
        for n in why.numbers
    ]
    if rests:
        lines.append("    - rests on: " + "; ".join(rests))
    for premise in reason.premises:
        mark = {
            True: "borne out by the runs",
            False: "**contradicted by the runs**",
            None: "not checked (no value)",
        }
        lines.append(f"    - premise: {premise.text} — {mark[premise.holds]}")
    if reason.not_measured:
        lines.append("    - not measured in this reproduction: needs " + ", ".join(reason.not_measured))
    return lines


def markdown(outcomes: Sequence[FigureOutcome], settings: Settings, command: str, figures_dir: str) -> str:
    """The report: the verdicts per paper and the claims table, then per paper its reasons
    (each stated once) and per figure the plot, our values (with the paper's in brackets where
    it gives them) and each claim's verdict."""
    claims = [c for o in outcomes for c in o.claims]
    papers = list(dict.fromkeys(o.paper.id for o in outcomes))
    lines = [
        "# Reproductions of the seed papers",
        "",
        f"Generated by `{command}`. "
        + (
            "Quick version: fewer repetitions and shorter runs (each figure says what it shortens). "
            if settings.quick
            else ""
        )
        + "Repetitions per case: "
        + ", ".join(f"{p} {settings.reps_for(catalog.load(p))}" for p in papers)
        + ". Every value is ours (the figure's statistic over the seeds, "
        "± their standard deviation for means) "
        "unless marked as the paper's.",
        "",
        f"## Claims: {headline(claims)}",
        "",
        "| paper | " + " | ".join(o.value for o in OUTCOMES) + " | claims |",
        "|---" * (len(OUTCOMES) + 2) + "|",
    ]
    for paper_id in papers:
        mine = [c for c in claims if c.paper == paper_id]
        counts = verdict_counts(mine)
        lines.append(f"| {paper_id} | " + " | ".join(str(counts[o]) for o in OUTCOMES) + f" | {len(mine)} |")
    totals = verdict_counts(claims)
    same, about = 100 * SAME, 100 * ABOUT
    lines += [
        "| all | " + " | ".join(str(totals[o]) for o in OUTCOMES) + f" | {len(claims)} |",
        "",
        "One rule decides every verdict, for every paper (`python/vsched/catalog/stats.py`): a claim "
        + "; ".join(f"*{o.value}* when {MEANINGS[o]}" for o in OUTCOMES)
        + f'. An ordering ("A is faster than B") is decided by the difference of the two means, '
        f"which must exceed {same:g} % of the larger (the paper's own margin where it states one: less "
        "is a tie to a reader of its bar charts) by twice its standard error; a magnitude against a "
        f"band of ±{about:g} % around the number as the paper states it (a range the paper states, "
        f"widened by {about:g} % at each end); values a paper calls the same, without a number, must "
        f"lie within {same:g} % of each other. "
        "A run that did not finish within its horizon counts as having taken at least the horizon: "
        "that decides a claim about speed when it is enough, and leaves it undecided otherwise.",
        "",
        f"Of {len(claims)} claims, {why_summary(claims)}. Each claim that does not hold links to its "
        f"reason: *{WHY_LABELS['contradicts']}* (quoting both places), *{WHY_LABELS['leaves-out']}* "
        f"(saying what), or *{WHY_LABELS['lacks-mechanism']}* (naming it). Every number in a reason is "
        "measured from these runs when the report is written, or quoted from the paper or a source; each "
        "reason's premises about our runs are checked against them.",
        "",
        "| paper | figure | claim | verdict | our numbers | paper's numbers | why it does not hold |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in claims:
        verdict = c.outcome.value if c.outcome is not Outcome.FAILS else f"**{c.outcome.value}**"
        lines.append(
            f"| {c.paper} | {c.figure} | {_escape(c.claim)} | {verdict} | {_escape(c.sim)} "
            f"| {_escape(c.paper_value) or '—'} | {_escape(_why_link(c)) or '—'} |"
        )
    current = None
    for outcome in outcomes:
        paper, figure, result = outcome.paper, outcome.figure, outcome.result
        if paper.id != current:
            current = paper.id
            lines += ["", f"## {paper.id}: {paper.title}", "", paper.notes.strip()]
            reasons = list(
                {
                    c.reason.why.id: c.reason
                    for o in outcomes
                    if o.paper.id == paper.id
                    for c in o.claims
                    if c.reason is not None
                }.values()
            )
            if reasons:
                lines += ["", f"### Why claims of {paper.id} do not hold", ""]
                for reason in reasons:
                    lines += reason_lines(paper.id, reason)
        image = f"{figures_dir}/{paper.id}-{figure.id}.png"
        lines += ["", f"### {figure.label}: {figure.title}", "", f"![{paper.id} {figure.label}]({image})", ""]
        notes = figure_notes(figure.notes, settings.quick)
        if notes:
            lines += [notes, ""]
        if figure.kind != "cdf":
            what = (
                "standard deviation over the seeds" if figure.stat == "std" else "mean ± standard deviation"
            )
            lines += [
                f"{figure.ylabel}, {what}:",
                "",
                f"| {figure.xlabel} | " + " | ".join(result.series) + " |",
                "|---" * (len(result.series) + 1) + "|",
            ]
            lines += [
                f"| {x} | " + " | ".join(_cell(outcome, x, s) for s in result.series) + " |"
                for x in result.xs
            ]
            lines.append("")
        for c in outcome.claims:
            paper_value = f" Paper: {c.paper_value}." if c.paper_value else ""
            why = f" Why: {_why_link(c)}." if c.outcome is Outcome.FAILS else ""
            lines.append(f"- **{c.outcome.value}**: {c.claim}. Ours: {c.sim}.{paper_value}{why}")
    return "\n".join(lines) + "\n"


HTML_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>vsched reproductions</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body {{ font-family: system-ui, sans-serif; max-width: 72em; margin: 2em auto; padding: 0 1em;
  line-height: 1.45; color: #222; }}
h1, h2, h3 {{ line-height: 1.2; margin-top: 1.6em; }}
h2 {{ border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }}
table {{ display: block; overflow-x: auto; border-collapse: collapse; margin: 1em 0; font-size: 90%; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; vertical-align: top; }}
th {{ background: #eef1f5; text-align: left; }}
tbody tr:nth-child(even) {{ background: #f8f9fb; }}
td {{ font-variant-numeric: tabular-nums; }}
code {{ font-size: 90%; background: #f3f3f3; padding: 0.05em 0.25em; border-radius: 3px; }}
img {{ max-width: 100%; height: auto; }}
li {{ margin: 0.25em 0; }}
</style></head><body>
{body}
</body></html>
"""


def html(markdown_text: str) -> str:
    import markdown as md

    return HTML_PAGE.format(body=md.markdown(markdown_text, extensions=["tables"]))


def write_outputs(
    outcomes: Sequence[FigureOutcome],
    jobs: Sequence[Job],
    rows: dict[str, Row],
    out: Path,
    settings: Settings,
    command: str,
    markdown_path: Path | None = None,
) -> list[Path]:
    """Write results, figures, report and claims into `out` (and the Markdown report also to
    `markdown_path`, its image links relative to it); return the paths written."""
    from vsched.figures import draw

    written: list[Path] = []
    paper_of: dict[str, dict[str, str]] = {}
    for outcome in outcomes:
        for job in catalog.figure_jobs(outcome.figure, settings.reps_for(outcome.paper), settings.quick):
            paper_of.setdefault(job.key, {"paper": outcome.paper.id})
    parquet = out / "results.parquet"
    write_parquet([rows[job.key] for job in jobs], parquet, paper_of)
    written.append(parquet)
    figures = out / "figures"
    for outcome in outcomes:
        written += draw(outcome.result, outcome.paper.id, figures / f"{outcome.paper.id}-{outcome.figure.id}")
    text = markdown(outcomes, settings, command, "figures")
    (out / "report.md").write_text(text, encoding="utf-8")
    (out / "report.html").write_text(html(text), encoding="utf-8")
    claims = {"claims": [c.as_json() for o in outcomes for c in o.claims]}
    (out / "claims.json").write_text(
        json.dumps(claims, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    written += [out / "report.md", out / "report.html", out / "claims.json"]
    if markdown_path is not None:
        relative = Path(os.path.relpath(figures.resolve(), markdown_path.resolve().parent)).as_posix()
        markdown_path.write_text(markdown(outcomes, settings, command, relative), encoding="utf-8")
        written.append(markdown_path)
    return written
