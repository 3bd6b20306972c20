"""``gdln extract``: the gated network of a ReLU network's patterns, read off a run.

It parses its options and makes one call, :func:`gdln.extract`; the graph file and the
weights are written whole or not at all, and neither replaces a file without ``--force``.
"""

from __future__ import annotations

import click

import gdln

from ._common import echo, output_file, positive, refusals

__all__ = ["extract"]


@click.command("extract")
@click.argument("run", type=click.Path())
@click.option("--step", type=int, default=None, help="The recorded step (default: the last).")
@click.option("--seed", type=int, default=None, help="The seed (default: the run's first).")
@click.option(
    "--threshold",
    default=None,
    metavar="VALUE",
    help="An entry with |z| below this times its unit's largest |z| counts as near the "
    "kink (default 1e-3).",
)
@click.option("-o", "--out", required=True, type=click.Path(), help="The graph file, .yaml.")
@click.option(
    "--weights-out",
    type=click.Path(),
    default=None,
    help="Also write the weights at the step, W/<source>-><target> of shape (out, in), for "
    "gdln solve --weights.",
)
@click.option("--force", is_flag=True, help="Replace existing output files.")
def extract(
    run: str,
    step: int | None,
    seed: int | None,
    threshold: str | None,
    out: str,
    weights_out: str | None,
    force: bool,
) -> None:
    """Write the gated network of a ReLU network's patterns at a step as a graph file.

    RUN is a run of gdln simulate --record-patterns on a graph with activation: relu
    nodes. Units on for the same examples become one gated node and examples
    with one pattern one context; from the weights at that step (--weights-out) the graph's
    output and gradient are the ReLU network's exactly, until a pattern flips. Prints the
    groups, each gating class's share of the output, the pattern flips between records,
    the step from which they are frozen, the entries near the kink and what the graph
    leaves out.

    \b
    Example:
      gdln simulate xor_relu.yaml --record-patterns --t-max 80 --lr 0.4 -o run.npz
      gdln extract run.npz -o gated.yaml --weights-out gated.npz
      gdln solve gated.yaml --weights gated.npz --route matrix -o theory.json
    """
    graph = output_file(out, None, force, formats=("yaml",))
    weights = (
        None if weights_out is None else output_file(weights_out, None, force, formats=("npz",))
    )
    chosen = gdln.gating.THRESHOLD if threshold is None else positive("--threshold", threshold)
    found = gdln.extract(run, step=step, seed=seed, threshold=chosen)
    assert graph.path is not None
    with refusals():
        found.save(graph.path, force=force)
        if weights is not None:
            assert weights.path is not None
            found.save_weights(weights.path, force=force)
    echo(found.summary())
    written = [str(graph.path)] + ([] if weights is None else [str(weights.path)])
    echo(f"wrote {', '.join(written)}", err=True)
