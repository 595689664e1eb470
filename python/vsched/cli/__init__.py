"""The `vsched` command line.

Every failure the user can cause (a bad scenario, a missing file, an unreadable trace, a bad
option) ends the same way: one line `error: <message>` on stderr and exit code 2, never a
traceback. A failure that is not the user's (a policy bug, a bug in vsched) is one line too,
with exit code 1; Ctrl-C exits with 130. `VSCHED_DEBUG=1` adds the traceback of an internal
error. Results go to stdout, progress to stderr, so `--json` output stays clean.

The package: `main` and its error handling here; the typer `app` in app.py; the commands in
run.py (run, real, validate), listing.py (policies, workloads), tools.py (demo, bench,
plot-trace) and batch.py (sweep, reproduce); what they share in errors.py, inputs.py,
options.py, output.py and progress.py.
"""

import os
import sys
import traceback
from typing import NoReturn, Optional, cast

import typer

import vsched
from vsched.cli.app import app, finish_help
from vsched.cli.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL_ERROR,
    EXIT_INTERRUPTED,
    CliError,
    describe_os_error,
    fail,
)
from vsched.cli.inputs import parse_size
from vsched.cli.output import fit_stdout

# The commands register with `app` as their modules are imported: this order is the order
# of `vsched --help`.
# isort: off
from vsched.cli import run  # noqa: F401
from vsched.cli import listing  # noqa: F401
from vsched.cli import tools  # noqa: F401
from vsched.cli import batch  # noqa: F401
# isort: on

__all__ = ["app", "main", "parse_size"]

# Typer reports command-line mistakes with click's UsageError. Recent Typer releases vendor
# click privately, so the class is reached through its public subclass BadParameter.
UsageError = cast("type[Exception]", typer.BadParameter.__base__)
# Set (to anything but 0 or empty) to see the traceback of an internal error.
DEBUG_VARIABLE = "VSCHED_DEBUG"


def debugging() -> bool:
    return os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")


def internal_failure(message: str) -> NoReturn:
    """Exit 1 with `message`, after the traceback of the exception being handled when
    VSCHED_DEBUG is set."""
    if debugging():
        traceback.print_exc()
    fail(message, EXIT_INTERNAL_ERROR)


def raised_by(module: str, name: str, error: BaseException) -> bool:
    """Whether `error` is `module`.`name`, without importing `module`: a module that was never
    imported raised nothing, and the commands that need it import it themselves (start-up)."""
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(error, getattr(loaded, name))


def interrupted() -> NoReturn:
    print("interrupted", file=sys.stderr)
    raise SystemExit(EXIT_INTERRUPTED)


def main(argv: Optional[list[str]] = None) -> None:
    """Entry point of the `vsched` console script: whatever happens, one line on stderr and
    an exit code (2 bad input, 1 a policy bug, an internal error or a real-vCPU comparison
    on a host too busy to trust, 130 Ctrl-C)."""
    try:
        fit_stdout()
        command = typer.main.get_command(app)
        finish_help(command)
        exit_code = command.main(args=argv, prog_name="vsched", standalone_mode=False)
    except (CliError, vsched.ScenarioError) as error:
        fail(str(error))
    except UsageError as error:
        message = error.format_message()  # type: ignore[attr-defined]  # click's UsageError has it
        if not message:
            # A bare `vsched`: click has already printed the help in place of an error.
            raise SystemExit(EXIT_BAD_INPUT) from None
        fail(message)
    except OSError as error:
        fail(describe_os_error(error))
    except vsched.PolicyError as error:
        # A policy written in Python is the user's code: its traceback comes first.
        policy_traceback = getattr(error, "policy_traceback", None)
        if policy_traceback:
            print(policy_traceback, end="", file=sys.stderr)
        fail(f"policy failure (a bug in the policy, not in the scenario): {error}", EXIT_INTERNAL_ERROR)
    except vsched.InternalError as error:
        internal_failure(str(error))
    except (KeyboardInterrupt, typer.Abort):
        # Older Typer and click turn Ctrl-C into Abort; newer Typer into exit code 130.
        interrupted()
    except SystemExit:
        raise
    except BaseException as error:  # noqa: B036 - the last resort, PyO3's PanicException included
        if raised_by("vsched.runs", "JobFailed", error):
            fail(str(error), error.exit_code)  # type: ignore[attr-defined]  # JobFailed has it
        if raised_by("vsched.real", "DisturbedHost", error):
            fail(str(error), EXIT_INTERNAL_ERROR)
        internal_failure(f"internal error: {type(error).__name__}: {error}")
    if exit_code == EXIT_INTERRUPTED:
        interrupted()
    sys.exit(exit_code if isinstance(exit_code, int) else 0)
