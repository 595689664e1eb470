"""`vsched policies` and `vsched workloads`: what a scenario can name, each entry with its
parameters, as tables or JSON.
"""

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

import vsched
from vsched.cli.app import app
from vsched.cli.output import print_json, stdout

if TYPE_CHECKING:
    from rich.console import Group


def bound(x: float) -> str:
    """A parameter's bound as a user writes it: integers with thousands separators."""
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"


def catalogue(entries: list[dict[str, Any]]) -> "Group":
    """Policies or workloads: per entry its name and description, then its parameters."""
    from rich import box
    from rich.console import Group, RenderableType
    from rich.table import Table
    from rich.text import Text

    parts: list[RenderableType] = []
    for entry in entries:
        parts.append(Text.assemble((entry["name"], "bold"), f"  {entry['description']}"))
        if entry.get("models"):
            parts.append(f"models: {entry['models']}")
        if entry.get("base"):
            parts.append(f"runs on: {entry['base']} (its accounting, queues and parameters)")
        if entry.get("hypervisor") == "xen":
            parts.append("Xen: a host has a driver domain (dom0) by default")
        elif entry.get("hypervisor") == "kvm":
            parts.append("KVM: no driver domain (the host kernel does the I/O)")
        if entry["params"]:
            table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 2))
            table.add_column("parameter", overflow="fold")
            table.add_column("default", justify="right", overflow="fold")
            table.add_column("range", justify="right", overflow="fold")
            table.add_column("meaning")
            for param in entry["params"]:
                bounds = "" if param["min"] is None else f"{bound(param['min'])} .. {bound(param['max'])}"
                table.add_row(
                    param["name"], json.dumps(param["default"], ensure_ascii=False), bounds, param["doc"]
                )
            parts.append(table)
        else:
            parts.append(Text("  no parameters\n"))
    return Group(*parts)


def print_catalogue(entries: list[dict[str, Any]], json_output: bool) -> None:
    if json_output:
        print_json(entries)
    else:
        stdout.print(catalogue(entries))


@app.command()
def policies(
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the scheduling policies and their parameters (a scenario's scheduler table)."""
    print_catalogue(vsched.policies(), json_output)


@app.command()
def workloads(
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the guest workloads and their parameters (a scenario's vm.workload tables)."""
    print_catalogue(vsched.workloads(), json_output)
