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
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vsched import catalog
from vsched.catalog.model import WHY_KINDS, WHY_LABELS, Claim, Figure, FigureResult, Paper, Row, Verdict, Why
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
    holds: bool
    sim: str
    paper_value: str
    why: Why | None = None
    """Why the claim does not hold (None when it holds, or when it is not classified)."""

    def as_json(self) -> dict[str, object]:
        return {
            "paper": self.paper,
            "figure": self.figure,
            "claim": self.claim,
            "holds": self.holds,
            "sim": self.sim,
            "paper_value": self.paper_value,
            "why": None if self.why is None else {"kind": self.why.kind, "text": self.why.text},
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


def plan(papers: Sequence[Paper], settings: Settings) -> list[Job]:
    return [
        job
        for paper in papers
        for figure in settings.figures_of(paper)
        for job in catalog.figure_jobs(figure, settings.reps_for(paper), settings.quick)
    ]


def check(figure: Figure, result: FigureResult) -> list[tuple[Claim, Verdict]]:
    """Each claim's verdict. A claim that reads values some seeds could not produce (a VM
    that did not finish) does not hold, and says so, rather than being checked on the rest;
    a claim that reads none of them is checked as usual."""
    verdicts = []
    for claim in figure.claims:
        result.read.clear()
        try:
            verdict = claim.check(result)
        except (ValueError, ZeroDivisionError) as error:
            verdict = Verdict(False, f"could not be checked: {error}")
        cells = [c for c in result.xs_and_series() if c in result.read]
        incomplete = [
            f"{x} / {s}: {result.missing[(x, s)]} runs" for x, s in cells if (x, s) in result.missing
        ]
        if incomplete:
            verdict = Verdict(
                False, "no value for " + "; ".join(incomplete) + " (e.g. unfinished within the horizon)"
            )
        elif any(math.isnan(result.value(x, s)) for x, s in cells):
            verdict = Verdict(False, "some cases have no value")
        verdicts.append((claim, verdict))
    return verdicts


def claim_results(paper: Paper, figure: Figure, result: FigureResult) -> list[ClaimResult]:
    """Each claim's verdict, with its reason (`Claim.if_fails`) if it does not hold."""
    return [
        ClaimResult(
            paper.id,
            figure.label,
            claim.text,
            verdict.holds,
            verdict.sim,
            claim.paper_value,
            None if verdict.holds else claim.if_fails,
        )
        for claim, verdict in check(figure, result)
    ]


def evaluate(papers: Sequence[Paper], settings: Settings, rows: dict[str, Row]) -> list[FigureOutcome]:
    outcomes = []
    for paper in papers:
        reps = settings.reps_for(paper)
        for figure in settings.figures_of(paper):
            result = catalog.figure_result(figure, reps, settings.quick, rows)
            outcomes.append(FigureOutcome(paper, figure, result, claim_results(paper, figure, result)))
    return outcomes


# ---------------------------------------------------------------------------------------------
# Writing the outputs


def _cell(outcome: FigureOutcome, x: str, series: str) -> str:
    result = outcome.result
    value = result.value(x, series)
    if math.isnan(value):
        return "—"
    text = f"{value:.3g}" if outcome.figure.stat == "std" else f"{value:.3g} ± {result.std(x, series):.2g}"
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


def why_summary(claims: Sequence[ClaimResult]) -> str:
    """How many claims do not hold, by the kind of their reason, and how many have none."""
    failing = [c for c in claims if not c.holds]
    counts = {kind: sum(c.why is not None and c.why.kind == kind for c in failing) for kind in WHY_KINDS}
    unclassified = sum(c.why is None for c in failing)
    by_kind = "; ".join(f"{WHY_LABELS[kind]}: {n}" for kind, n in counts.items())
    return f"{len(failing)} do not hold ({by_kind}; unclassified: {unclassified})"


def _why(c: ClaimResult) -> str:
    """The reason of a failing claim, one line of Markdown ("" for a holding claim)."""
    if c.holds:
        return ""
    if c.why is None:
        return "unclassified"
    return f"*{c.why.label}*: " + " ".join(c.why.text.split())


def markdown(outcomes: Sequence[FigureOutcome], settings: Settings, command: str, figures_dir: str) -> str:
    """The report: the claims table, then per paper and figure the plot, our values (with the
    paper's in brackets where it gives them) and each claim's verdict."""
    claims = [c for o in outcomes for c in o.claims]
    held = sum(c.holds for c in claims)
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
        f"## Claims: {held} of {len(claims)} hold",
        "",
        f"Of {len(claims)} claims, {why_summary(claims)}. Each claim that does not hold says why: "
        f"*{WHY_LABELS['contradicts']}* (quoting both places), *{WHY_LABELS['leaves-out']}* "
        f"(saying what), or *{WHY_LABELS['lacks-mechanism']}* (naming it).",
        "",
        "| paper | figure | claim | verdict | our numbers | paper's numbers | why it does not hold |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in claims:
        verdict = "holds" if c.holds else "**does not hold**"
        lines.append(
            f"| {c.paper} | {c.figure} | {_escape(c.claim)} | {verdict} | {_escape(c.sim)} "
            f"| {_escape(c.paper_value) or '—'} | {_escape(_why(c)) or '—'} |"
        )
    current = None
    for outcome in outcomes:
        paper, figure, result = outcome.paper, outcome.figure, outcome.result
        if paper.id != current:
            current = paper.id
            lines += ["", f"## {paper.id}: {paper.title}", "", paper.notes.strip()]
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
            lines.append(
                f"- **{'holds' if c.holds else 'does not hold'}**: {c.claim}. Ours: {c.sim}.{paper_value}"
            )
            if not c.holds:
                lines.append(f"    - why it does not hold: {_why(c)}")
    return "\n".join(lines) + "\n"


HTML_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>vsched reproductions</title>
<style>
body {{ font-family: sans-serif; max-width: 72em; margin: 2em auto; padding: 0 1em; line-height: 1.4; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 90%; }}
th, td {{ border: 1px solid #bbb; padding: 0.2em 0.5em; vertical-align: top; }}
th {{ background: #eee; }}
img {{ max-width: 100%; }}
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
