"""``gdln graphs``: the paper's graphs that ship with gdln, by name.

Any command that takes a graph file takes one of these names instead (``gdln derive
routing``); it calls :func:`gdln.graphfile.shipped_graphs` and prints the list.
"""

from __future__ import annotations

import json

import click

import gdln.graphfile

from ._common import output_file, output_options, write

__all__ = ["graphs"]


@click.command("graphs")
@output_options(("text", "json"), default="text", what="list")
def graphs(fmt: str | None, out: str | None, force: bool) -> None:
    """List the graphs shipped with gdln: name, description, the figure each reproduces.

    \b
    A name works wherever a graph file is taken (a file of that name wins):
      gdln derive routing --symbolic M,K
      gdln compare xor -o xor/
    """
    output = output_file(out, fmt, force, formats=("text", "json"))
    shipped = gdln.graphfile.shipped_graphs()
    if output.format == "json":
        rows = [
            {
                "name": g.name,
                "description": g.description,
                "reproduces": g.reproduces,
                "path": str(g.path),
            }
            for g in shipped
        ]
        write(output, json.dumps(rows, indent=2))
        return
    width = max(len(g.name) for g in shipped) + 2
    lines = []
    for g in shipped:
        lines.append(f"{g.name:<{width}}{g.description}")
        lines.append(f"{'':<{width}}reproduces: {g.reproduces or '-'}")
    lines.append(f"\n(in {gdln.graphfile.graphs_folder()}; use a name in place of a file)")
    write(output, "\n".join(lines))
