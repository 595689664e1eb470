"""Exit codes, `CliError` (a user mistake a command detects) and `fail`, which turns any
failure into the promised one line on stderr and an exit code.
"""

import sys
from typing import NoReturn

EXIT_BAD_INPUT = 2
# A policy bug is not the user's mistake: it gets the generic failure code.
EXIT_INTERNAL_ERROR = 1
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """A user mistake detected by the command line itself; its text is the error line."""


def fail(message: str, exit_code: int = EXIT_BAD_INPUT) -> NoReturn:
    # The promise is one line whatever produced the message.
    one_line = " ".join(message.split())
    print(f"error: {one_line}", file=sys.stderr)
    raise SystemExit(exit_code)


def describe_os_error(error: OSError) -> str:
    if error.filename is not None and error.strerror:
        return f"{error.strerror}: '{error.filename}'"
    return str(error)
