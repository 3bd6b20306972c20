"""``gdln paths``, ``stats``, ``derive`` and ``solve``: the theory, from a graph file.

None of them imports torch. Each parses its options, calls the public API and prints.
"""

from __future__ import annotations

import json
from typing import Any

import click

import gdln

from ._common import (
    DEFAULT_LUMP,
    LUMP_HELP,
    CommandLineError,
    graph_arguments,
    initial_value,
    load_problem,
    output_file,
    output_options,
    setting,
    write,
)

__all__ = ["derive", "paths", "solve", "stats"]

INIT_HELP = (
    "Initial value b(0) of every reduced variable (default: the file's solve.init, else 0.001)."
)


@click.command()
@graph_arguments
@output_options(("text", "json"), default="text", what="listing")
def paths(
    file: str,
    params: tuple[str, ...],
    task: str | None,
    fmt: str | None,
    out: str | None,
    force: bool,
) -> None:
    """List input-output paths, |P(e)| per edge and |T(v)| per output.

    \b
    Example:
      gdln paths graphs/xor.yaml
    """
    output = output_file(out, fmt, force, formats=("text", "json"))
    write(output, gdln.format_paths(load_problem(file, params, task), output.format))


@click.command()
@graph_arguments
@output_options(("text", "latex", "json"), default="text", what="statistics")
def stats(
    file: str,
    params: tuple[str, ...],
    task: str | None,
    fmt: str | None,
    out: str | None,
    force: bool,
) -> None:
    """Print the path statistics and the bases U, V that diagonalise them (Eqs 5-8).

    When no common bases exist, print the statistics and which of them stay off-diagonal,
    then exit with status 2.

    \b
    Example:
      gdln stats graphs/context.yaml --param pathways=1 --format latex
    """
    output = output_file(out, fmt, force, formats=("text", "latex", "json"))
    problem = load_problem(file, params, task)
    try:
        reduction = gdln.reduce(problem)
    except gdln.NotDiagonalizableError as err:
        write(output, _without_bases(problem, err, output.format))
        raise
    write(output, gdln.format_statistics(problem, reduction, output.format))


def _without_bases(problem: gdln.Problem, err: gdln.NotDiagonalizableError, fmt: str) -> str:
    """The statistics (Eqs. 5-6), and which stay off-diagonal in the best bases found."""
    text = gdln.format_statistics(problem, None, fmt)
    residual = float(err.residual)
    if fmt == "json":
        payload = json.loads(text)
        payload["no_common_bases"] = {"off_diagonal": list(err.paths), "residual": residual}
        return json.dumps(payload, indent=1)
    what = (
        f"no common bases (Eqs. 7-8): in the best bases found, {', '.join(err.paths)} stay "
        f"off-diagonal; relative residual {residual:.3g} (the largest share of one statistic, "
        f"by Frobenius norm, off the diagonal: 0 is diagonal, 1 all off)"
    )
    return f"{text}\n% {what}" if fmt == "latex" else f"{text}\n\n{what[0].upper()}{what[1:]}"


@click.command()
@graph_arguments
@click.option("--lump", type=click.Choice(gdln.LUMPINGS), default=None, help=LUMP_HELP)
@click.option("--init", default=None, metavar="VALUE", help=INIT_HELP)
@click.option(
    "--symbolic",
    default=None,
    metavar="NAMES",
    help="Keep these integer parameters as symbols (e.g. M,K): orbit sizes, counts and "
    "the equations become expressions in them (the symmetry quotient of a repeat: family).",
)
@click.option(
    "--quotient/--no-quotient",
    default=None,
    help="Derive from one context per orbit of the file's symmetry (the default when the "
    "task has a repeat: family of contexts; the output names the route, or why the "
    "symmetry does not hold), or from every context.",
)
@output_options(("text", "latex", "json"), default="text", what="derivation")
def derive(
    file: str,
    params: tuple[str, ...],
    task: str | None,
    lump: str | None,
    init: str | None,
    symbolic: str | None,
    quotient: bool | None,
    fmt: str | None,
    out: str | None,
    force: bool,
) -> None:
    """Derive the reduced singular-value ODEs (Eq 10), lumped and simplified.

    \b
    Example:
      gdln derive graphs/routing.yaml --lump full --param M=10
      gdln derive graphs/routing.yaml --symbolic M,K
    """
    output = output_file(out, fmt, force, formats=("text", "latex", "json"))
    names = tuple(n.strip() for n in (symbolic or "").split(",") if n.strip())
    if names and quotient is False:
        raise CommandLineError("--symbolic needs the symmetry quotient; drop --no-quotient")
    problem = load_problem(file, params, task)
    reduction = gdln.reduce(
        problem,
        lump=setting(problem, "lump", lump, DEFAULT_LUMP),
        init=setting(problem, "init", initial_value(file, init), None),
        quotient=True if quotient is None else quotient,
        symbolic=names,
    )
    write(output, gdln.format_derivation(reduction, output.format))


