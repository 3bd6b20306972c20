r"""The tangent kernel along any solved trajectory: one call, chosen by how it was solved.

What ``gdln solve FILE --kernel`` computes. A trajectory says how it was solved in
``meta["route"]``, and each route gives the weights, or the products of them the kernel
needs, its own way:

* ``"lambda-balanced"`` (:func:`gdln.solve_balanced`, and :func:`gdln.solve_from_weights`
  where it takes the closed form):
  the representations $W_1^\top W_1(t)$, $W_2W_2^\top(t)$ of each pathway
  (:func:`~gdln.balanced.balanced_kernels`; Braun et al. 2022, Dominé et al. 2025);
* ``"matrix"`` (the full-matrix flow of Eqs. (3)-(4) of Saxe, Sodhani & Lewallen 2022):
  the recorded weights ``W[<edge>]`` themselves;
* a reduced route (:func:`gdln.solve` of a :class:`~gdln.Reduction`): the decoupled
  weights $W_e(t) = R_{t(e)}B_e(t)R_{s(e)}^\top$ of Eq. (9)
  (:func:`~gdln.balanced.decoupled_kernels`). On the symmetry quotient each variable
  stands for every edge of its orbit (tying by symmetry is exact for the flow and the
  map), so the whole network's bases (:attr:`gdln.Reduction.whole`) take the solved
  values as they are; only where the quotient's modes are not the whole network's, index
  for index, is the whole network's reduction (every context, the same $b(0)$ and weight
  decay) solved again at the same times with the same tolerances, and ``origin`` says so;
* the moment route has no bases per mode, so no weights: refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._edge import edge_name
from .._errors import GdlnError
from .._runtime._blas import one_blas_thread
from ..reduction._moments import ExpectedDynamics
from ..reduction._system import Reduction
from ..solution._trajectory import Trajectory
from ..task._problem import Problem
from ._kernel_series import TrajectoryKernels
from ._solve import BALANCED_ROUTE
from ._trajectory_kernel import (
    balanced_kernels,
    decoupled_kernels,
    kernels_of_weights,
    mode_values,
    reduced_kernels,
)

__all__ = ["trajectory_kernels"]

MATRIX_ROUTE = "matrix"
"""``meta["route"]`` of the full-matrix flow (:func:`gdln.solve`, ``route="matrix"``)."""


@one_blas_thread()
def trajectory_kernels(
    model: Problem | Reduction | ExpectedDynamics, trajectory: Trajectory, *, seed: int = 0
) -> TrajectoryKernels:
    r"""The NTK, the kernel distance and the hidden representations along a solved trajectory.

    Parameters
    ----------
    model
        What was solved: the :class:`~gdln.Problem` of a λ-balanced or full-matrix
        trajectory (:func:`gdln.solve_balanced`, :func:`gdln.solve_from_weights`,
        ``gdln.solve(route="matrix")``), or
        the reduction :func:`gdln.solve` solved for a reduced one
        (:func:`gdln.solution.dynamics_by_route` gives it from a problem and its settings).
    trajectory
        The solution; ``meta["route"]`` says how it was solved (module docstring).
    seed
        Seed of the hidden-node bases of Eq. (9) for a reduced trajectory (the kernels do
        not depend on it).

    Returns
    -------
    TrajectoryKernels
        At every time of ``trajectory``: the NTK over the trained edges on the task's
        examples (each time's computed when asked for), $S(t)$ (:attr:`~gdln.TrajectoryKernels.distance`) and $h_v^\top h_v$ of
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
        belong to ``model``, or one time's kernel beyond the limit ``batch_elements``.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (3)-(4) and (9); Braun, Dominé, Fitzgerald &
    Saxe (2022); Dominé et al. (2025); Jacot, Gabriel & Hongler (2018) (the NTK); Kunin
    et al. (2024), "Get rich quick" (the kernel distance).

    Examples
    --------
    >>> import gdln
    >>> problem = gdln.load("graphs/xor.yaml", params={"hidden": 2})
    >>> reduction = gdln.solution.dynamics_by_route(problem, problem.settings)
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
            "gdln.solution.dynamics_by_route(problem, problem.settings) and solve that"
        )
    if model.whole is model:
        return decoupled_kernels(model, trajectory, seed=seed)
    whole = _whole(model, route)
    if _same_modes(model, whole):
        origin = (
            "the decoupled weights of Eq. (9) of every edge, each at the value of its orbit's "
            "variable on the symmetry quotient (tying by symmetry is exact)"
        )
        values = mode_values(model, trajectory)
    else:
        origin = (
            "the decoupled weights of Eq. (9), on the contexts route: the whole network's "
            "reduction solved again at the same times, with the same tolerances"
        )
        values = mode_values(whole, _solved_again(whole, trajectory))
    return reduced_kernels(whole, values, trajectory.t, seed=seed, origin=origin)


def _same_modes(quotient: Reduction, whole: Reduction) -> bool:
    """Whether the quotient's modes are the whole network's, index for index, so that
    each variable of the quotient gives $b_e^\alpha$ of every edge of its orbit."""
    if len(quotient.modes) != len(whole.modes):
        return False
    for mine, theirs in zip(quotient.modes, whole.modes, strict=True):
        if len(mine.vectors) != len(theirs.vectors):
            return False
        for a, b in zip(mine.vectors, theirs.vectors, strict=True):
            if set(a) != set(b) or any(
                np.shape(a[k]) != np.shape(b[k]) or not np.allclose(a[k], b[k], rtol=0, atol=1e-12)
                for k in a
            ):
                return False
    return True


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
        settings.update({k: float(meta[k]) for k in ("rtol", "atol") if k in meta})
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
