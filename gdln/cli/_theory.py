"""``gdln paths``, ``stats``, ``derive`` and ``solve``: the theory, from a graph file.

None of them imports torch. Each parses its options, calls the public API and prints.
"""

from __future__ import annotations

import json
from typing import Any

import click

import gdln

from ._common import (
    CommandLineError,
    display_options,
    for_schedule,
    graph_arguments,
    kernel_option,
    load_problem,
    old_spellings,
    output_file,
    output_options,
    schedule_option,
    setting_options,
    terminal_width,
    write,
)

__all__ = ["derive", "paths", "solve", "stats"]


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
@display_options
@click.option(
    "--compact",
    is_flag=True,
    help="Text: print each distinct statistic once, with every path or pair it holds for.",
)
@output_options(("text", "latex", "json"), default="text", what="statistics")
def stats(
    file: str,
    params: tuple[str, ...],
    task: str | None,
    numeric: bool,
    compact: bool,
    fmt: str | None,
    out: str | None,
    force: bool,
) -> None:
    """Print the path statistics and the bases U, V that diagonalise them (Eqs 5-8).

    When no common bases exist, print the statistics and which of them stay off-diagonal,
    then exit with status 2. Text output uses the terminal's width.

    \b
    Example:
      gdln stats graphs/context.yaml --param pathways=1 --format latex
      gdln stats graphs/chain.yaml --numeric
      gdln stats routing --compact
    """
    output = output_file(out, fmt, force, formats=("text", "latex", "json"))
    if compact and output.format != "text":
        raise CommandLineError(f"--compact: text output only, not {output.format}")
    problem = load_problem(file, params, task)
    width = terminal_width(output)
    try:
        reduction = gdln.reduce(problem, lump="none", route="contexts")  # every path's
    except gdln.NotDiagonalizableError as err:
        text = _without_bases(
            problem, err, output.format, width=width, numeric=numeric, compact=compact
        )
        write(output, text)
        raise
    text = gdln.format_statistics(
        problem, reduction, output.format, width=width, numeric=numeric, compact=compact
    )
    write(output, text)


def _without_bases(
    problem: gdln.Problem,
    err: gdln.NotDiagonalizableError,
    fmt: str,
    *,
    width: int = 80,
    numeric: bool = False,
    compact: bool = False,
) -> str:
    """The statistics (Eqs. 5-6), and which stay off-diagonal in the best bases found."""
    text = gdln.format_statistics(problem, None, fmt, width=width, numeric=numeric, compact=compact)
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
@old_spellings("derive")
@graph_arguments
@setting_options("derive")
@click.option(
    "--symbolic",
    default=None,
    metavar="NAMES",
    help="Keep these integer parameters as symbols (e.g. M,K): orbit sizes, counts and "
    "the equations become expressions in them (the symmetry quotient of a repeat: family).",
)
@output_options(("text", "latex", "json"), default="text", what="derivation")
def derive(
    file: str,
    params: tuple[str, ...],
    task: str | None,
    symbolic: str | None,
    fmt: str | None,
    out: str | None,
    force: bool,
    **settings: Any,
) -> None:
    """Derive the reduced singular-value ODEs (Eq 10), lumped and simplified.

    The route is chosen by the one rule of every command (--route auto): the symmetry
    quotient where the task has a repeat: family of contexts, else every context; the
    first line after the title says which.

    \b
    Example:
      gdln derive graphs/routing.yaml --lump full --param M=10
      gdln derive graphs/routing.yaml --symbolic M,K
    """
    output = output_file(out, fmt, force, formats=("text", "latex", "json"))
    names = tuple(n.strip() for n in (symbolic or "").split(",") if n.strip())
    reduction = gdln.reduce(load_problem(file, params, task), symbolic=names, **settings)
    write(output, gdln.format_derivation(reduction, output.format))


