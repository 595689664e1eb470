"""Progress on stderr, drawn only on a terminal so that redirected output stays clean: the bar
of one run (`RunProgress`), the bar of a batch of runs (`JobsProgress`), and single lines.
"""

import time
from typing import TYPE_CHECKING, Any, Optional

import vsched
from vsched.cli.output import stderr

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

# Runs shorter than this finish before a progress bar would be worth drawing.
PROGRESS_DELAY_S = 2.0


def progress_bar(label: str, done: str) -> "Progress":
    """A transient bar on stderr: `label`, the bar, how much is `done`, elapsed and remaining.
    rich.progress is imported here, when a run has lasted long enough to want a bar."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(
        TextColumn(label),
        BarColumn(),
        TextColumn(done),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=stderr,
        transient=True,
    )


class RunProgress:
    """A progress callback that draws a bar on stderr once a run has lasted PROGRESS_DELAY_S,
    and only on a terminal, so short runs and redirected output stay clean."""

    def __init__(self, clock: str = "simulated") -> None:
        self.started_at = time.monotonic()
        self.bar: Optional[Progress] = None
        self.task: Optional[TaskID] = None
        # What the run's seconds are: "simulated", or "real" on real vCPUs.
        self.clock = clock

    def __call__(self, rep: int, reps: int, sim_s: float, horizon_s: float) -> None:
        if self.bar is None:
            if not stderr.is_terminal or time.monotonic() - self.started_at < PROGRESS_DELAY_S:
                return
            self.bar = progress_bar("{task.description}", "{task.percentage:>3.0f}%")
            self.bar.start()
            self.task = self.bar.add_task("", total=1.0)
        assert self.task is not None
        rep_fraction = min(sim_s / horizon_s, 1.0) if horizon_s > 0 else 0.0
        self.bar.update(
            self.task,
            completed=(rep + rep_fraction) / max(reps, 1),
            description=f"run {rep + 1}/{reps}  {self.clock} {sim_s:.1f}/{horizon_s:g} s",
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def run_with_progress(scenario: vsched.ScenarioLike, **options: Any) -> str:
    progress = RunProgress()
    try:
        return vsched.run_json(scenario, progress=progress, **options)
    finally:
        progress.close()


def say_on_terminal(message: str) -> None:
    """A progress line on stderr, only on a terminal."""
    if stderr.is_terminal:
        stderr.print(message)


class JobsProgress:
    """A bar over a batch of runs on stderr, drawn only on a terminal (redirected output and
    CI logs get one line at the end instead)."""

    def __init__(self, description: str) -> None:
        self.description = description
        self.bar: Optional[Progress] = None
        self.task: Optional[TaskID] = None
        self.started_at = time.monotonic()
        self.first_done: Optional[int] = None

    def __call__(self, done: int, total: int) -> None:
        if self.first_done is None:
            self.first_done = done
            if done:
                stderr.print(f"{done} of {total} runs already stored: resuming")
        if self.bar is None and stderr.is_terminal:
            self.bar = progress_bar(self.description, "{task.completed}/{task.total} runs")
            self.bar.start()
            self.task = self.bar.add_task("", total=total)
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, completed=done, total=total)

    def close(self, total: int) -> None:
        if self.bar is not None:
            self.bar.stop()
        ran = total - (self.first_done or 0)
        stderr.print(f"{ran} runs in {time.monotonic() - self.started_at:.0f} s ({total} in all)")
