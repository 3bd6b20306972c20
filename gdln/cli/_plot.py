"""``gdln plot``: a picture of any result file; it calls :func:`gdln.plotting.save_plot`."""

from __future__ import annotations

import click

import gdln

from ._common import output_file

__all__ = ["plot"]

FORMATS = ("png", "svg", "pdf")


@click.command("plot")
@click.argument("result", type=click.Path())
@click.option(
    "-o", "--out", required=True, type=click.Path(), help="The figure: .png, .svg or .pdf."
)
@click.option("--force", is_flag=True, help="Replace an existing output file.")
@click.option(
    "--x", "x", default=None, help="A sweep table's column on the x axis (default: its first)."
)
@click.option(
    "--y",
    "y",
    multiple=True,
    help="A sweep table's column to draw (repeatable; default: every non-integer column).",
)
@click.option(
    "--gated",
    is_flag=True,
    help="RESULT is a ReLU run recorded with --record-patterns: draw its loss against the "
    "full-matrix dynamics of its extracted gated network (gdln extract) from where the "
    "patterns freeze, and the pattern flips.",
)
@click.option(
    "--step",
    type=int,
    default=None,
    help="With --gated: the recorded step the gated network starts from (default: the "
    "freeze, or the first record when the patterns never freeze).",
)
def plot(
    result: str,
    out: str,
    force: bool,
    x: str | None,
    y: tuple[str, ...],
    gated: bool,
    step: int | None,
) -> None:
    """Draw a result file (solve, simulate, timescales, a sweep table, kernel.json).

    The format follows -o's suffix. A trajectory (solve's .json/.csv, simulate's
    .npz/.json, compare's runs) gets a panel for the loss and the loss per context, one
    for the variables per edge (or singular values) and one for the kernel distance S(t)
    where it has them; timescales JSON the plateau losses at the stage times.

    \b
    Example:
      gdln solve routing -o routing.json && gdln plot routing.json -o routing.png
      gdln timescales late_fusion --b0 1e-6 --format json -o stages.json
      gdln plot stages.json -o stages.svg
      gdln simulate relu.yaml --record-patterns --t-max 80 --lr 0.4 -o run.npz
      gdln plot run.npz --gated -o relu_theory.png
    """
    output = output_file(out, None, force, formats=FORMATS)
    assert output.path is not None
    gdln.plotting.save_plot(
        result, output.path, force=force, x=x, y=list(y) or None, gated=gated, step=step
    )
    click.echo(f"wrote {output.path}", err=True)