@click.command()
@old_spellings("solve")
@graph_arguments
@setting_options("solve")
@click.option(
    "--weights",
    "weights_file",
    type=click.Path(),
    default=None,
    metavar="W.npz",
    help="Start from these weights: one array W/<source>-><target> of shape (out, in) per "
    "trained edge, or a trajectory saved with weights (its first record). Solved in closed "
    "form where every pathway is a lambda-balanced two-layer pathway, else by the "
    "full-matrix flow; adds the representations.",
)
@click.option(
    "--balanced",
    "balanced_lambda",
    default=None,
    metavar="LAM",
    help="Start from a drawn lambda-balanced start, W2^T W2 - W1 W1^T = LAM I on every "
    "pathway (gdln.balanced_weights, scale 0.1, seed 0), solved in closed form.",
)
@kernel_option
@schedule_option
@output_options(("text", "json", "csv"), default="text", what="trajectory")
def solve(
    file: str,
    params: tuple[str, ...],
    task: str | None,
    weights_file: str | None,
    balanced_lambda: str | None,
    kernel: bool,
    follow_schedule: bool,
    fmt: str | None,
    out: str | None,
    force: bool,
    **settings: Any,
) -> None:
    """Solve the dynamics numerically; summarise it, or write t, loss and every variable.

    Without -o it prints a short summary (loss at the start and end, time to half the
    initial loss); -o x.json / x.csv or --format json / csv writes the whole trajectory.
    --kernel adds the tangent-kernel distance S(t) and each hidden node's
    representational similarity over the task's examples (not on the moment route).

    The route is that of `gdln derive` (one rule for every command); auto takes the moment
    route where the paths are too many to list, and --route matrix solves the full-matrix
    flow (Eqs. 3-4), which needs no common bases, from random weights whose singular values
    all equal b0 (it writes each edge's singular values). With --weights, --route matrix
    takes the full-matrix flow (or, with --dynamics gd-map, the GD map at --lr) from those
    weights, never the closed form.

    \b
    Example:
      gdln solve graphs/routing.yaml --t-max 30 -o routing.json
      gdln solve graphs/routing.yaml --dynamics gd-map --lr 0.05 -o map.json
      gdln solve graphs/resnet_sd.yaml --param L=1000    # moment route
      gdln solve graphs/chain.yaml --route matrix       # full matrices, no bases needed
      gdln solve graphs/xor.yaml --weights W.npz        # from given weights
      gdln solve graphs/xor.yaml --param hidden=1 --balanced 1   # a drawn start
      gdln solve graphs/xor.yaml --kernel -o xor.csv    # with S(t) and h^T h
    """
    output = output_file(out, fmt, force, formats=("text", "json", "csv"))
    if settings["route"] == "matrix" and settings["lump"] is not None:
        raise CommandLineError(
            f"--lump {settings['lump']} and --route matrix: the full matrices are not lumped"
        )
    problem = load_problem(file, params, task)
    if follow_schedule:
        _solve_schedule(problem, file, output, weights_file, balanced_lambda, kernel, settings)
        return
    how = {k: settings.pop(k) for k in ("route", "lump", "b0", "weight_decay")}
    if weights_file is not None and balanced_lambda is None and how["route"] == "matrix":
        clash = [f"--{k}" for k in ("lump", "b0") if how[k] is not None]
        if clash or settings["method"] is not None:
            raise CommandLineError(
                f"--weights and {(clash or ['--method'])[0]}: the full-matrix route from "
                "given weights takes neither"
            )
        model: gdln.Problem | gdln.Reduction | gdln.ExpectedDynamics = problem
        trajectory = gdln.solve(  # the settings read the options' text
            problem,
            weights=gdln.read_weight_file(problem, weights_file),
            route="matrix",
            t_max=settings["t_max"],
            lr=settings["lr"],
            dynamics=settings["dynamics"],
            points=settings["points"],
            weight_decay=how["weight_decay"],
        )
    elif weights_file is not None or balanced_lambda is not None:
        given = {"--lump": how["lump"], "--b0": how["b0"], "--route": how["route"]}
        given |= {f"--{k}": settings[k] for k in ("dynamics", "lr", "method")}
        clash = [name for name, value in given.items() if value is not None]
        if weights_file is not None and balanced_lambda is not None:
            clash.insert(0, "--balanced")
        if clash:
            what = "--weights" if weights_file is not None else "--balanced"
            raise CommandLineError(
                f"{what} and {clash[0]}: a start from weights is solved by its own route "
                "(lambda-balanced closed form, else the full-matrix flow)"
            )
        model = problem
        trajectory = _from_weights(
            problem,
            weights_file,
            balanced_lambda,
            t_max=settings["t_max"],
            points=settings["points"],
            weight_decay=how["weight_decay"],
        )
    else:
        model = problem
        resolved = problem.settings.given(**how)
        if kernel and resolved.route != "matrix":
            # the kernel needs the reduction's bases: obtain it here, then solve it
            try:
                model = gdln.solution.dynamics_by_route(problem, resolved)
                how = {}  # applied already
            except gdln.NotDiagonalizableError:
                if resolved.route != "auto":
                    raise  # else the route rule's full-matrix flow, whose weights it records
        trajectory = gdln.solve(model, **settings, **how)
    kernels = gdln.trajectory_kernels(model, trajectory) if kernel else None
    if output.format == "text":
        write(output, _solve_summary(file, trajectory, kernels))
        return
    if kernels is not None:
        trajectory = kernels.added_to(trajectory)
    write(output, gdln.format_trajectory(trajectory.without_weights(), output.format))