@click.command()
@graph_arguments
@click.option("--lump", type=click.Choice(gdln.LUMPINGS), default=None, help=LUMP_HELP)
@click.option(
    "--t-max",
    type=float,
    default=None,
    help="Final time in units of tau (default: the file's solve.t_max, else 10).",
)
@click.option("--init", default=None, metavar="VALUE", help=INIT_HELP)
@click.option(
    "--lr",
    type=float,
    default=None,
    help="Iterate the exact gradient-descent map with this learning rate instead of the "
    "ODE (default: the file's solve.lr, else the ODE).",
)
@click.option("--ode", is_flag=True, help="Solve the ODE even if the file sets solve.lr.")
@click.option(
    "--points", type=int, default=201, show_default=True, help="Number of recorded times."
)
@click.option(
    "--route",
    type=click.Choice(["auto", "symbolic", "moments", "matrix"]),
    default="auto",
    show_default=True,
    help="symbolic: the reduced ODE of `derive`; moments: the same expected dynamics "
    "evaluated without listing paths (one variable per edge, no lumping); auto: symbolic "
    "unless the problem has too many paths; matrix: the full-matrix flow (Eqs. 3-4), which "
    "needs no common bases, from random weights whose singular values all equal the "
    "initial value (writes each edge's singular values).",
)
@output_options(("json", "csv"), default="json", what="trajectory")
def solve(
    file: str,
    params: tuple[str, ...],
    task: str | None,
    lump: str | None,
    t_max: float | None,
    init: str | None,
    lr: float | None,
    ode: bool,
    points: int,
    route: str,
    fmt: str | None,
    out: str | None,
    force: bool,
) -> None:
    """Solve the reduced dynamics numerically; write t, loss and every variable.

    \b
    Example:
      gdln solve graphs/routing.yaml --t-max 30 -o routing.json
      gdln solve graphs/resnet_sd.yaml --param L=1000    # moment route
      gdln solve graphs/chain.yaml --route matrix       # full matrices, no bases needed
    """
    output = output_file(out, fmt, force, formats=("json", "csv"))
    if ode and lr is not None:
        raise CommandLineError(f"--ode and --lr {lr}: give one (the ODE or the map)")
    if route == "matrix" and lump is not None:
        raise CommandLineError(
            f"--lump {lump} and --route matrix: the full matrices are not lumped"
        )
    problem = load_problem(file, params, task)
    initial = setting(problem, "init", initial_value(file, init), None)
    horizon, rate = gdln.solution.check_solve_settings(  # before reducing
        setting(problem, "t_max", t_max, 10),
        lr=None if ode else setting(problem, "lr", lr, None),
        n_points=points,
    )
    if route == "matrix":
        full = gdln.solve_full(problem, t_max=horizon, n_points=points, lr=rate, init=initial)
        trajectory = full.without_weights()
    else:
        model = _model(problem, route, lump, initial)
        trajectory = gdln.solve(model, t_max=horizon, lr=rate, n_points=points)
    write(output, gdln.format_trajectory(trajectory, output.format))


def _model(
    problem: gdln.Problem, route: str, lump: str | None, init: Any
) -> gdln.Reduction | gdln.ExpectedDynamics:
    """The reduction (symbolic route) or the expected dynamics (moment route) to solve."""
    if route == "moments":
        return gdln.expected_dynamics(problem, init=init)
    try:
        return gdln.reduce(problem, lump=setting(problem, "lump", lump, DEFAULT_LUMP), init=init)
    except gdln.TooManyPathsError:
        if route == "symbolic":
            raise
        return gdln.expected_dynamics(problem, init=init)
