"""``gdln timescales``: the stages of learning from small initial weights.

It parses its options, calls :func:`gdln.timescales` and prints
:func:`gdln.format_timescales`. Nothing heavy is imported to show its help.
"""

from __future__ import annotations

from typing import Any

import click

import gdln

from ._common import (
    graph_arguments,
    load_problem,
    output_file,
    output_options,
    setting_options,
    write,
)

__all__ = ["timescales"]


@click.command()
@graph_arguments
@setting_options("timescales")
@click.option(
    "--no-ode",
    is_flag=True,
    help="Skip the exact reduced ODE's time to half-completion of each stage (aligned route).",
)
@output_options(("text", "json"), default="text", what="stages")
def timescales(
    file: str,
    params: tuple[str, ...],
    task: str | None,
    no_ode: bool,
    fmt: str | None,
    out: str | None,
    force: bool,
    **settings: Any,
) -> None:
    """Order, times and plateaus of the stages of learning from small initial weights.

    \b
    Example:
      gdln timescales graphs/late_fusion.yaml --param rho=0.5 --b0 1e-6
      gdln timescales graphs/routing.yaml --format json -o stages.json
    """
    output = output_file(out, fmt, force, formats=("text", "json"))
    problem = load_problem(file, params, task)
    result = gdln.timescales(problem, ode=not no_ode, **settings)
    write(output, gdln.format_timescales(result, output.format))
