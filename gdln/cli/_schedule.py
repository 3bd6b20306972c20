"""``gdln schedule``: a file's schedule of contexts solved phase by phase.

It parses its options, makes one call, :func:`gdln.solve` with ``schedule=``, and prints the
phases, the route each took, every context's loss at each phase's end and the measures
(forgetting, transfer, savings), or writes the whole run (``-o``) and the measures
(``--measures``). Nothing heavy is imported to show its help.
"""

from __future__ import annotations

from typing import Any

import click

import gdln

from ._common import (
    CommandLineError,
    graph_arguments,
    load_problem,
    output_file,
    output_folder,
    output_options,
    refusals,
    setting_options,
    shown,
    write,
)

__all__ = ["compare_summary", "schedule", "schedule_summary", "solved", "write_run"]


@click.command("schedule")
@graph_arguments
@setting_options("schedule")
@click.option(
    "--weights",
    "weights_file",
    type=click.Path(),
    default=None,
    metavar="W.npz",
    help="Start from these weights (as gdln solve --weights): one array W/<source>-><target> "
    "per trained edge, or a trajectory saved with weights (its first record).",
)
@click.option(
    "--measures",
    "measures_out",
    type=click.Path(),
    default=None,
    metavar="FILE",
    help="Also write the measures per context and phase (end loss, transfer, forgetting, "
    "savings) to FILE, .json or .csv.",
)
@click.option(
    "--compare",
    "compare_out",
    type=click.Path(),
    default=None,
    metavar="DIR",
    help="Also train the full network through the schedule, from the decoupled weights of "
    "Eq. (9) (which the reduced GD map at --lr follows to rounding) and from --seeds random "
    "starts (--init-scale), and write theory against simulation, every context's loss with "
    "the phases shaded, into DIR (schedule_loss.png, metrics.json, theory.json).",
)
@output_options(("text", "json", "csv"), default="text", what="run (t, loss, context losses)")
def schedule(
    file: str,
    params: tuple[str, ...],
    task: str | None,
    weights_file: str | None,
    measures_out: str | None,
    compare_out: str | None,
    fmt: str | None,
    out: str | None,
    force: bool,
    **settings: Any,
) -> None:
    """Solve the file's schedule phase by phase; print routes, losses per context, forgetting.

    The schedule is the graph file's schedule: section (blocked, interleaved or any order of
    contexts; see the schedules guide). Each phase starts from the previous phase's end:
    the reduced ODE or GD map while the phases share the start's bases, else the
    lambda-balanced closed form or the full-matrix flow. Without -o it prints each phase
    (times, probabilities, route and why), each context's loss at every phase's end and
    the measures; -o x.json / x.csv writes the run (t, loss, every context's loss, the
    phases in meta), which gdln plot draws with the phases shaded.

    \b
    Example:
      gdln schedule context
      gdln schedule context --param pathways=2 -o run.json
      gdln plot run.json -o run.png
      gdln schedule context --measures measures.csv
    """
    output = output_file(out, fmt, force, formats=("text", "json", "csv"))
    measures = None
    if measures_out is not None:
        measures = output_file(measures_out, None, force, formats=("json", "csv")).path
        if output.path is not None and measures == output.path:
            raise CommandLineError(
                f"--measures {shown(measures_out)} and -o {shown(out or '')}: the same file"
            )
    problem = load_problem(file, params, task)
    if compare_out is not None:
        _compare(problem, file, compare_out, force, settings)
        return
    for name in ("init_scale", "seeds"):
        if settings.pop(name) is not None:
            raise CommandLineError(f"--{name.replace('_', '-')}: only with --compare")
    run = solved(problem, weights_file, settings)
    if measures is not None:
        with refusals():
            run.measures.save(measures, force=force)
        click.echo(f"wrote {measures}", err=True)
    write_run(output, file, run)


def solved(
    problem: gdln.Problem, weights_file: str | None, settings: dict[str, Any]
) -> gdln.ScheduleResult:
    """The schedule solved from ``--weights`` or the options' start (one public call)."""
    weights = None
    if weights_file is not None:
        if settings["b0"] is not None:
            raise CommandLineError("--weights and --b0: a start from weights has no b0")
        weights = gdln.read_weight_file(problem, weights_file)
    schedule = problem.require_schedule()
    trajectory = gdln.solve(problem, schedule=schedule, weights=weights, **settings)
    return gdln.schedule.ScheduleResult.of(trajectory)


