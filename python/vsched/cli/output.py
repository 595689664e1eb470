"""Where results go: the stdout and stderr consoles, reports printed as tables or JSON, and the
plain text of tables written to files (summary.txt).
"""

import io
import json
import os
import sys
from typing import Any

from rich.console import Console, RenderableType

# Width of summary.txt: a file is not a terminal, so this is chosen to keep tables of five
# or six VMs in one piece while staying readable in an editor.
REPORT_WIDTH = 120
# Width of stdout when it is not a terminal (a pipe, a file): rich would take 80 columns and
# cut tables to fit; this is wide enough that every table keeps its natural width.
PIPED_WIDTH = 10_000
# No markup: scenario names and paths are printed as written, brackets included.
stdout = Console(highlight=False, markup=False)
stderr = Console(stderr=True, highlight=False, markup=False)


def fit_stdout() -> None:
    """Give stdout its width for this command: the terminal's on a terminal (rich's default),
    `COLUMNS` when it is set, PIPED_WIDTH otherwise, so that piped tables are never cut."""
    if not stdout.is_terminal and "COLUMNS" not in os.environ:
        stdout.width = PIPED_WIDTH


def render_text(renderable: RenderableType) -> str:
    """Plain text of a rich renderable, as written to summary.txt."""
    buffer = io.StringIO()
    Console(file=buffer, width=REPORT_WIDTH, color_system=None, highlight=False, markup=False).print(
        renderable
    )
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2))


def print_report(report_text: str, json_output: bool) -> dict[str, Any]:
    """Prints a report as JSON or as tables; returns it parsed."""
    from vsched.report import report_tables, unfinished_warnings

    report: dict[str, Any] = json.loads(report_text)
    if json_output:
        print(report_text)
        # The tables carry these warnings; JSON output keeps stdout clean, so they go to
        # stderr, one line each as errors do.
        for line in unfinished_warnings(report):
            print(line, file=sys.stderr)
    else:
        stdout.print(report_tables(report, stdout.width))
    return report
