"""The typer application, `app`, that the command modules register their commands with, its
`--version` option, and `finish_help`, which makes the help read as prose at any width.

It has a module of its own so that the command modules can import it while the package,
`vsched.cli`, imports them.
"""

import inspect
from typing import Annotated, Any

import typer

app = typer.Typer(
    name="vsched",
    help="A laboratory for hypervisor vCPU scheduling. Start with `vsched demo`.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def print_version(asked: bool) -> None:
    if asked:
        import vsched

        print(f"vsched {vsched.__version__}")
        raise typer.Exit()


@app.callback()
def options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print vsched's version and exit.", is_eager=True, callback=print_version
        ),
    ] = False,
) -> None:
    """The options that come before a command."""


def prose(text: str) -> str:
    """`text` with each paragraph on one line, so that the help wraps it at the terminal's
    width: rich keeps the line breaks of a docstring's later paragraphs as they are."""
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in inspect.cleandoc(text).split("\n\n"))


def finish_help(group: Any) -> None:
    """Make the help of `group` (the click command of `app`) and of each of its commands read
    well: paragraphs as prose, and no `<bool>` type after a flag (Typer 0.29 shows one,
    as if a flag took a value, `--help` included)."""
    context = typer.Context(group)
    for command in [group, *group.commands.values()]:
        if command.help:
            command.help = prose(command.help)
        help_option = command.get_help_option(context)
        for param in [*command.params, *([help_option] if help_option is not None else [])]:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
