r"""Solving the full matrix dynamics (Eqs. 3-4 of Saxe et al. 2022) from any weights.

They need no common bases: they hold whether or not the exact reduction applies (no
common bases, or a hidden node narrower than the data), and from any initial weights.
The flow is evaluated by :class:`~gdln.solution._flow.FlowPlan` (statistics in floats,
converted once). :func:`full_solution` (the matrix route of :func:`gdln.solve`)
integrates it with an explicit adaptive stepper (DOP853), which needs no Jacobian: an
implicit stepper's finite-difference Jacobian costs one evaluation of the flow per weight
entry. With ``lr`` it iterates gradient descent.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import networkx as nx
import numpy as np
import numpy.typing as npt
from scipy.integrate import solve_ivp

from .._bounded._limits import WorkMeter, check_memory, metering, tick
from .._edge import Edge, edge_name
from .._errors import GdlnError
from .._runtime._blas import SMALL_SIDE, blas_threads
from ..reduction._reduce import initial_values
from ..settings._choices import RTOL
from ..settings._declared import Settings
from ..task._problem import Problem, require_linear
from ._bounds import check_times
from ._flow import FlowPlan
from ._recording import Recording
from ._series import CONTEXT_LOSS, matrix_key
from ._trajectory import Trajectory

__all__ = [
    "full_solution",
    "initial_full_weights",
    "integrate_weights",
    "iterate_weights",
]

ATOL = 1e-13
"""Absolute tolerance (per weight entry) of the same integration."""
MAX_FULL_STEPS = 10_000_000
"""Most gradient-descent steps the full-matrix map iterates with ``lr``."""
SMALL_PRODUCTS = SMALL_SIDE
"""Largest matrix side for which the flow runs BLAS on one thread (faster for small
products, and unharmed by a loaded machine, where threaded BLAS stalls)."""


def full_solution(
    problem: Problem,
    settings: Settings,
    weights: Mapping[Edge, np.ndarray] | None = None,
    *,
    times: npt.ArrayLike | None = None,
) -> Trajectory:
    r"""Integrate Eqs. (3)-(4) from any initial weights, by resolved settings: the matrix
    route of :func:`gdln.solve` (whose docstring says what each setting does).

    ``weights`` (edge -> $W_e(0)$, every edge) default to random weights whose singular
    values all equal ``settings.b0`` (the analogue, without common bases, of the decoupled
    start of Eq. 9), drawn from ``settings.seed``, fixed edges $W_e = c\,I$. With
    ``settings.dynamics == "gd-map"`` plain gradient descent is iterated for
    ``round(t_max / lr)`` steps; weight decay $\gamma$ adds $-\gamma W_e$ to each
    trained edge's flow (the recorded loss stays Eq. 1). Records the loss, each
    ``"W[u->v]"`` ``(T, rows, cols)``, its singular values ``"sv[u->v]"`` and, without
    random gates, ``"context_loss"``."""
    require_linear(problem.graph, source=problem.source)
    n_points = settings.points
    lr = settings.lr if settings.dynamics == "gd-map" else None
    t_max, steps = _horizon(settings.t_max, lr, n_points)
    recorded = None if times is None else check_times(times, t_max, lr)
    _check_memory(problem, n_points if recorded is None else len(recorded))
    when = {"points": n_points} if recorded is None else {"times": tuple(recorded)}
    recording = Recording(**when, weights=True)
    if weights is None:
        weights = initial_full_weights(problem, settings, seed=settings.seed)
    edges = list(weights)
    values = _checked(problem, weights, edges)
    plan = FlowPlan.of(problem, edges, gamma=settings.weight_decay)
    meter = WorkMeter(
        f"{problem.source}: the full-matrix flow",
        horizon=t_max,
        advice="lower b0 or t_max" if lr is None else "raise lr or lower t_max",
    )
    with _blas_threads(plan, values), metering(meter):
        if lr is None:
            t_eval = recording.times_of(t_max)
            t, states = integrate_weights(plan, values, t_max, t_eval, problem.source)
            method = "full-ode"
        else:
            record = recording.steps_of(steps, lr=lr)
            t, states = iterate_weights(plan, values, lr, record, problem.source)
            method = "full-gd-map"
    return _trajectory(problem, plan, t, states, method, recording)


def _blas_threads(plan: FlowPlan, values: Sequence[np.ndarray]) -> AbstractContextManager[Any]:
    """One BLAS thread while the flow's products are small (see :data:`SMALL_PRODUCTS`)."""
    sides = [max(w.shape, default=0) for w in values]
    sides += [t.input.shape[0] for t in plan.targets if t.input is not None]
    return blas_threads(max(sides, default=0))


