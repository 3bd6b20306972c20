"""``gdln simulate`` and ``gdln compare``: the full network in torch, and theory against it.

Both parse their options and make one call, :func:`gdln.simulate` or :func:`gdln.compare`;
every setting is an option built from its declaration (:mod:`gdln.settings`) and resolved
by the library. torch is imported only when a command runs, never for ``--help``.
"""

from __future__ import annotations

from typing import Any

import click

import gdln

from ._common import (
    echo,
    for_schedule,
    graph_arguments,
    load_problem,
    old_spellings,
    output_file,
    output_folder,
    refusals,
    schedule_option,
    setting_options,
)
from ._schedule import compare_summary

__all__ = ["compare", "simulate"]


@click.command("simulate")
@old_spellings("simulate")
@graph_arguments
@setting_options("simulate")
@schedule_option
@click.option(
    "-o", "--out", required=True, type=click.Path(), help="Trajectory file, .npz or .json."
)
@click.option("--force", is_flag=True, help="Replace an existing output file.")
@click.option(
    "--record-steps",
    default=None,
    metavar="log:N|K1,K2,...",
    help="Record at chosen steps instead of --points: 'log:N' for N log-spaced steps from "
    "1 to the last (plus step 0), or a comma list of step numbers.",
)
@click.option(
    "--eval-task",
    type=click.Path(),
    default=None,
    help="A task file whose examples are evaluated at each record (e.g. untrained routes).",
)
@click.option(
    "--rsm", is_flag=True, help="Record representational similarity matrices at hidden nodes."
)
@click.option(
    "--project",
    is_flag=True,
    help="Record each edge's weights projected on the reduction's mode vectors.",
)
@click.option(
    "--no-singular-values",
    "no_singular_values",
    is_flag=True,
    help="Leave out the singular values of every weight matrix (an SVD per edge at every "
    "record: most of a wide network's run).",
)
def simulate(
    file: str,
    params: tuple[str, ...],
    task: str | None,
    out: str,
    force: bool,
    record_steps: str | None,
    eval_task: str | None,
    rsm: bool,
    project: bool,
    no_singular_values: bool,
    follow_schedule: bool,
    **settings: Any,
) -> None:
    """Train the full gated network of FILE by gradient descent and save its trajectory.

    One weight matrix per edge, gates per example, loss of Eq. (1); gradients by the chain
    rule written out (--optimizer gd) or by torch autograd (sgd); seeds run batched. Time is in units of tau: t/tau = lr * step, and with --momentum
    mu t/tau = step * lr / (1 - mu), the gradient-flow time heavy ball approximates.

    \b
    Example:
      gdln simulate graphs/routing.yaml --lr 0.05 --t-max 40 --seeds 10 -o routing.npz
      gdln simulate graphs/routing.yaml --init-scheme decoupled --b0 0.1 --project -o dec.json
    """
    output = output_file(out, None, force, formats=("npz", "json"))
    if follow_schedule:
        extra = {"record_steps": record_steps, "eval_task": eval_task, "rsm": rsm}
        extra["no_singular_values"] = no_singular_values
        chosen = for_schedule(settings | extra | {"project": project}, "simulate")
        problem = load_problem(file, params, task)
        trajectory = gdln.simulate(problem, schedule=problem.require_schedule(), **chosen)
    else:
        trajectory = gdln.simulate(
            load_problem(file, params, task),
            eval_task=eval_task,
            project=project,
            record_steps=record_steps,
            rsm=rsm,
            record_singular_values=not no_singular_values,
            **settings,
        )
    assert output.path is not None
    with refusals():
        trajectory.save(output.path, force=force)
    final = trajectory.loss[-1]
    echo(
        f"wrote {output.path}: {len(trajectory.t)} records to t = {trajectory.t[-1]:g} tau, "
        f"final loss {final.mean():.6g} (mean over {final.size} seed(s))",
        err=True,
    )


@click.command("compare")
@old_spellings("compare")
@graph_arguments
@setting_options("compare")
@schedule_option
@click.option("-o", "--out", required=True, type=click.Path(), help="Output folder.")
@click.option("--force", is_flag=True, help="Replace the files of an existing output folder.")
def compare(
    file: str,
    params: tuple[str, ...],
    task: str | None,
    out: str,
    force: bool,
    follow_schedule: bool,
    **settings: Any,
) -> None:
    """Reduced theory (ODE and GD map) vs simulation (decoupled and random init).

    Writes loss.png/.svg, singular_values.png/.svg (Fig. 4e-f), the trajectories and
    metrics.json into OUT. Time is in units of tau: t/tau = lr * step. The loss figure
    marks the stage times gdln timescales predicts (metrics.json "stages").

    The route is the one rule of every command: where the statistics have no common
    bases (or with --route matrix) the theory is the full-matrix flow and GD map from
    each random run's own initial weights, seed by seed, and there is no decoupled run.

    The theory starts (--theory-start auto) at b0 where --b0 is given, or the file's
    solve.b0 when neither --b0 nor --init-scale is given; else at the mode strengths of
    the random initial weights. --b0 0.1 with --init-scale 0.2 is the setting of Fig. 4e.

    \b
    Example:
      gdln compare graphs/routing.yaml --param hidden=64 --lr 0.05 --t-max 40 --b0 0.1 -o cmp/
    """
    folder = output_folder(out, force)
    if follow_schedule:
        chosen = for_schedule(settings, "compare")
        problem = load_problem(file, params, task)
        with refusals():
            schedule = problem.require_schedule()
            result = gdln.compare(problem, folder, force=force, schedule=schedule, **chosen)
        echo(compare_summary(file, folder, result), err=True)
        return
    # the simulation process starts first: torch loads while the file is read
    with refusals(), gdln.comparison.start_simulations():
        result = gdln.compare(load_problem(file, params, task), folder, force=force, **settings)
    echo(f"wrote {folder}\n{_compare_summary(result.metrics)}", err=True)


def _compare_summary(m: Any) -> str:
    """The metrics of ``compare`` in three lines; every seed counted, censored as > t_max."""
    half, t_max = m["time_to_half_loss"], m["t_max"]
    gaps = gdln.comparison.summarize_seeds(m["random_vs_ode_per_seed"])
    times = gdln.comparison.summarize_seeds(half["random_per_seed"], t_max=t_max)

    def time(value: float | None) -> str:
        return f"> {t_max:g}" if value is None else f"{value:.3g}"

    first = f"  route {m['route']}" + (f" ({m['route_reason']})" if m.get("route_reason") else "")
    first += f"; theory from {m['starts']['ode']} ({m['theory_start_from']})\n"
    if m["route"] == "matrix":
        return (
            f"{first}"
            f"  max loss gap, fraction of L(0), seed by seed: random vs full-matrix GD map "
            f"{m['random_vs_map']:.1e}, vs full-matrix flow {gaps.text()}\n"
            f"  time to half loss (tau), random: {times.text()}"
        )
    return first + (
        f"  max loss gap, fraction of L(0): decoupled vs GD map {m['decoupled_vs_map']:.1e}, "
        f"random vs ODE {gaps.text()}\n"
        f"  time to half loss (tau): ODE {time(half['ode'])}, GD map {time(half['gd_map'])}, "
        f"decoupled {time(half['decoupled'])}\n"
        f"  time to half loss (tau), random: {times.text()}"
    )
