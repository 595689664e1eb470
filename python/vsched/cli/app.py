"""The typer application, `app`, that the command modules register their commands with.

It has a module of its own so that the command modules can import it while the package,
`vsched.cli`, imports them.
"""

import typer

app = typer.Typer(
    name="vsched",
    help="A laboratory for hypervisor vCPU scheduling. Start with `vsched demo`.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
