"""``gdln schema``: print the JSON Schema of graph files, for editors and validators."""

from __future__ import annotations

import json

import click

import gdln.graphfile

from ._common import output_file, output_options, write


@click.command("schema")
@click.option("--indent", type=int, default=2, show_default=True, help="spaces per level")
@output_options(("json",), default="json", what="schema")
def schema(indent: int, fmt: str | None, out: str | None, force: bool) -> None:
    """Print the JSON Schema (draft 2020-12) of graph, task and dataset files.

    \b
    Example: let an editor complete and check graph files
      gdln schema -o gdln.schema.json
      # first line of a graph file:
      # yaml-language-server: $schema=gdln.schema.json
    """
    output = output_file(out, fmt, force, formats=("json",))
    write(output, json.dumps(gdln.graphfile.schema(), indent=indent))
