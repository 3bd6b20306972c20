r"""The full matrix dynamics (Eqs. 3-4 of Saxe et al. 2022), for any data and weights.

$$\tau\frac{d}{dt}W_e=\sum_{p\in\mathcal{P}(e)}W_{\bar t(p,e)}^\top\,\mathcal{E}(p)\,
W_{\bar s(p,e)}^\top,\qquad
\mathcal{E}(p)=\Sigma^{yx}(p)-\sum_{j\in\mathcal{T}(t(p))}W_j\,\Sigma^x(j,p).$$

These need no common bases: they hold whether or not the exact reduction applies, and
from any initial weights. Only active paths and co-active pairs enter (the rest have zero
statistics). With independent random gates the statistics are their expectations, so this
is the expected flow; fixed edges ($W_e = c\,I$) do not move.

Cost. The statistics are converted to floats once (:class:`FlowPlan`); one evaluation of
the flow then walks each path once, from its output back to its input, so a path of
length $L$ costs $O(L)$ matrix products. :func:`solve_full` integrates with an explicit
adaptive stepper (DOP853, as the reduced ODE's fast path), which needs no Jacobian: an
implicit stepper's finite-difference Jacobian costs one flow per weight entry.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import sympy as sp
from scipy.integrate import solve_ivp

from .._edge import Edge, edge_name
from .._errors import GdlnError, TaskSpecError
from ..graphfile._reader import Problem
from ..paths._paths import Path
from ..paths._statistics import PathStatistics, active_paths
from ..reduction._reduce import initial_values
from ..task._task import as_float, unbound_message
from ._trajectory import Trajectory

__all__ = ["full_flow", "solve_full"]

RTOL = 1e-10
"""Relative tolerance of the DOP853 integration of Eqs. (3)-(4)."""
ATOL = 1e-13
"""Absolute tolerance (per weight entry) of the same integration."""
MAX_FULL_STEPS = 10_000_000
SMALL_PRODUCTS = 1024
"""Largest matrix side for which the flow runs BLAS on one thread (faster for small
products, and unharmed by a loaded machine, where threaded BLAS stalls)."""
"""Most gradient-descent steps :func:`solve_full` iterates with ``lr``."""


MAX_DENSE_COLUMNS = 2048
r"""Largest number of input columns into one output whose $\Sigma^x$ is stored as one matrix."""


@dataclass(frozen=True)
class _Target:
    r"""The paths into one output, with their statistics side by side.

    ``columns[i]`` is the slice of path ``paths[i]``'s input in the stacked
    $[W_{p_1}, W_{p_2}, \dots]$; ``input_output`` is $[\Sigma^{yx}(p_1), \dots]$ and
    ``input`` the block matrix of $\Sigma^x(p_i, p_j)$ (``None`` when too large: then
    ``pairs`` lists the nonzero blocks).
    """

    paths: tuple[int, ...]
    columns: tuple[slice, ...]
    input_output: np.ndarray
    input: np.ndarray | None
    pairs: tuple[tuple[int, int, np.ndarray], ...]


@dataclass(frozen=True)
class FlowPlan:
    r"""The path statistics of a problem as floats, laid out for evaluating Eqs. (3)-(4).

    Attributes
    ----------
    edges
        The edges of the network, in the order of the weights.
    paths
        Per active path: the indices into ``edges`` of its edges, source first.
    targets
        Per output: its paths with their statistics (Eqs. 5-6) as stacked float arrays.
    trained
        Per edge, whether it is trained (fixed edges $W_e = c\,I$ do not move).
    constant
        $\tfrac12\langle\lVert y\rVert^2\rangle$, the loss of zero weights.
    """

    edges: tuple[Edge, ...]
    paths: tuple[tuple[int, ...], ...]
    targets: tuple[_Target, ...]
    trained: tuple[bool, ...]
    constant: float

    @classmethod
    def of(
        cls, problem: Problem, edges: Sequence[Edge], stats: PathStatistics | None = None
    ) -> FlowPlan:
        """The plan of ``problem`` for weights on ``edges`` (statistics found if not given)."""
        graph = problem.graph
        paths, yx, xx = _float_statistics(problem) if stats is None else _floats_of(stats)
        index = {e: i for i, e in enumerate(edges)}
        missing = [e for p in paths for e in p.edges if e not in index]
        if missing:
            raise GdlnError(f"weights: no weight for edge {edge_name(missing[0])!r}")
        by_target: dict[Hashable, list[int]] = defaultdict(list)
        for i, p in enumerate(paths):
            by_target[p.target].append(i)
        targets = tuple(_target(members, paths, yx, xx) for members in by_target.values())
        return cls(
            edges=tuple(edges),
            paths=tuple(tuple(index[e] for e in p.edges) for p in paths),
            targets=targets,
            trained=tuple(graph.edges[e].get("fixed") is None for e in edges),
            constant=_constant(problem),
        )

    def products(self, weights: Sequence[np.ndarray]) -> list[list[np.ndarray]]:
        r"""Per path, the partial products $W_{e_i}\cdots W_{e_1}$, $i = 1..L$ (the last is $W_p$)."""
        out = []
        for path in self.paths:
            partial = [weights[path[0]]]
            for i in path[1:]:
                partial.append(weights[i] @ partial[-1])
            out.append(partial)
        return out

    def _predicted(self, target: _Target, partial: Sequence[Sequence[np.ndarray]]) -> np.ndarray:
        r"""$[\sum_j W_j\Sigma^x(j, p)]_p$: the stacked predictions of Eq. (4)."""
        stacked = np.hstack([partial[p][-1] for p in target.paths])
        if target.input is not None:
            return stacked @ target.input
        out = np.zeros_like(stacked)
        for a, b, m in target.pairs:
            out[:, target.columns[b]] += partial[target.paths[a]][-1] @ m
        return out

    def flow(self, weights: Sequence[np.ndarray]) -> list[np.ndarray]:
        r"""$\tau\,dW_e/dt$ per edge (Eqs. 3-4); zero for fixed edges."""
        partial = self.products(weights)
        flow = [np.zeros_like(w) for w in weights]
        for target in self.targets:
            errors = target.input_output - self._predicted(target, partial)
            for p, columns in zip(target.paths, target.columns, strict=True):
                path = self.paths[p]
                G = errors[:, columns]  # E(p); then W_{after}^T E(p), walking back
                for i in range(len(path) - 1, -1, -1):
                    e = path[i]
                    if self.trained[e]:
                        flow[e] += G if i == 0 else G @ partial[p][i - 1].T
                    if i:
                        G = weights[e].T @ G
        return flow

    def loss(self, weights: Sequence[np.ndarray]) -> float:
        r"""Eq. (1) from the statistics (expected over random gates).

        $\tfrac12\langle\lVert y\rVert^2\rangle-\sum_p\mathrm{tr}(W_p\Sigma^{yx}(p)^\top)
        +\tfrac12\sum_{j,p}\mathrm{tr}(W_j\Sigma^x(j,p)W_p^\top)$.
        """
        partial = self.products(weights)
        total = self.constant
        for target in self.targets:
            stacked = np.hstack([partial[p][-1] for p in target.paths])
            predicted = self._predicted(target, partial)
            total += float(np.sum(stacked * (0.5 * predicted - target.input_output)))
        return total


def _target(
    members: Sequence[int],
    paths: Sequence[Path],
    yx: Sequence[np.ndarray],
    xx: Mapping[tuple[int, int], np.ndarray],
) -> _Target:
    """The stacked statistics of the paths ``members`` into one output."""
    widths = [yx[p].shape[1] for p in members]
    starts = np.concatenate([[0], np.cumsum(widths)]).astype(int)
    columns = tuple(slice(int(a), int(b)) for a, b in itertools.pairwise(starts))
    position = {p: i for i, p in enumerate(members)}
    pairs = tuple(
        (position[j], position[p], m) for (j, p), m in xx.items() if j in position and p in position
    )
    dense = None
    if starts[-1] <= MAX_DENSE_COLUMNS:
        dense = np.zeros((starts[-1], starts[-1]))
        for a, b, m in pairs:
            dense[columns[a], columns[b]] = m
    return _Target(
        paths=tuple(members),
        columns=columns,
        input_output=np.hstack([yx[p] for p in members]),
        input=dense,
        pairs=pairs,
    )


Statistics = tuple[tuple[Path, ...], list[np.ndarray], dict[tuple[int, int], np.ndarray]]


def _float_statistics(problem: Problem) -> Statistics:
    r"""Eqs. (5)-(6) in floats: paths, $\Sigma^{yx}(p)$ and $\Sigma^x(j, p)$ by path index.

    The sums of :func:`gdln.paths.path_statistics`, each dataset moment converted to
    floats once, so that exact data cost no symbolic arithmetic.
    """
    graph = problem.graph
    task = problem.require_task()
    active = active_paths(graph, task)
    survival = task.random_gates
    moments: dict[tuple[str, str, str], np.ndarray] = {}

    def moment(dataset: str, a: str, b: str) -> np.ndarray:
        if (dataset, a, b) not in moments:
            moments[(dataset, a, b)] = as_float(task.datasets[dataset].moment(a, b))
        return moments[(dataset, a, b)]

    yx: dict[int, np.ndarray] = {}
    xx: dict[tuple[int, int], np.ndarray] = {}
    for k, (c, found) in enumerate(zip(task.contexts, active.gates, strict=True)):
        by_target: dict[Hashable, list[int]] = defaultdict(list)
        for i in found:
            p = active.paths[i]
            by_target[p.target].append(i)
            if p.target in c.targets:
                w = _number(c.probability * active.gate(k, i).expectation(survival))
                term = w * moment(c.dataset, c.targets[p.target], c.inputs[p.source])
                yx[i] = yx[i] + term if i in yx else term
        for members in by_target.values():
            for j, i in itertools.product(members, repeat=2):
                gate = active.gate(k, j) * active.gate(k, i)
                w = _number(c.probability * gate.expectation(survival))
                term = w * moment(
                    c.dataset, c.inputs[active.paths[j].source], c.inputs[active.paths[i].source]
                )
                xx[(j, i)] = xx[(j, i)] + term if (j, i) in xx else term
    for i, p in enumerate(active.paths):
        if i not in yx:
            yx[i] = np.zeros((graph.nodes[p.target]["size"], graph.nodes[p.source]["size"]))
    return active.paths, [yx[i] for i in range(len(active.paths))], xx


def _floats_of(stats: PathStatistics) -> Statistics:
    """Given path statistics, in the layout of :func:`_float_statistics`."""
    number = {p: i for i, p in enumerate(stats.paths)}
    yx = [as_float(stats.input_output[p]) for p in stats.paths]
    xx = {(number[j], number[p]): as_float(m) for (j, p), m in stats.input.items()}
    return stats.paths, yx, xx


def _number(value: Any) -> float:
    """A probability or gate product as a float; a symbol left in it is refused."""
    if isinstance(value, sp.Basic) and value.free_symbols:
        raise TaskSpecError(unbound_message(value.free_symbols))
    return float(value)


def _constant(problem: Problem) -> float:
    r"""$\tfrac12\langle\lVert y\rVert^2\rangle$ over the contexts (the loss of zero weights)."""
    task = problem.require_task()
    total = 0.0
    for c in task.contexts:
        data = task.datasets[c.dataset]
        for f in c.targets.values():
            total += 0.5 * _number(c.probability) * float(np.trace(as_float(data.moment(f, f))))
    return total


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

    Raises
    ------
    GdlnError
        ``weights`` lacks an edge of an active path.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (3)-(4).
    """
    edges = list(weights)
    plan = FlowPlan.of(problem, edges, stats)
    values = [np.asarray(weights[e], dtype=float) for e in edges]
    return dict(zip(edges, plan.flow(values), strict=True))


