"""``gdln schema``: print the JSON Schema of graph files, for editors and validators."""

from __future__ import annotations

import json

import click

import gdln.graphfile


@click.command("schema")
@click.option("--indent", type=int, default=2, show_default=True, help="spaces per level")
def schema(indent: int) -> None:
    """Print the JSON Schema (draft 2020-12) of graph, task and dataset files.

    \b
    Example: let an editor complete and check graph files
      gdln schema > gdln.schema.json
      # first line of a graph file:
      # yaml-language-server: $schema=gdln.schema.json
    """
    click.echo(json.dumps(gdln.graphfile.schema(), indent=indent))
