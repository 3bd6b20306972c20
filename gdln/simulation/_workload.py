r"""What a simulation's numbers imply, checked before torch allocates anything.

A horizon and a learning rate imply a number of steps (:func:`horizon_steps`); steps and
the recording settings imply a number of records; seeds, rows and node sizes imply the
numbers held per step. :func:`check_workload` refuses a run beyond
:class:`gdln.graphfile.Limits` (``steps``, ``points``, ``batch_elements``, and the
bytes those numbers take with their gradients and optimiser state against ``memory``)
with one line naming the numbers, the limit and its environment variable, and
:func:`warn_if_fixed_point` warns when the initial weights cannot move at all.

Only the standard library (and gdln's own light modules) is imported here.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Hashable, Mapping, Sequence

from .._bounded._limits import beyond, check_memory, current_limits
from .._edge import Edge
from .._errors import DegenerateStartWarning
from ..solution._bounds import steps_for
from ._errors import SimulationSpecError

BYTES = 8
"""Bytes of one number (float64; float32 halves it, counted as float64 to stay safe)."""
ACTIVATION_COPIES = 3
"""Copies of the activations held at the peak of a step: the forward values, their
gradients in the backward pass and the products being summed."""
WEIGHT_COPIES = 5
"""Copies of the weights: the weights, their gradients, two optimiser moments (Adam) and
the recorded copy."""

__all__ = ["check_workload", "horizon_steps", "warn_if_fixed_point"]


def horizon_steps(t_max: float, *, lr: float, momentum: float = 0.0) -> int:
    r"""The number of steps that reach the horizon ``t_max``: ``round(t_max (1 - mu) / lr)``.

    Time is $t/\tau = \mathrm{step}\cdot\mathrm{lr}/(1-\mu)$ (the Euler step of the
    gradient flow Eq. (2) of Saxe et al. 2022; heavy-ball momentum $\mu$ moves
    $\mathrm{lr}/(1-\mu)$ of flow time per step).

    Parameters
    ----------
    t_max
        The horizon in units of $\tau$, a finite number > 0.
    lr
        The learning rate, a finite number > 0.
    momentum
        Heavy-ball momentum $\mu\in[0, 1)$.

    Returns
    -------
    int
        The steps, from 1 to :class:`gdln.graphfile.Limits` ``steps``.

    Raises
    ------
    SimulationSpecError
        ``t_max`` or ``lr`` is not a finite number > 0, the horizon is less than half a
        step (zero steps), or it takes more steps than the limit.

    Examples
    --------
    >>> horizon_steps(40, lr=0.05)
    800
    >>> horizon_steps(10, lr=0.05, momentum=0.9)
    20
    """
    return steps_for(t_max, lr, momentum=momentum, cls=SimulationSpecError)


def check_workload(
    *,
    records: int,
    batch: int,
    steps: int,
    seeds: int,
    rows: int,
    sizes: Mapping[Hashable, int],
    edges: Sequence[Edge],
    eval_rows: int = 0,
) -> None:
    """Refuse a run whose steps, records or per-step numbers are beyond the limits.

    Parameters
    ----------
    records
        How many steps the run records (:func:`~gdln.simulation._settings.count_records`).
    batch
        The minibatch size of a minibatch optimiser, else 0.
    steps
        The number of updates.
    seeds
        The number of repetitions run side by side.
    rows
        The number of training examples.
    sizes
        Node -> width.
    edges
        The edges, ``(source, target)``.
    eval_rows
        The number of evaluation examples.

    Raises
    ------
    SimulationSpecError
        ``steps`` beyond ``Limits.steps``, the records beyond ``Limits.points``, or
        seeds x (rows x summed widths + weights) beyond ``Limits.batch_elements``.
    """
    limits = current_limits()
    if steps > limits.steps:
        raise SimulationSpecError(beyond("steps", f"steps={steps}"))
    if records > limits.points:
        raise SimulationSpecError(
            beyond("points", f"{records} records of {steps} steps")
            + "; record fewer (record_every, record_steps, --points)"
        )
    width = sum(int(n) for n in sizes.values())
    weights = sum(int(sizes[t]) * int(sizes[s]) for s, t in edges)
    held = max(rows, batch or 0, eval_rows)
    elements = seeds * (held * width + weights)
    if elements > limits.batch_elements:
        raise SimulationSpecError(
            beyond(
                "batch_elements",
                f"{seeds} seed(s) x ({held} rows x {width} units + {weights} weights) = "
                f"{elements:.3g} numbers per step",
            )
            + "; use fewer seeds or a smaller batch"
        )
    check_memory(
        BYTES * seeds * (ACTIVATION_COPIES * held * width + WEIGHT_COPIES * weights),
        f"{seeds} seed(s) of {held} rows x {width} units and {weights} weights, with "
        "gradients and optimiser state",
        cls=SimulationSpecError,
        advice="use fewer seeds or a smaller batch",
    )


def warn_if_fixed_point(
    order: Sequence[Hashable],
    edges: Sequence[Edge],
    trained: Collection[int],
    zero: bool,
    outputs: Collection[Hashable],
) -> None:
    r"""Warn when the initial weights are a fixed point of gradient descent.

    With every trained weight zero (``zero``), the gradient of Eq. (1) of Saxe et al. 2022
    vanishes exactly when every input-output path crosses at least two trained edges
    (each factor of a path's product is then multiplied by another zero); the weights,
    and the loss, never change.

    Parameters
    ----------
    order
        The nodes in topological order.
    edges
        The edges, ``(source, target)``.
    trained
        Indices (into ``edges``) of the trained edges.
    zero
        Whether every trained weight starts at exactly zero.
    outputs
        The output nodes.
    """
    if not zero or not trained:
        return
    fewest: dict[Hashable, float] = {}  # node -> fewest trained edges on a path to it
    into: dict[Hashable, list[int]] = {}
    for i, (_s, t) in enumerate(edges):
        into.setdefault(t, []).append(i)
    for v in order:
        ways = [fewest[edges[i][0]] + (i in trained) for i in into.get(v, [])]
        fewest[v] = min(ways) if ways else 0
    if all(fewest[v] >= 2 for v in outputs):
        warnings.warn(
            "the initial weights are a fixed point of gradient descent: every trained "
            "weight is 0 and every path crosses two or more trained edges, so the gradient "
            "is 0 and nothing will change (the loss stays flat); start from a small nonzero "
            "scale",
            DegenerateStartWarning,
            stacklevel=4,
        )