def solve_full(
    problem: Problem,
    weights: Mapping[Edge, np.ndarray] | None = None,
    *,
    t_max: float,
    n_points: int = 201,
    lr: float | None = None,
    init: Any = None,
    seed: int = 0,
) -> Trajectory:
    r"""Integrate Eqs. (3)-(4) from any initial weights; records the loss and each $W_e$.

    Parameters
    ----------
    problem
        The network and its task.
    weights
        Edge -> initial weight matrix $W_e(0)$, every edge of the graph; default:
        random weights whose singular values all equal ``init`` (the analogue, without
        common bases, of the decoupled start of Eq. 9), fixed edges $W_e = c\,I$.
    t_max
        The final time, in units of $\tau$.
    n_points
        Number of recorded times, evenly spaced on ``[0, t_max]`` (with ``lr``: the
        nearest steps).
    lr
        Iterate plain gradient descent $W_e \leftarrow W_e + \mathrm{lr}\,\tau\dot W_e$
        for ``round(t_max / lr)`` steps instead of integrating the flow.
    init
        Without ``weights``: every trained edge's singular values (one number, or a
        mapping from edge to number as for :func:`gdln.reduce`); default: the file's
        ``solve.init``, else 0.001.
    seed
        Without ``weights``: the seed of the random singular vectors.

    Returns
    -------
    Trajectory
        The loss of Eq. (1) (expected over random gates); ``"W[u->v]"`` ->
        ``(T, rows, cols)`` and ``"sv[u->v]"`` -> ``(T, min(rows, cols))`` (singular
        values, descending) for each edge; without random gates ``"context_loss"`` ->
        ``(T, contexts)``.

    Raises
    ------
    GdlnError
        ``t_max`` or ``lr`` is not positive, ``n_points`` is below 2, the weights lack an
        edge or have the wrong shape, or the ODE solver fails.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (1), (3)-(4) (and Eq. 2 discretised, with
    ``lr``).

    Examples
    --------
    >>> import gdln
    >>> problem = gdln.load("graphs/chain.yaml")
    >>> trajectory = gdln.solve_full(problem, t_max=40, n_points=3, init=0.1)
    >>> [round(x, 6) for x in trajectory.loss]
    [1.494, 0.0, 0.0]
    """
    t_max, steps = _horizon(t_max, lr, n_points)
    if weights is None:
        weights = initial_full_weights(problem, init=init, seed=seed)
    edges = list(weights)
    values = _checked(problem, weights, edges)
    plan = FlowPlan.of(problem, edges)
    with _blas_threads(plan, values):
        if lr is None:
            t, states = _integrate(plan, values, t_max, n_points)
            method = "full-ode"
        else:
            t, states = _iterate(plan, values, lr, steps, n_points)
            method = "full-gd-map"
    return _trajectory(problem, plan, t, states, method)


