"""``gdln timescales``: the stages of learning from small initial weights.

It parses its options, calls :func:`gdln.timescales` and prints
:func:`gdln.format_timescales`. Nothing heavy is imported to show its help.
"""

from __future__ import annotations

import click

import gdln

from ._common import graph_arguments, load_problem, output_file, output_options, write

__all__ = ["timescales"]

#: The routes, spelled here so that ``--help`` imports nothing (tested equal to
#: ``gdln.stages.ROUTES``).
ROUTE_NAMES = ("auto", "aligned", "asymptotic")


@click.command()
@graph_arguments
@click.option(
    "--b0",
    default=None,
    metavar="VALUE",
    help="The small initial scale u0 = b(0) of every reduced variable, 0 < u0 < 1, a number "
    "or an expression such as 1e-6 or 1/1000 (default: the file's solve.init, else 0.001).",
)
@click.option(
    "--route",
    type=click.Choice(ROUTE_NAMES),
    default="auto",
    show_default=True,
    help="aligned: leading order of the exact reduced ODE, mode by mode; asymptotic: "
    "rank-one stages for statistics without common bases; auto: aligned when gdln can "
    "reduce the file, else asymptotic.",
)
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
    b0: str | None,
    route: str,
    no_ode: bool,
    fmt: str | None,
    out: str | None,
    force: bool,
) -> None:
    """Order, times and plateaus of the stages of learning from small initial weights.

    \b
    Example:
      gdln timescales graphs/late_fusion.yaml --param rho=0.5 --b0 1e-6
      gdln timescales graphs/routing.yaml --format json -o stages.json
    """
    output = output_file(out, fmt, force, formats=("text", "json"))
    problem = load_problem(file, params, task)
    result = gdln.timescales(problem, b0=b0, route=route, ode=not no_ode)
    write(output, gdln.format_timescales(result, output.format))