def _horizon(t_max: float, lr: float | None, n_points: int) -> tuple[float, int]:
    """Checked ``t_max`` and, with ``lr``, the number of steps."""
    if not (isinstance(t_max, (int, float)) and 0 < t_max < float("inf")):
        raise GdlnError(f"t_max must be a positive number, got {t_max!r}")
    if not (isinstance(n_points, int) and n_points >= 2):
        raise GdlnError(f"n_points must be an integer >= 2, got {n_points!r}")
    if lr is None:
        return float(t_max), 0
    if not (isinstance(lr, (int, float)) and 0 < lr < float("inf")):
        raise GdlnError(f"lr must be a positive number, got {lr!r}")
    steps = round(t_max / lr)
    if not 1 <= steps <= MAX_FULL_STEPS:
        raise GdlnError(
            f"t_max / lr = {t_max / lr:.3g} steps: expected 1 to {MAX_FULL_STEPS} steps"
        )
    return float(t_max), steps


MEMORY_COPIES = 40
"""Copies of all the weights the full-matrix route holds at its peak, beyond one per
recorded time: DOP853's 13 stage slopes and its dense output, the flow's products, and
the stacked series with their singular values."""


def _check_memory(problem: Problem, points: int) -> None:
    """Refuse weights that, recorded ``points`` times, would not fit the limit ``memory``
    (checked from the node sizes, before any weight is drawn)."""
    graph = problem.graph
    entries = sum(graph.nodes[u]["size"] * graph.nodes[v]["size"] for u, v in graph.edges)
    check_memory(
        8.0 * entries * (2 * points + MEMORY_COPIES),
        f"{problem.source}: the full-matrix flow of {entries} weights recorded {points} times",
        advice="lower --points or the node sizes",
    )


def _checked(
    problem: Problem, weights: Mapping[Edge, np.ndarray], edges: Sequence[Edge]
) -> list[np.ndarray]:
    """The weights as float arrays, each of its edge's shape; every edge needs one."""
    graph = problem.graph
    missing = [e for e in graph.edges if e not in weights]
    if missing:
        raise GdlnError(f"weights: no weight for edge {edge_name(missing[0])!r}")
    out = []
    for e in edges:
        if e not in graph.edges:
            raise GdlnError(f"weights: {edge_name(e)!r} is not an edge of {problem.source}")
        shape = (graph.nodes[e[1]]["size"], graph.nodes[e[0]]["size"])
        w = np.array(weights[e], dtype=float)
        if w.shape != shape:
            raise GdlnError(f"weights[{edge_name(e)!r}]: shape {w.shape}, expected {shape}")
        out.append(w)
    return out


def initial_full_weights(
    problem: Problem, settings: Settings, *, seed: int
) -> dict[Edge, np.ndarray]:
    r"""Random weights whose singular values all equal the initial value $b_e(0)$.

    $W_e = b_e(0)\,Q_e$ with $Q_e$ a random matrix with orthonormal rows or columns (the
    analogue, without common bases, of the decoupled start of Eq. 9 where every mode has
    $b_e = b_e(0)$); a fixed edge holds $W_e = c\,I$.

    Parameters
    ----------
    problem
        The network.
    settings
        Resolved settings: their ``b0`` is one number, or edge -> number (as for
        :func:`gdln.reduce`).
    seed
        Seed of the random $Q_e$.

    Returns
    -------
    dict
        Edge -> $W_e$, every edge of the graph.
    """
    graph = problem.graph
    scale = initial_values(problem, settings)
    rng = np.random.default_rng(seed)
    out = {}
    for e in graph.edges:
        rows, cols = graph.nodes[e[1]]["size"], graph.nodes[e[0]]["size"]
        fixed = graph.edges[e].get("fixed")
        if fixed is not None:
            out[e] = float(fixed) * np.eye(rows, cols)
            continue
        q, r = np.linalg.qr(rng.standard_normal((max(rows, cols), min(rows, cols))))
        q = q * np.sign(np.diag(r))
        out[e] = _initial_number(problem, e, scale[e]) * (q if rows >= cols else q.T)
    return out


def _initial_number(problem: Problem, edge: Edge, value: Any) -> float:
    """An initial value as a float, refused if it still holds a symbol."""
    try:
        return float(value)
    except TypeError as err:
        raise GdlnError(
            f"{problem.source}: init[{edge_name(edge)}] {value}: the full-matrix dynamics "
            "need a number"
        ) from err


