"""Options that several commands share, declared once so that their names and help read the
same in every command.
"""

import typer

CHECK_OPTION = typer.Option(
    "--check",
    help="Run the simulator's invariant checks after every event: slower, for suspicious runs.",
)
MAX_MEMORY_OPTION = typer.Option(
    "--max-memory",
    metavar="SIZE",
    help="Memory budget a run's estimate must fit, e.g. 8G, 512M, 1.5GiB or bytes (default: the core's).",
)
JOBS_OPTION = typer.Option("--jobs", "-j", help="Runs in parallel (local processes; default: all cores).")
# The backslash keeps Typer's rich help from reading "[ray]" as markup.
BACKEND_OPTION = typer.Option(
    help="Where runs execute: local processes, or a Ray cluster (pip install 'vsched\\[ray]')."
)
ADDRESS_OPTION = typer.Option(help="Ray cluster address (default: start a local Ray instance).")
