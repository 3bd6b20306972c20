r"""The full matrix dynamics (Eqs. 3-4 of Saxe et al. 2022), for any data and weights.

$$\tau\frac{d}{dt}W_e=\sum_{p\in\mathcal{P}(e)}W_{\bar t(p,e)}^\top\,\mathcal{E}(p)\,
W_{\bar s(p,e)}^\top,\qquad
\mathcal{E}(p)=\Sigma^{yx}(p)-\sum_{j\in\mathcal{T}(t(p))}W_j\,\Sigma^x(j,p).$$

These need no common bases: they hold whether or not the exact reduction applies, and
from any initial weights. Only active paths and co-active pairs enter (the rest have zero
statistics). With independent random gates the statistics are their expectations, so this
is the expected flow; fixed edges ($W_e = c\,I$) do not move.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np
from scipy.integrate import solve_ivp

from .._edge import Edge
from .._errors import GdlnError
from ..graphfile._reader import Problem
from ..paths._paths import Path, source_subpath, target_subpath
from ..paths._statistics import PathStatistics, path_statistics
from ..task._task import as_float
from ._trajectory import Trajectory

__all__ = ["full_flow", "solve_full"]


def _product(path: Path, weights: Mapping[Edge, np.ndarray], size: int) -> np.ndarray:
    r"""$W_p$: the ordered product along a path, target on the left (identity if empty)."""
    out = np.eye(size)
    for e in path.edges:
        out = weights[e] @ out
    return out


def full_flow(
    problem: Problem, weights: Mapping[Edge, np.ndarray], *, stats: PathStatistics | None = None
) -> dict[Edge, np.ndarray]:
    r"""$\tau\,dW_e/dt$ for every edge, by Eqs. (3)-(4) (equal to $-\partial\mathcal{L}/\partial W_e$).

    Parameters
    ----------
    problem
        The network and its task.
    weights
        Edge -> current weight matrix $W_e$.
    stats
        The problem's path statistics, when already computed (default: compute them).

    Returns
    -------
    dict
        Edge -> $\tau\,dW_e/dt$, the shape of ``weights[e]``; zero for fixed edges.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (3)-(4).
    """
    graph = problem.graph
    stats = stats or path_statistics(graph, problem.require_task())
    size = {v: graph.nodes[v]["size"] for v in graph.nodes}
    W = {p: _product(p, weights, size[p.source]) for p in stats.paths}
    by_target: dict[Hashable, list[Path]] = {}
    for p in stats.paths:
        by_target.setdefault(p.target, []).append(p)
    error = {}
    for p in stats.paths:
        E = as_float(stats.input_output[p]).copy()
        for j in by_target[p.target]:
            if (j, p) in stats.input:
                E -= W[j] @ as_float(stats.input[(j, p)])
        error[p] = E
    flow = {e: np.zeros_like(np.asarray(w, dtype=float)) for e, w in weights.items()}
    for p in stats.paths:
        for e in p.edges:
            if graph.edges[e].get("fixed") is not None:
                continue
            before, after = source_subpath(p, e), target_subpath(p, e)
            flow[e] += (
                _product(after, weights, size[after.source]).T
                @ error[p]
                @ _product(before, weights, size[p.source]).T
            )
    return flow


def solve_full(
    problem: Problem, weights: Mapping[Edge, np.ndarray], *, t_max: float, n_points: int = 201
) -> Trajectory:
    """Integrate Eqs. (3)-(4) from any initial weights; records the loss and each $W_e$.

    Parameters
    ----------
    problem
        The network and its task.
    weights
        Edge -> initial weight matrix $W_e(0)$.
    t_max
        The final time, in units of $\tau$.
    n_points
        Number of recorded times, evenly spaced on ``[0, t_max]``.

    Returns
    -------
    Trajectory
        The loss of Eq. (1) (expected over random gates) and ``"W[u->v]"`` ->
        ``(T, rows, cols)`` for each edge.

    Raises
    ------
    GdlnError
        ``t_max`` is not positive, or the ODE solver fails.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (1), (3)-(4).
    """
    if not t_max > 0:
        raise GdlnError(f"t_max must be a positive number, got {t_max!r}")
    stats = path_statistics(problem.graph, problem.require_task())
    edges = list(weights)
    shapes = [np.shape(weights[e]) for e in edges]
    splits = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]

    def unpack(y: np.ndarray) -> dict[Edge, np.ndarray]:
        return {
            e: part.reshape(s)
            for e, s, part in zip(edges, shapes, np.split(y, splits), strict=True)
        }

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        flow = full_flow(problem, unpack(y), stats=stats)
        return np.concatenate([flow[e].ravel() for e in edges])

    y0 = np.concatenate([np.asarray(weights[e], dtype=float).ravel() for e in edges])
    t_eval = np.linspace(0, t_max, n_points)
    result = solve_ivp(rhs, (0, t_max), y0, t_eval=t_eval, method="LSODA", rtol=1e-9, atol=1e-12)
    if not result.success:
        raise GdlnError(f"the ODE solver failed: {result.message}")
    examples = problem.examples()
    random = bool(problem.require_task().random_gates)
    losses: list[float] = []
    series: dict[str, list[np.ndarray]] = {f"W[{e[0]}->{e[1]}]": [] for e in edges}
    for y in result.y.T:
        w = unpack(y)
        losses.append(_expected_loss(problem, w, stats) if random else _loss(problem, w, examples))
        for e in edges:
            series[f"W[{e[0]}->{e[1]}]"].append(w[e])
    return Trajectory(
        t=result.t,
        loss=np.array(losses),
        series={k: np.array(v) for k, v in series.items()},
        meta={"method": "full-ode", "time_unit": "tau", "source": problem.source},
    )


def _expected_loss(
    problem: Problem, weights: Mapping[Edge, np.ndarray], stats: PathStatistics
) -> float:
    r"""Eq. (1) from the path statistics, averaged over random gates.

    $\tfrac12\langle\lVert y\rVert^2\rangle-\sum_p\mathrm{tr}(W_p\Sigma^{yx}(p)^\top)
    +\tfrac12\sum_{j,p}\mathrm{tr}(W_j\Sigma^x(j,p)W_p^\top)$.
    """
    graph = problem.graph
    task = problem.require_task()
    size = {v: graph.nodes[v]["size"] for v in graph.nodes}
    W = {p: _product(p, weights, size[p.source]) for p in stats.paths}
    total = 0.0
    for c in task.contexts:
        data = task.datasets[c.dataset]
        for f in c.targets.values():
            total += 0.5 * float(c.probability) * float(np.trace(as_float(data.moment(f, f))))
    for p in stats.paths:
        total -= float(np.sum(W[p] * as_float(stats.input_output[p])))
    for (j, p), m in stats.input.items():
        total += 0.5 * float(np.sum((W[j] @ as_float(m)) * W[p]))
    return total


def _loss(problem: Problem, weights: Mapping[Edge, np.ndarray], ex: object) -> float:
    """Eq. (1) on the examples by a forward pass."""
    import networkx as nx

    graph = problem.graph
    h = {}
    for v in nx.topological_sort(graph):
        if graph.in_degree(v) == 0:
            h[v] = ex.inputs[v]  # type: ignore[attr-defined]
            continue
        total = 0.0
        for u in graph.predecessors(v):
            g = ex.gates.get((u, v), 1.0)  # type: ignore[attr-defined]
            total = total + np.reshape(g, (-1, 1)) * (h[u] @ weights[(u, v)].T)
        h[v] = np.reshape(ex.gates.get(v, 1.0), (-1, 1)) * total  # type: ignore[attr-defined]
    loss = 0.0
    for v in graph.nodes:
        if graph.out_degree(v) == 0:
            err = ex.targets[v] - h[v]  # type: ignore[attr-defined]
            loss += 0.5 * float(ex.weights @ (err**2).sum(1))  # type: ignore[attr-defined]
    return loss