def integrate_weights(
    plan: FlowPlan,
    values: list[np.ndarray],
    t_max: float,
    t_eval: np.ndarray,
    source: str = "",
    *,
    rtol: float = RTOL,
    atol: float = ATOL,
) -> tuple[np.ndarray, list[list[np.ndarray]]]:
    """DOP853 on the flattened weights from ``values`` at time 0, recorded at the times
    ``t_eval`` (in ``[0, t_max]``); metered (``tick``), overflow refused in one line."""
    shapes = [w.shape for w in values]
    splits = np.cumsum([w.size for w in values])[:-1]

    def unpack(y: np.ndarray) -> list[np.ndarray]:
        return [part.reshape(s) for s, part in zip(shapes, np.split(y, splits), strict=True)]

    def rhs(t: float, y: np.ndarray) -> np.ndarray:
        tick(t)
        with np.errstate(all="ignore"):
            out = np.concatenate([f.ravel() for f in plan.flow(unpack(y))])
        if not np.isfinite(out).all():
            raise GdlnError(_overflowed(source, t))
        return out

    y0 = np.concatenate([w.ravel() for w in values])
    t_eval = np.minimum(t_eval, t_max)
    result = solve_ivp(rhs, (0.0, t_max), y0, method="DOP853", t_eval=t_eval, rtol=rtol, atol=atol)
    if not result.success:
        where = f"{source}: " if source else ""
        raise GdlnError(f"{where}the full-matrix flow failed: {result.message}")
    return result.t, [unpack(y) for y in result.y.T]


def iterate_weights(
    plan: FlowPlan, values: list[np.ndarray], lr: float, steps: np.ndarray, source: str = ""
) -> tuple[np.ndarray, list[list[np.ndarray]]]:
    """Gradient descent with learning rate ``lr`` from ``values`` (step 0), recorded at the
    given steps (distinct, sorted); metered, overflow refused in one line."""
    record = sorted(set(steps.tolist()))
    weights = [w.copy() for w in values]
    states = []
    step = 0
    for target in record:
        while step < target:
            with np.errstate(all="ignore"):
                for w, f in zip(weights, plan.flow(weights), strict=True):
                    w += lr * f
            step += 1
            tick(step * lr)
            if not all(np.isfinite(w).all() for w in weights):
                raise GdlnError(_overflowed(source, step * lr))
        states.append([w.copy() for w in weights])
    return np.array(record, dtype=float) * lr, states


def _overflowed(source: str, t: float) -> str:
    where = f"{source}: " if source else ""
    return (
        f"{where}the full-matrix flow overflowed (a weight or its rate of change is no "
        f"longer a float) at t = {t:.4g} tau; lower the initial weights, b0 or t_max"
    )


def _trajectory(
    problem: Problem,
    plan: FlowPlan,
    t: np.ndarray,
    states: Sequence[Sequence[np.ndarray]],
    method: str,
    recording: Recording,
) -> Trajectory:
    """The loss (Eq. 1), per-context losses, weights and their singular values over time,
    as ``recording`` says."""
    random = bool(problem.require_task().random_gates)
    examples = None if random else problem.examples()
    losses, per_context = [], []
    for w in states:
        if examples is None:
            losses.append(plan.loss(w))
        else:
            total, contexts = _example_losses(
                problem, dict(zip(plan.edges, w, strict=True)), examples
            )
            losses.append(total)
            per_context.append(contexts)
    series: dict[str, np.ndarray] = {}
    for i, e in enumerate(plan.edges):
        stacked = np.array([w[i] for w in states])
        series[matrix_key("W", e)] = stacked
        series[matrix_key("sv", e)] = np.linalg.svd(stacked, compute_uv=False)
    meta: dict[str, Any] = {
        "method": method,
        "time_unit": "tau",
        "source": problem.source,
        "weight_decay": plan.weight_decay,
    }
    if per_context:
        series[CONTEXT_LOSS] = np.array(per_context)
        meta["context_labels"] = list(examples.context_labels)  # type: ignore[union-attr]
    return Trajectory(t=t, loss=np.array(losses), series=series, meta=meta, recording=recording)


def _example_losses(
    problem: Problem, weights: Mapping[Edge, np.ndarray], ex: Any
) -> tuple[float, list[float]]:
    """Eq. (1) on the examples by a forward pass, and its average within each context."""
    graph = problem.graph
    h: dict[Hashable, np.ndarray] = {}
    for v in nx.topological_sort(graph):
        if graph.in_degree(v) == 0:
            h[v] = ex.inputs[v]
            continue
        total: Any = 0.0
        for u in graph.predecessors(v):
            g = ex.gates.get((u, v), 1.0)
            total = total + np.reshape(g, (-1, 1)) * (h[u] @ weights[(u, v)].T)
        h[v] = np.reshape(ex.gates.get(v, 1.0), (-1, 1)) * total
    per_example: Any = 0.0
    for v in graph.nodes:
        if graph.out_degree(v) == 0:
            per_example = per_example + 0.5 * ((ex.targets[v] - h[v]) ** 2).sum(1)
    per_example = np.broadcast_to(per_example, np.shape(ex.weights))
    n = len(ex.context_labels)
    mass = np.bincount(ex.context, weights=ex.weights, minlength=n)
    within = np.bincount(ex.context, weights=ex.weights * per_example, minlength=n)
    contexts = [float(a / b) if b > 0 else 0.0 for a, b in zip(within, mass, strict=True)]
    return float(ex.weights @ per_example), contexts