def _solve_schedule(
    problem: gdln.Problem,
    file: str,
    output: Any,
    weights_file: str | None,
    balanced_lambda: str | None,
    kernel: bool,
    settings: dict[str, Any],
) -> None:
    """``gdln solve --schedule``: the file's schedule phase by phase, as ``gdln schedule``."""
    from ._schedule import solved, write_run

    chosen = for_schedule(settings | {"balanced": balanced_lambda, "kernel": kernel}, "solve")
    write_run(output, file, solved(problem, weights_file, chosen))


def _from_weights(
    problem: gdln.Problem,
    weights_file: str | None,
    balanced_lambda: str | None,
    **settings: str | None,
) -> gdln.Trajectory:
    """``gdln solve --weights/--balanced``: the dynamics from given or drawn weights."""
    if weights_file is not None:
        weights = gdln.read_weight_file(problem, weights_file)
    else:
        lam = _number("--balanced", balanced_lambda)
        weights = gdln.balanced_weights(problem, lam=lam)
    return gdln.solve_from_weights(
        problem,
        weights,
        t_max=settings["t_max"],
        points=settings["points"],
        weight_decay=settings["weight_decay"],
    )


def _number(option: str, text: str | None) -> float:
    """A finite number from an option's text (read exactly, never evaluated)."""
    try:
        return float(gdln.settings.FINITE.parse(text))
    except ValueError as err:
        raise CommandLineError(f"{option}: {err}") from None


def _solve_summary(
    file: str, trajectory: gdln.Trajectory, kernels: gdln.TrajectoryKernels | None = None
) -> str:
    """A solve in a few lines: what was solved, the loss at the start and the end, the
    time to half the initial loss, and with ``--kernel`` the largest kernel distance, when,
    and its value at the end
    (the whole trajectory is what -o / --format writes)."""
    t, loss = trajectory.t, trajectory.loss
    meta = trajectory.meta
    variables = [k for k in trajectory.series if "loss" not in k]  # not the per-context losses
    half = gdln.time_to_half_loss(t, loss)
    reached = f"{half:.4g} tau" if half is not None else f"never (before t = {t[-1]:g} tau)"
    route = meta.get("route") or meta.get("system") or "?"
    reason = meta.get("route_reason") or ""
    if reason and route != "quotient":  # why auto took it (the quotient says so in derive)
        route = f"{route}; {reason}"
    share = f" ({loss[-1] / loss[0]:.3g} of the initial loss)" if loss[0] > 0 else ""
    lines = [
        f"solved {file}: {len(t)} points to t = {t[-1]:g} tau (route: {route})",
        f"  loss {loss[0]:.6g} at t = {t[0]:g}, {loss[-1]:.6g} at t = {t[-1]:g}{share}",
        f"  time to half the initial loss: {reached}",
        f"  {len(variables)} recorded series: {_listed(variables)}",
    ]
    if kernels is not None:
        nodes = list(kernels.representations)
        largest, when = kernels.largest_distance
        lines.append(
            f"  kernel distance S(t): largest {largest:.4g} at t = {when:g}, "
            f"{kernels.distance[-1]:.4g} at t = {t[-1]:g} (similarity of {len(nodes)} "
            f"hidden nodes: {_listed(nodes)})"
        )
    lines += [
        "  the whole trajectory: -o FILE.json or FILE.csv, or --format json|csv",
    ]
    return "\n".join(lines)


def _listed(names: list[str], *, shown: int = 8) -> str:
    """At most ``shown`` names, then how many more."""
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more"