def write_run(output: Any, file: str, run: gdln.ScheduleResult) -> None:
    """The summary as text, else the run (without weights) as JSON or CSV."""
    if output.format == "text":
        write(output, schedule_summary(file, run))
        return
    write(output, gdln.format_trajectory(run.trajectory.without_weights(), output.format))


def _compare(
    problem: gdln.Problem, file: str, folder: str, force: bool, settings: dict[str, Any]
) -> None:
    """``--compare DIR``: the schedule's theory against its simulation, one public call."""
    path = output_folder(folder, force)
    unused = [f"--{k.replace('_', '-')}" for k in ("lump", "route", "method", "dynamics")]
    given = [name for name in unused if settings.pop(name[2:].replace("-", "_")) is not None]
    if given:
        raise CommandLineError(
            f"--compare and {given[0]}: the comparison takes the GD map at --lr on the route "
            "that holds for each phase"
        )
    with refusals():
        schedule = problem.require_schedule()
        result = gdln.compare(problem, path, force=force, schedule=schedule, **settings)
    click.echo(compare_summary(file, path, result), err=True)


def compare_summary(file: str, folder: Any, result: gdln.schedule.ScheduleComparison) -> str:
    """A schedule's comparison in a few lines: per context the largest gaps."""
    lines = [f"wrote {folder}: theory (reduced GD map) against simulation, {file}"]
    for label, m in result.metrics["contexts"].items():
        lines.append(
            f"  {label}: decoupled start {m['decoupled_vs_map']:.2g}, random start "
            f"{m['random_vs_map']:.2g} of L(0) at most"
        )
    return "\n".join(lines)


def schedule_summary(file: str, run: gdln.ScheduleResult) -> str:
    """A schedule in a few lines: each phase with its route, each context's loss at the
    start and at every phase's end, and the measures that are not empty."""
    meta = run.trajectory.meta
    method = "gradient descent, lr " + f"{meta['lr']:g}" if meta.get("lr") else "gradient flow"
    lines = [
        f"{shown(file)}: {len(run.phases)} phases, t = 0 .. {run.boundaries[-1]:g} tau, {method}",
        "",
        "phases:",
    ]
    for k, phase in enumerate(run.phases):
        mix = ", ".join(f"{c} {p:.3g}" for c, p in phase.probabilities.items() if p > 0)
        lines.append(
            f"  {k}  {phase.name:<14} t {phase.start:g} .. {phase.end:g}  [{mix}]  "
            f"route {phase.route}"
        )
        if phase.why and (k == 0 or phase.why != run.phases[k - 1].why):
            lines.append(f"       why: {phase.why}")
        for pathways, time in phase.stages:
            lines.append(f"       stage {' + '.join(pathways)} at t ~ {time:.4g}")
    m = run.measures
    width = max(len(label) for label in run.labels)
    names = [f"{k}" for k in range(len(run.phases))]
    lines += ["", "loss per context (at the start, then at the end of each phase):"]
    lines.append("  " + " " * width + "  " + "".join(f"{n:>11}" for n in ["start", *names]))
    for i, label in enumerate(run.labels):
        row = [float(m.start_loss[i, 0]), *(float(v) for v in m.end_loss[i])]
        lines.append(f"  {label:<{width}}  " + "".join(f"{v:>11.4g}" for v in row))
    forgot = {(c, k) for c, k, _, what, _ in m.rows() if what == "forgetting"}
    rows = [
        r
        for r in m.rows()
        if r[3] in ("forgetting", "savings") or (r[3] == "transfer" and (r[0], r[1]) not in forgot)
    ]
    if rows:
        lines += ["", "measures (context, phase, measure, value):"]
        lines += [
            f"  {c:<{width}}  {k}  {name:<14} {what:<11} {v:.4g}" for c, k, name, what, v in rows
        ]
    lines += ["", "(the whole run: -o run.json; gdln plot run.json -o run.png draws it)"]
    return "\n".join(lines)
