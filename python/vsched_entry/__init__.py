"""The `vsched` console script's entry point, a package of its own so that it runs before
`vsched` is imported: a Ctrl-C while the command starts (importing the package, its
extension and the command line's libraries takes a large part of a second) or while it ends
exits 130 with `interrupted`, as during the command, never with a Python traceback.

`python -m vsched` runs the same command line, but Python imports the package before any of
its code runs: this guard is the console script's.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

EXIT_INTERRUPTED = 130


def _interrupted() -> None:
    # A second Ctrl-C while this line is written must not interrupt the exit itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        sys.stderr.write("interrupted\n")
        sys.stderr.flush()
    finally:
        os._exit(EXIT_INTERRUPTED)


def _interrupted_at_exit(signum: int, frame: FrameType | None) -> None:
    _interrupted()


def main() -> None:
    try:
        from vsched.cli import main as command_line

        command_line()
    except KeyboardInterrupt:
        _interrupted()
    except SystemExit:
        # Python's shutdown (flushing output, ending worker processes) runs after this: a
        # Ctrl-C there ends the process at once, as `interrupted`.
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _interrupted_at_exit)
        raise
