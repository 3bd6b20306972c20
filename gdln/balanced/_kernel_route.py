r"""The tangent kernel along any solved trajectory: one call, chosen by how it was solved.

What ``gdln solve FILE --kernel`` computes. A trajectory says how it was solved in
``meta["route"]``, and each route gives the weights, or the products of them the kernel
needs, its own way:

* ``"lambda-balanced"`` (:func:`gdln.solve_from_weights`, :func:`gdln.solve_balanced`):
  the representations $W_1^\top W_1(t)$, $W_2W_2^\top(t)$ of each pathway
  (:func:`~gdln.balanced.balanced_kernels`; Braun et al. 2022, Dominé et al. 2025);
* ``"matrix"`` (the full-matrix flow of Eqs. (3)-(4) of Saxe, Sodhani & Lewallen 2022):
  the recorded weights ``W[<edge>]`` themselves;
* a reduced route (:func:`gdln.solve` of a :class:`~gdln.Reduction`): the decoupled
  weights $W_e(t) = R_{t(e)}B_e(t)R_{s(e)}^\top$ of Eq. (9)
  (:func:`~gdln.balanced.decoupled_kernels`). On the symmetry quotient the reduced
  variables are those of one context per orbit, so the whole network's reduction (every
  context, the same $b(0)$ and weight decay; exact, since tying by symmetry is exact for
  the flow and the map) is solved again at the same times, and ``origin`` says so;
* the moment route has no bases per mode, so no weights: refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._edge import edge_name
from .._errors import GdlnError
from ..reduction._moments import ExpectedDynamics
from ..reduction._system import Reduction
from ..solution._trajectory import Trajectory
from ..task._problem import Problem
from ._trajectory_kernel import (
    TrajectoryKernels,
    balanced_kernels,
    decoupled_kernels,
    kernels_of_weights,
)

__all__ = ["trajectory_kernels"]

BALANCED_ROUTE = "lambda-balanced"
"""``meta["route"]`` of a closed-form λ-balanced solution (:func:`gdln.solve_from_weights`)."""
MATRIX_ROUTE = "matrix"
"""``meta["route"]`` of the full-matrix flow (:func:`gdln.solve`, ``route="matrix"``)."""


def trajectory_kernels(
    model: Problem | Reduction | ExpectedDynamics, trajectory: Trajectory, *, seed: int = 0
) -> TrajectoryKernels:
    r"""The NTK, the kernel distance and the hidden representations along a solved trajectory.

    Parameters
    ----------
    model
        What was solved: the :class:`~gdln.Problem` of a λ-balanced or full-matrix
        trajectory (:func:`gdln.solve_from_weights`, ``gdln.solve(route="matrix")``), or
        the reduction :func:`gdln.solve` solved for a reduced one
        (:func:`gdln.solution.dynamics_of` gives it from a problem).
    trajectory
        The solution; ``meta["route"]`` says how it was solved (module docstring).
    seed
        Seed of the hidden-node bases of Eq. (9) for a reduced trajectory (the kernels do
        not depend on it).

    Returns
    -------
    TrajectoryKernels
        At every time of ``trajectory``: the NTK over the trained edges on the task's
        examples, $S(t)$ (:attr:`~gdln.TrajectoryKernels.distance`) and $h_v^\top h_v$ of
        each hidden node; ``origin`` says how they were obtained, and
        :meth:`~gdln.TrajectoryKernels.added_to` records them in the trajectory.

    Raises
    ------
    GdlnError
        One line naming the route and why: the moment route (no bases per mode), a
        full-matrix trajectory without its weights, a reduced trajectory given with its
        problem instead of its reduction, a reduction that keeps parameters as symbols;
        or, as for :func:`~gdln.balanced.decoupled_kernels` and
        :func:`~gdln.balanced.balanced_kernels`, random gates, a trajectory that does not
        belong to ``model``, or kernels too large to hold.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (3)-(4) and (9); Braun, Dominé, Fitzgerald &
    Saxe (2022); Dominé et al. (2025); Jacot, Gabriel & Hongler (2018) (the NTK); Kunin
    et al. (2024), "Get rich quick" (the kernel distance).

    Examples
    --------
    >>> import gdln
    >>> problem = gdln.load("graphs/xor.yaml", params={"hidden": 2})
    >>> reduction = gdln.solution.dynamics_of(problem)
    >>> trajectory = gdln.solve(reduction, t_max=4, points=3)
    >>> kernels = gdln.trajectory_kernels(reduction, trajectory)
    >>> kernels.ntk.shape, float(kernels.distance[0])
    ((3, 4, 4), 0.0)
    """
    route = str(trajectory.meta.get("route", ""))
    problem = model if isinstance(model, Problem) else model.problem
    if route == BALANCED_ROUTE:
        return balanced_kernels(problem, trajectory)
    if route == MATRIX_ROUTE:
        return _matrix_kernels(problem, trajectory)
    if isinstance(model, ExpectedDynamics) or route == "moments":
        raise GdlnError(
            f"{problem.source}: no kernel on route 'moments': the moment route evaluates the "
            "expected loss without each edge's mode bases (Eq. 9), so it has no weights; "
            "solve with --route contexts (route='contexts') or --route matrix"
        )
    if isinstance(model, Problem):
        raise GdlnError(
            f"{problem.source}: the trajectory was solved on route {route or '?'!r}, whose "
            "weights need the reduction that was solved; pass "
            "gdln.solution.dynamics_of(problem) and solve that"
        )
    if model.whole is model:
        return decoupled_kernels(model, trajectory, seed=seed)
    whole = _whole(model, route)
    again = _solved_again(whole, trajectory)
    kernels = decoupled_kernels(whole, again, seed=seed)
    origin = (
        "the decoupled weights of Eq. (9), on the contexts route: the symmetry quotient has "
        "one context per orbit, so the whole network's reduction was solved again at the "
        "same times"
    )
    return TrajectoryKernels(
        t=trajectory.t,
        ntk=kernels.ntk,
        representations=kernels.representations,
        outputs=kernels.outputs,
        origin=origin,
    )


def _whole(reduction: Reduction, route: str) -> Reduction:
    """The whole network's reduction of one on the symmetry quotient, or a clear refusal."""
    try:
        return reduction.whole
    except GdlnError as err:
        raise GdlnError(f"no kernel on route {route!r}: {err}") from err