def _blas_threads(plan: FlowPlan, values: Sequence[np.ndarray]) -> AbstractContextManager[Any]:
    """One BLAS thread while the flow's products are small (see :data:`SMALL_PRODUCTS`)."""
    sides = [max(w.shape, default=0) for w in values]
    sides += [t.input.shape[0] for t in plan.targets if t.input is not None]
    if max(sides, default=0) > SMALL_PRODUCTS:
        return nullcontext()
    try:
        from threadpoolctl import threadpool_limits  # installed with scikit-learn
    except ImportError:  # pragma: no cover - scikit-learn is a dependency
        return nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


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


def _checked(
    problem: Problem, weights: Mapping[Edge, np.ndarray], edges: Sequence[Edge]
) -> list[np.ndarray]:
    """The weights as float arrays, each of its edge's shape."""
    graph = problem.graph
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
    problem: Problem, *, init: Any = None, seed: int = 0
) -> dict[Edge, np.ndarray]:
    r"""Random weights whose singular values all equal the initial value $b_e(0)$.

    $W_e = b_e(0)\,Q_e$ with $Q_e$ a random matrix with orthonormal rows or columns (the
    analogue, without common bases, of the decoupled start of Eq. 9 where every mode has
    $b_e = b_e(0)$); a fixed edge holds $W_e = c\,I$.

    Parameters
    ----------
    problem
        The network.
    init
        One number, or edge -> number (as for :func:`gdln.reduce`); default: the file's
        ``solve.init``, else 0.001.
    seed
        Seed of the random $Q_e$.

    Returns
    -------
    dict
        Edge -> $W_e$, every edge of the graph.
    """
    graph = problem.graph
    scale = initial_values(problem, init)
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


