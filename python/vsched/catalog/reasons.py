"""Why a claim does not hold, as data: a reason names its class, the numbers it rests on and
the premises about vsched's runs it makes, and its text is rendered from the runs.

A reason's text is a template. Every number in it is a placeholder filled when the report is
rendered: either `Measured` (computed from the runs of the paper's figures or of its evidence
runs, so it cannot go stale) or `Stated` (a number of the paper's or of a source, with where it
is stated). A text with a bare number is refused (`check_text`): quotations ("…"), code
(`…`), section, figure and version references may hold digits, nothing else may.

A `Premise` is a statement the reason makes about our runs ("VDS ties Credit", "CDS launches
more often than CS"), as a check over the measured numbers. When the runs contradict a premise,
the report says so beside the reason, and the catalog's test over the committed reproduction
fails: the reason must be rewritten, not the check.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Union, get_args

from vsched.catalog.model import Figure, FigureResult, Metric, Row
from vsched.catalog.stats import Estimate, mean_estimate

WhyKind = Literal["contradicts", "leaves-out", "lacks-mechanism"]
"""Why a claim does not hold: the paper states both it and its opposite ("contradicts"), the
paper does not state what decides it ("leaves-out"), or vsched does not model what decides it
("lacks-mechanism")."""

WHY_KINDS: tuple[str, ...] = get_args(WhyKind)

WHY_LABELS: dict[str, str] = {
    "contradicts": "the paper contradicts itself",
    "leaves-out": "the paper leaves out what decides it",
    "lacks-mechanism": "vsched lacks a mechanism",
}
"""How the report names each kind."""


class NotMeasured(Exception):
    """A number needs runs that this reproduction did not make (a figure left out with
    --figure)."""


class Evidence:
    """What reasons measure: the figure results of one paper (its figures' and its evidence
    runs'), by figure id."""

    def __init__(self, results: Mapping[str, FigureResult]) -> None:
        self.results = dict(results)

    def result(self, figure: str) -> FigureResult:
        if figure not in self.results:
            raise NotMeasured(figure)
        return self.results[figure]

    def cell(self, figure: str, x: str, series: str) -> Estimate:
        """The plotted statistic of one case."""
        return self.result(figure).estimate(x, series)

    def runs(self, figure: str, x: str, series: str) -> list[Row]:
        return self.result(figure).rows.get((x, series), [])

    def mean(self, figure: str, x: str, series: str, metric: Metric) -> Estimate:
        """The mean over the case's runs of another metric of the same runs."""
        values = [metric(row) for row in self.runs(figure, x, series)]
        known = [float(v) for v in values if isinstance(v, (int, float))]
        if not known or len(known) < len(values):
            return Estimate.none()
        return mean_estimate(known)

    def unfinished(self, figure: str, x: str, series: str) -> int:
        return self.result(figure).unfinished(x, series)

    def seeds(self, figure: str, x: str, series: str) -> int:
        result = self.result(figure)
        return len(result.samples.get((x, series), [])) + result.unfinished(x, series)


Value = Union[Estimate, float, int]


@dataclass(frozen=True)
class Measured:
    """A number a reason quotes, computed from the runs."""

    name: str
    what: str
    """What it is, in words (shown in the reason's record: "Credit's mean time at 3000 × 3000")."""
    compute: Callable[[Evidence], Value]
    unit: str = ""
    """Appended to the number, e.g. " s", " %", " /s"."""
    scale: float = 1.0
    """Multiplies the value before it is shown (100 for a fraction shown in percent)."""
    digits: int = 3
    """Significant digits shown."""
    signed: bool = False
    """Show a sign (changes)."""

    def value(self, evidence: Evidence) -> float:
        found = self.compute(evidence)
        if isinstance(found, Estimate):
            return found.value if found.known else math.nan
        return float(found)

    def show(self, value: float) -> str:
        if math.isnan(value):
            return "(no value)"
        scaled = value * self.scale
        if float(scaled).is_integer() and abs(scaled) < 10**self.digits and not self.signed:
            text = f"{int(scaled):,}"
        else:
            text = f"{scaled:{'+' if self.signed else ''}.{self.digits}g}"
            if "e" in text:
                text = f"{scaled:{'+' if self.signed else ''},.0f}"
        return text.replace("-", "−") + self.unit


@dataclass(frozen=True)
class MeasuredText:
    """Words a reason quotes that are computed from the runs (e.g. which algorithm is fastest
    at each point)."""

    name: str
    what: str
    compute: Callable[[Evidence], str]


@dataclass(frozen=True)
class Stated:
    """A number a reason quotes from the paper or a source: not a measurement of ours."""

    name: str
    text: str
    source: str
    """Where it is stated, e.g. "seed 004 Fig. 5" or "kernel/sched/fair.c (Linux 6.12)"."""


Number = Union[Measured, MeasuredText, Stated]


@dataclass(frozen=True)
class Premise:
    """A statement a reason makes about our runs, checked against the measured numbers."""

    text: str
    """In words, e.g. "CDS launches more often than CS in solo-CON"."""
    check: Callable[[Mapping[str, float]], bool]


# Digits a reason's text may hold outside its placeholders: quotations, code, references to
# sections, figures, tables, equations, releases and papers.
ALLOWED_DIGITS = re.compile(
    r"\{[a-z0-9_]+\}"  # placeholders
    r'|"[^"]*"|“[^”]*”|`[^`]*`'  # quotations and code
    r"|§+\s?\d+(\.\d+)*(–\d+(\.\d+)*)?"  # sections
    r"|\b(Figs?|Eq|Table|Algorithm|Section)\.?\s\d+(\([a-z]\))?([–-]\d+)?((, | and )\d+(\([a-z]\))?)*"
    r"|\b[Ss]eed\s?\d{3}\b"
    r"|\b(Xen|Linux|kernel|Ubuntu|CentOS|Fedora|Open MPI|MPICH)\s\d+(\.\d+)*(\.x)?"
    r"|\[\d+\]|\bcontribution \(\d+\)"  # references
    r"|\b(19|20)\d{2}\b"  # years of publications
    r"|'\d{2}\b"  # venues: EuroSys'11
    r"|\b[A-Za-z]+[-]?\d+[A-Za-z0-9]*\b"  # names with digits: L3, SPLASH-2, i5, credit2
    r"|\b\d+ × \d+\b|\b(VOR|weight) \d+(\.\d+)?\b"  # x-axis points as the papers name them
    # setups, not measurements
    r"|\b\d+(-|\s)(vCPUs?|pCPUs?|VMs?|hosts?|domains?|threads?|ranks?|processes)\b"
)
BARE_NUMBER = re.compile(r"\d")
PLACEHOLDER = re.compile(r"\{([a-z0-9_]+)\}")


def check_text(text: str, names: Sequence[str]) -> None:
    """Raise ValueError if `text` quotes a number that is not a placeholder, or names a
    placeholder that is not one of `names`, or leaves one of `names` unused."""
    stripped = ALLOWED_DIGITS.sub("", text)
    if BARE_NUMBER.search(stripped):
        where = BARE_NUMBER.search(stripped)
        assert where is not None
        context = stripped[max(0, where.start() - 30) : where.end() + 30]
        raise ValueError(
            f"Why.text: a number outside a placeholder (make it Measured or Stated): …{context}…"
        )
    used = set(PLACEHOLDER.findall(text))
    unknown = sorted(used - set(names))
    if unknown:
        raise ValueError(f"Why.text: placeholder {{{unknown[0]}}} has no number")
    unused = sorted(set(names) - used)
    if unused:
        raise ValueError(f"Why.numbers: {unused[0]} is not in the text")


@dataclass(frozen=True)
class Why:
    """The reason a claim does not hold."""

    id: str
    """A stable short name, unique in its paper, e.g. "cosched-strict" (the report's anchor)."""
    kind: WhyKind
    text: str
    """Markdown, 1–4 sentences, every number a placeholder. "contradicts": quote both
    passages (with section or figure); "leaves-out": name the unstated parameter or setup and
    how it decides the outcome; "lacks-mechanism": name the mechanism vsched does not model."""
    numbers: tuple[Number, ...] = ()
    premises: tuple[Premise, ...] = ()
    evidence: tuple[Figure, ...] = ()
    """Runs that no figure plots but this reason measures (e.g. a scenario without its
    Domain-0): figures without claims, run whenever a figure that cites the reason is, and left
    out of the report."""

    def __post_init__(self) -> None:
        if self.kind not in WHY_KINDS:
            raise ValueError(f"Why.kind: expected one of {', '.join(WHY_KINDS)}, got {self.kind!r}")
        if not self.text.strip():
            raise ValueError("Why.text: empty")
        if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", self.id):
            raise ValueError(f"Why.id: expected lower-case words joined by '-', got {self.id!r}")
        check_text(self.text, [n.name for n in self.numbers])

    @property
    def label(self) -> str:
        return WHY_LABELS[self.kind]

    def render(self, evidence: Evidence) -> Reason:
        """The reason with its numbers measured on `evidence` and its premises checked."""
        values: dict[str, float] = {}
        shown: dict[str, str] = {}
        missing: list[str] = []
        for number in self.numbers:
            if isinstance(number, Stated):
                shown[number.name] = number.text
                continue
            try:
                if isinstance(number, MeasuredText):
                    shown[number.name] = number.compute(evidence)
                    continue
                values[number.name] = number.value(evidence)
            except NotMeasured as figure:
                missing.append(str(figure))
                values[number.name] = math.nan
                shown[number.name] = "(not measured)"
                continue
            shown[number.name] = number.show(values[number.name])
        premises = []
        for premise in self.premises:
            if missing or any(math.isnan(v) for v in values.values()):
                premises.append(PremiseResult(premise.text, None))
            else:
                premises.append(PremiseResult(premise.text, bool(premise.check(values))))
        text = PLACEHOLDER.sub(lambda m: shown[m.group(1)], " ".join(self.text.split()))
        return Reason(self, text, values, shown, tuple(premises), tuple(sorted(set(missing))))


@dataclass(frozen=True)
class PremiseResult:
    text: str
    holds: bool | None
    """None: not checked (a number it needs has no value, or was not measured in this
    reproduction)."""


@dataclass(frozen=True)
class Reason:
    """A reason rendered against one reproduction's runs."""

    why: Why
    text: str
    values: dict[str, float]
    shown: dict[str, str]
    premises: tuple[PremiseResult, ...] = field(default=())
    not_measured: tuple[str, ...] = ()
    """Figures whose runs some numbers needed and this reproduction did not make."""

    @property
    def contradicted(self) -> list[str]:
        """The premises the runs contradict."""
        return [p.text for p in self.premises if p.holds is False]

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.why.id,
            "kind": self.why.kind,
            "text": self.text,
            "numbers": {
                n.name: (
                    {
                        "measured": None if math.isnan(self.values[n.name]) else self.values[n.name],
                        "shown": self.shown[n.name],
                        "what": n.what,
                    }
                    if isinstance(n, Measured)
                    else {"shown": self.shown[n.name], "what": n.what}
                    if isinstance(n, MeasuredText)
                    else {"stated": n.text, "source": n.source}
                )
                for n in self.why.numbers
            },
            "premises": [{"text": p.text, "holds": p.holds} for p in self.premises],
        }