def _solved_again(whole: Reduction, trajectory: Trajectory) -> Trajectory:
    """``whole`` solved at the times of ``trajectory``, by the same dynamics."""
    from ..solution._dynamics import solve

    meta = trajectory.meta
    t = np.asarray(trajectory.t, dtype=float)
    settings: dict[str, Any] = {"t_max": float(t[-1]), "times": t}
    if meta.get("method") == "gd-map":
        settings.update(dynamics="gd-map", lr=meta.get("lr"))
    else:
        settings.update(dynamics="flow", method=meta.get("ode_method") or None)
    return solve(whole, **settings)


def _matrix_kernels(problem: Problem, trajectory: Trajectory) -> TrajectoryKernels:
    """The kernels from the weights a full-matrix trajectory recorded."""
    graph = problem.graph
    T = len(trajectory.t)
    weights = {}
    for e in graph.edges:
        shape = (int(graph.nodes[e[1]]["size"]), int(graph.nodes[e[0]]["size"]))
        fixed = graph.edges[e].get("fixed")
        if fixed is not None:
            weights[e] = np.broadcast_to(float(fixed) * np.eye(*shape), (T, *shape))
            continue
        try:
            weights[e] = np.asarray(trajectory.weights(e), dtype=float)
        except KeyError as err:
            raise GdlnError(
                f"{problem.source}: no kernel on route 'matrix' without the weights: the "
                f"trajectory holds none for edge {edge_name(e)} (pass it before "
                "without_weights())"
            ) from err
        if weights[e].shape != (T, *shape):
            raise GdlnError(
                f"{problem.source}: the recorded weights of edge {edge_name(e)} have shape "
                f"{weights[e].shape}; expected {(T, *shape)}"
            )
    return kernels_of_weights(
        problem, trajectory.t, weights, origin="the recorded weights of the full-matrix flow"
    )