def _integrate(
    plan: FlowPlan, values: list[np.ndarray], t_max: float, n_points: int
) -> tuple[np.ndarray, list[list[np.ndarray]]]:
    """DOP853 on the flattened weights, recorded at ``n_points`` even times."""
    shapes = [w.shape for w in values]
    splits = np.cumsum([w.size for w in values])[:-1]

    def unpack(y: np.ndarray) -> list[np.ndarray]:
        return [part.reshape(s) for s, part in zip(shapes, np.split(y, splits), strict=True)]

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        return np.concatenate([f.ravel() for f in plan.flow(unpack(y))])

    y0 = np.concatenate([w.ravel() for w in values])
    t_eval = np.linspace(0.0, t_max, n_points)
    result = solve_ivp(rhs, (0.0, t_max), y0, method="DOP853", t_eval=t_eval, rtol=RTOL, atol=ATOL)
    if not result.success:
        raise GdlnError(f"the ODE solver failed: {result.message}")
    return result.t, [unpack(y) for y in result.y.T]


def _iterate(
    plan: FlowPlan, values: list[np.ndarray], lr: float, steps: int, n_points: int
) -> tuple[np.ndarray, list[list[np.ndarray]]]:
    """Gradient descent with learning rate ``lr``, recorded at the steps nearest even times."""
    record = sorted(set(np.rint(np.linspace(0, steps, n_points)).astype(int).tolist()))
    weights = [w.copy() for w in values]
    states = []
    step = 0
    for target in record:
        while step < target:
            for w, f in zip(weights, plan.flow(weights), strict=True):
                w += lr * f
            step += 1
        states.append([w.copy() for w in weights])
    return np.array(record, dtype=float) * lr, states


def _trajectory(
    problem: Problem,
    plan: FlowPlan,
    t: np.ndarray,
    states: Sequence[Sequence[np.ndarray]],
    method: str,
) -> Trajectory:
    """The loss (Eq. 1), per-context losses, weights and their singular values over time."""
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
        name = edge_name(e)
        stacked = np.array([w[i] for w in states])
        series[f"W[{name}]"] = stacked
        series[f"sv[{name}]"] = np.linalg.svd(stacked, compute_uv=False)
    meta: dict[str, Any] = {"method": method, "time_unit": "tau", "source": problem.source}
    if per_context:
        series["context_loss"] = np.array(per_context)
        meta["context_labels"] = list(examples.context_labels)  # type: ignore[union-attr]
    return Trajectory(t=t, loss=np.array(losses), series=series, meta=meta)


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
