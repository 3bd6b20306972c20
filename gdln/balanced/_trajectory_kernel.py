r"""The neural tangent kernel and the hidden representations along a solved trajectory.

The theory gives the weights, or the products of them that matter, at every time, so the
network's neural tangent kernel on the task's inputs and each hidden node's
representational similarity follow without simulating anything:

* **decoupled starts** (:func:`decoupled_kernels`): $W_e(t) = R_{t(e)}B_e(t)R_{s(e)}^\top$
  (Eq. 9 of Saxe, Sodhani & Lewallen 2022) from the reduced variables of
  :func:`gdln.solve`;
* **λ-balanced starts** (:func:`balanced_kernels`): per pathway $x\to h\to y$ with gate
  $g_p(a)$ on example $a$, $f(x_a) = g_p(a)W_2W_1x_a$, so
  $\langle\partial f_i(x_a)/\partial W, \partial f_j(x_b)/\partial W\rangle
  = g_p(a)g_p(b)\,[\delta_{ij}\,x_a^\top W_1^\top W_1x_b + (W_2W_2^\top)_{ij}\,x_a^\top x_b]$,
  which needs only the representations $W_1^\top W_1(t)$, $W_2W_2^\top(t)$ of
  :func:`~gdln.balanced.solve_balanced` (Braun et al. 2022; Dominé et al. 2025).

For a GDLN (Sec. 2 of Saxe et al. 2022), $h_v = g_v\sum_{q:t(q)=v}g_qW_qh_{s(q)}$, and with
$J_v(x) = \partial f(x)/\partial u_v$ the Jacobian with respect to the sum $u_v$ before the
node gate, $\partial f(x)/\partial W_e = J_{t(e)}(x)\,g_e\,h_{s(e)}(x)^\top$, so the kernel
over the trained edges is

$$K\big((a,i),(b,j)\big) = \sum_e g_e(a)g_e(b)\,[J_{t(e)}(x_a)J_{t(e)}(x_b)^\top]_{ij}\,
h_{s(e)}(x_a)^\top h_{s(e)}(x_b).$$

(computed without the Jacobian, on the rows that can be nonzero, by
:class:`~gdln.balanced._network_kernel.NetworkKernel`). The kernel distance is
$S(t) = 1 - \langle K_0, K_t\rangle_F/(\lVert K_0\rVert_F\lVert K_t\rVert_F)$ (Fort et
al. 2020; Kunin et al. 2024, "Get rich quick"), 0 while the kernel keeps its direction. The
representational similarity of node $v$ is the Gram matrix $h_v(x_a)^\top h_v(x_b)$ over
the examples (Fig. 4g; ``"rsm/<node>"`` of :func:`gdln.simulate`). Each time's kernel and
Gram matrices are computed when asked for (:class:`~gdln.balanced.KernelSeries`), and
$S(t)$ in one pass holding two kernels.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

import networkx as nx
import numpy as np

from .._bounded._limits import beyond, current_limits
from .._edge import Edge, edge_name
from .._errors import GdlnError
from .._runtime._blas import one_blas_thread
from ..reduction._system import Reduction
from ..solution._series import pathway_key
from ..solution._trajectory import Trajectory
from ..task._examples import ExampleSet
from ..task._problem import Problem
from ._errors import BalancedSpecError
from ._kernel_blocks import Block, BlockKernel, Values
from ._kernel_series import KernelSeries, TrajectoryKernels
from ._network_kernel import NetworkKernel
from ._pathways import Pathway, prepare

__all__ = ["balanced_kernels", "decoupled_kernels", "weights_along"]


def weights_along(
    reduction: Reduction, trajectory: Trajectory, *, seed: int = 0
) -> dict[Edge, np.ndarray]:
    r"""The weights $W_e(t) = R_{t(e)}B_e(t)R_{s(e)}^\top$ along a reduced trajectory (Eq. 9).

    Parameters
    ----------
    reduction
        From :func:`gdln.reduce` (not on the symmetry quotient).
    trajectory
        What :func:`gdln.solve` returned for ``reduction`` (the ODE or the
        gradient-descent map).
    seed
        Seed of the random hidden-node bases $R_v$, as
        :meth:`~gdln.Reduction.decoupled_weights` draws them; the same seed gives the
        weights a simulation started from ``decoupled_weights(seed=seed)`` follows.

    Returns
    -------
    dict of Edge to numpy.ndarray
        Every edge -> ``(T, |target|, |source|)``; $c\,I$ for a fixed edge, 0 for an edge
        that carries no mode.

    Raises
    ------
    GdlnError
        ``reduction`` is not a :class:`~gdln.Reduction` (the moment route has no Eq. 9
        bases per mode), was derived on the symmetry quotient, or the trajectory lacks a
        reduced variable of it.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (9).
    """
    _require_whole(reduction)
    graph = reduction.problem.graph
    T = len(trajectory.t)
    values = mode_values(reduction, trajectory)
    out: dict[Edge, np.ndarray] = {}
    for e in graph.edges:
        shape = (int(graph.nodes[e[1]]["size"]), int(graph.nodes[e[0]]["size"]))
        if "fixed" in graph.edges[e]:
            out[e] = np.broadcast_to(float(graph.edges[e]["fixed"]) * np.eye(*shape), (T, *shape))
            continue
        left, right, slots = reduction.edge_bases(e, seed=seed)
        if not slots:
            out[e] = np.zeros((T, *shape))
            continue
        missing = [a for a in slots if (e, a) not in values]
        if missing:
            raise GdlnError(
                f"{reduction.problem.source}: edge {edge_name(e)} carries mode {missing[0]}, "
                "which no reduced system holds"
            )
        b = np.stack([values[(e, a)] for a in slots], axis=1)  # (T, k)
        out[e] = np.einsum("ik,tk,jk->tij", left, b, right)
    return out


def _require_whole(reduction: Reduction) -> None:
    """Refuse what is not a reduction of the whole network (Eq. 9 needs every edge's bases)."""
    if not isinstance(reduction, Reduction):
        raise GdlnError(
            f"weights_along: expected a Reduction from gdln.reduce, got {type(reduction).__name__}"
        )
    if reduction.whole is not reduction:  # its modes are the representatives' only
        raise GdlnError(
            f"{reduction.problem.source}: this reduction was derived on the symmetry quotient "
            "(one context per orbit); reduce with route='contexts' for the weights of every "
            "edge along the trajectory"
        )


def mode_values(reduction: Reduction, trajectory: Trajectory) -> dict[tuple[Edge, int], Any]:
    """``(edge, mode)`` -> $b_e^\\alpha(t)$ ``(T,)``, from the series :func:`gdln.solve` writes
    (variable name, with ``@k`` after it when the reduction has several systems)."""
    out = {}
    for k, system in enumerate(reduction.systems):
        for variable, edges in system.edges.items():
            try:
                series = np.asarray(trajectory.variable(str(variable), system=k), dtype=float)
            except KeyError as err:
                which = f" of system {k}" if len(reduction.systems) > 1 else ""
                raise GdlnError(
                    f"{reduction.problem.source}: the trajectory has no series "
                    f"{str(variable)!r}{which}; pass the trajectory gdln.solve returned for "
                    "this reduction"
                ) from err
            for column, mode in enumerate(system.modes):
                for e in edges:
                    out[(e, mode)] = series[:, column]
    return out


@one_blas_thread()
def decoupled_kernels(
    reduction: Reduction, trajectory: Trajectory, *, seed: int = 0
) -> TrajectoryKernels:
    r"""The NTK and hidden representations along a reduced trajectory, from the theory alone.

    The weights of Eq. (9), $W_e(t) = R_{t(e)}B_e(t)R_{s(e)}^\top$, map each hidden node's
    span of mode vectors (with what fixed edges carry into it) to the next, so the kernel
    and the Gram matrices are computed in those coordinates: the cost grows with the
    number of modes, not with the width (:mod:`gdln.balanced._network_kernel`).

    Parameters
    ----------
    reduction
        From :func:`gdln.reduce` (not on the symmetry quotient).
    trajectory
        What :func:`gdln.solve` returned for ``reduction``.
    seed
        Seed of the hidden-node bases of Eq. (9). The kernel and the representations do
        not depend on it (they are invariant under rotations of hidden nodes).

    Returns
    -------
    TrajectoryKernels
        The NTK over the trained edges on the task's examples and $h_v^\top h_v$ of every
        hidden node, at each time of ``trajectory``.

    Raises
    ------
    GdlnError
        The reduction was derived on the symmetry quotient, the trajectory does not belong
        to it, the task has random gates, or one time's kernel would hold more numbers
        than the limit ``batch_elements``.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (9) and Sec. 2; Jacot, Gabriel & Hongler (2018).
    """
    _require_whole(reduction)
    values = mode_values(reduction, trajectory)
    return reduced_kernels(
        reduction, values, trajectory.t, seed=seed, origin="the decoupled weights of Eq. (9)"
    )


def reduced_kernels(
    reduction: Reduction,
    values: Mapping[tuple[Edge, int], np.ndarray],
    t: np.ndarray,
    *,
    seed: int,
    origin: str,
) -> TrajectoryKernels:
    r""":func:`decoupled_kernels` from $b_e^\alpha(t)$ of every ``(edge, mode)`` of the
    whole network's ``reduction``, at the times ``t``."""
    _require_whole(reduction)
    problem = reduction.problem
    examples = _examples(problem)
    coordinates = _mode_coordinates(reduction, seed)
    weights = _weights_in(reduction, values, coordinates, seed)
    engine = NetworkKernel(problem.graph, examples, {v: q.shape[1] for v, q in coordinates.items()})
    return _along(
        problem, engine, t, lambda k: {e: w(k) for e, w in weights.items()}, origin=origin
    )


def _mode_coordinates(reduction: Reduction, seed: int) -> dict[Hashable, np.ndarray]:
    r"""Per hidden node, orthonormal columns $Q_v$ spanning every $h_v(x)$ and every row
    of $J_v(x)$ under the weights of Eq. (9): the mode vectors of its in-edges (and what a
    fixed in-edge brings), and of its out-edges (and what a fixed out-edge takes)."""
    graph = reduction.problem.graph
    order = list(nx.topological_sort(graph))
    size = {v: int(graph.nodes[v]["size"]) for v in graph.nodes}
    hidden = {v for v in graph.nodes if graph.in_degree(v) and graph.out_degree(v)}
    ends = {
        e: reduction.edge_bases(e, seed=seed)[:2]
        for e in graph.edges
        if "fixed" not in graph.edges[e]
    }
    forward: dict[Hashable, np.ndarray] = {}
    for v in order:
        if v not in hidden:
            forward[v] = np.eye(size[v])
            continue
        cols = [ends[(s, v)][0] if (s, v) in ends else forward[s] for s in graph.predecessors(v)]
        forward[v] = _orthonormal(cols, size[v])
    backward: dict[Hashable, np.ndarray] = {}
    for v in reversed(order):
        if v not in hidden:
            backward[v] = np.eye(size[v])
            continue
        cols = [ends[(v, t)][1] if (v, t) in ends else backward[t] for t in graph.successors(v)]
        backward[v] = _orthonormal(cols, size[v])
    return {v: _orthonormal([forward[v], backward[v]], size[v]) for v in hidden}


def _orthonormal(columns: list[np.ndarray], size: int) -> np.ndarray:
    """Orthonormal columns spanning those given, ``(size, rank)``."""
    stacked = np.hstack([np.zeros((size, 0)), *columns])
    if stacked.shape[1] == 0:
        return stacked
    u, s, _ = np.linalg.svd(stacked, full_matrices=False)
    rank = int(np.sum(s > max(stacked.shape) * np.finfo(float).eps * max(1.0, s[0])))
    return u[:, :rank]


def _weights_in(
    reduction: Reduction,
    values: Mapping[tuple[Edge, int], np.ndarray],
    coordinates: Mapping[Hashable, np.ndarray],
    seed: int,
) -> dict[Edge, _EdgeWeight]:
    r"""Edge -> ``k`` -> $Q_{t}^\top W_e(t_k)Q_{s}$ (Eq. 9; $Q$ the identity at data nodes)."""
    graph = reduction.problem.graph

    def side(node: Hashable, vectors: np.ndarray) -> np.ndarray:
        return coordinates[node].T @ vectors if node in coordinates else vectors

    out: dict[Edge, _EdgeWeight] = {}
    for e in graph.edges:
        s, t = e
        if "fixed" in graph.edges[e]:
            c = float(graph.edges[e]["fixed"])
            identity = np.eye(int(graph.nodes[t]["size"]), int(graph.nodes[s]["size"]))
            out[e] = _EdgeWeight(c * side(t, side(s, identity.T).T))
            continue
        left, right, slots = reduction.edge_bases(e, seed=seed)
        missing = [a for a in slots if (e, a) not in values]
        if missing:
            raise GdlnError(
                f"{reduction.problem.source}: edge {edge_name(e)} carries mode {missing[0]}, "
                "which no reduced system holds"
            )
        left, right = side(t, left), side(s, right)
        if not slots:
            out[e] = _EdgeWeight(np.zeros((len(left), len(right))))
            continue
        b = np.stack([values[(e, a)] for a in slots], axis=1)
        out[e] = _EdgeWeight(left, b, right)
    return out


class _EdgeWeight:
    r"""An edge's weight at each time: ``left @ diag(b[k]) @ right.T`` (Eq. 9), or one
    matrix at every time."""

    def __init__(
        self, left: np.ndarray, b: np.ndarray | None = None, right: np.ndarray | None = None
    ) -> None:
        self.left, self.b, self.right = left, b, right

    def __call__(self, k: int) -> np.ndarray:
        if self.b is None or self.right is None:
            return self.left
        return (self.left * self.b[k]) @ self.right.T


def kernels_of_weights(
    problem: Problem, t: np.ndarray, weights: Mapping[Edge, np.ndarray], *, origin: str
) -> TrajectoryKernels:
    """The kernels from every edge's weights ``(T, |target|, |source|)`` at the times ``t``."""
    engine = NetworkKernel(problem.graph, _examples(problem))
    return _along(
        problem, engine, t, lambda k: {e: w[k] for e, w in weights.items()}, origin=origin
    )


def _along(
    problem: Problem,
    engine: NetworkKernel,
    t: np.ndarray,
    weights_at: Callable[[int], Mapping[Edge, np.ndarray]],
    *,
    origin: str,
) -> TrajectoryKernels:
    """The kernels of ``engine`` at the weights of each time, one time at a time."""
    check_working(problem, engine.n, len(engine.rows), engine.working_numbers())
    T = len(t)

    def values(k: int) -> list[Values]:
        return engine.values(weights_at(k))

    def gram(v: Hashable) -> Callable[[int], np.ndarray]:
        def at(k: int) -> np.ndarray:
            h = engine.activations(weights_at(k))[v]
            return h @ h.T

        return at

    every = np.arange(engine.n)
    return TrajectoryKernels(
        t=t,
        ntk=KernelSeries.of_terms(T, engine.side, engine.rows, engine.terms, values),
        representations={str(v): KernelSeries(T, engine.n, every, gram(v)) for v in engine.hidden},
        outputs=tuple(engine.outputs),
        origin=origin,
    )


def check_working(problem: Problem, n: int, rows: int, numbers: int) -> None:
    """Refuse a kernel whose one time would hold more than ``batch_elements`` numbers."""
    if numbers > current_limits().batch_elements:
        raise GdlnError(
            f"{problem.source}: "
            + beyond(
                "batch_elements",
                f"the tangent kernel on {n} examples ({rows} rows that can be nonzero) holds "
                f"{numbers} numbers at a time",
            )
            + "; or take a task with fewer examples"
        )


@one_blas_thread()
def balanced_kernels(problem: Problem, trajectory: Trajectory) -> TrajectoryKernels:
    r"""The NTK and hidden representations along a λ-balanced solution, from the theory alone.

    Parameters
    ----------
    problem
        The problem the trajectory solves.
    trajectory
        What :func:`~gdln.balanced.solve_balanced` returned for ``problem``.

    Returns
    -------
    TrajectoryKernels
        The NTK over the pathways' edges on the task's examples, and $h^\top h$ of each
        pathway's hidden node, at each time of ``trajectory`` (module docstring).

    Raises
    ------
    BalancedSpecError
        The problem is outside the λ-balanced solution, the trajectory lacks a pathway's
        series, or a hidden node has an in-edge outside its pathway (its activity then
        depends on weights the solution does not give).
    GdlnError
        The task has random gates, or one time's kernel would hold more numbers than the
        limit ``batch_elements``.

    References
    ----------
    Braun, Dominé, Fitzgerald & Saxe (2022) and Dominé et al. (2025) (the NTK and the
    representations from $QQ^\top$);
    Jacot, Gabriel & Hongler (2018).
    """
    prepared = prepare(problem)
    examples = _examples(problem)
    engine = NetworkKernel(problem.graph, examples)
    n, T = engine.n, len(trajectory.t)
    blocks: list[Block] = []
    parts = []
    reps = {}
    for p in prepared.pathways:
        g1 = _series(problem, trajectory, "W1TW1", p)
        g2 = _series(problem, trajectory, "W2W2T", p)
        x = _input(examples, p.path.source, n, p.sizes[0])
        gate = _path_gate(examples, p, n)
        mine, _ = engine.output_rows(p.path.target)
        mine = mine[gate[engine.example[mine]] != 0]  # every unit of each example it reaches
        seen, index = np.unique(engine.example[mine], return_inverse=True)
        units = p.sizes[2]
        positions = None if len(mine) == len(engine.rows) else mine
        blocks.append(Block(positions, seen, index, units, units, p.sizes[0]))
        blocks.append(Block(positions, seen, index, 0, units, p.sizes[0]))
        parts.append((gate[seen, None] * x[seen], np.tile(np.arange(units), len(seen)), g1, g2))
        gamma = _hidden_gate(problem, examples, p, n)
        reps[str(p.hidden)] = KernelSeries(T, n, np.arange(n), _hidden_gram(x, gamma, g1))
    terms = BlockKernel(len(engine.rows), blocks)
    held = terms.factored_cost()[0] if terms.factored() else terms.dense_cost()[0]
    check_working(problem, n, len(engine.rows), held)

    def values(k: int) -> list[Values]:
        # per pathway: delta_ij x_a^T W1^T W1 x_b (an output term, F = g x A with
        # A A^T = W1^T W1) and (W2 W2^T)_ij x_a^T x_b (J = B[unit], B B^T = W2 W2^T)
        out: list[Values] = []
        for gx, units, g1, g2 in parts:
            out.append((None, gx @ _root(g1[k])))
            out.append((_root(g2[k])[units], gx))
        return out

    return TrajectoryKernels(
        t=trajectory.t,
        ntk=KernelSeries.of_terms(T, engine.side, engine.rows, terms, values),
        representations=reps,
        outputs=tuple(engine.outputs),
        origin="the lambda-balanced representations W1^T W1, W2 W2^T of each pathway",
    )


def _root(gram: np.ndarray) -> np.ndarray:
    """$A$ with $AA^\top$ = a symmetric positive semidefinite ``gram`` (rounding's
    negative eigenvalues taken as 0)."""
    values, vectors = np.linalg.eigh(0.5 * (gram + gram.T))
    return vectors * np.sqrt(np.clip(values, 0.0, None))


def _hidden_gate(problem: Problem, examples: ExampleSet, p: Pathway, n: int) -> np.ndarray:
    r"""$\gamma_a$, the gates of $W_1$'s edge and the hidden node; refused if the hidden
    node has another in-edge (its activity then needs weights the solution does not give)."""
    graph = problem.graph
    others = [s for s in graph.predecessors(p.hidden) if (s, p.hidden) != p.first]
    if others:
        raise BalancedSpecError(
            f"{problem.source}: node {p.hidden} of pathway {p.name} has another in-edge "
            f"{edge_name((others[0], p.hidden))}; its representation needs weights the "
            "λ-balanced solution does not give"
        )
    ones = np.ones(n)
    return np.asarray(examples.gates.get(p.first, ones), float) * np.asarray(
        examples.gates.get(p.hidden, ones), float
    )


def _hidden_gram(x: np.ndarray, gamma: np.ndarray, g1: np.ndarray) -> Callable[[int], np.ndarray]:
    r"""$h^\top h$ at a pathway's hidden node: $\gamma_a\gamma_b\,x_a^\top W_1^\top W_1x_b$."""
    gg = np.outer(gamma, gamma)
    return lambda k: gg * (x @ g1[k] @ x.T)


def _series(problem: Problem, trajectory: Trajectory, kind: str, p: Pathway) -> np.ndarray:
    try:
        return np.asarray(trajectory.pathway(kind, p.name), dtype=float)
    except KeyError as err:
        raise BalancedSpecError(
            f"{problem.source}: the trajectory has no series {pathway_key(kind, p.name)!r}; "
            "pass the trajectory gdln.solve_balanced returned for this problem"
        ) from err


def _path_gate(examples: ExampleSet, p: Pathway, n: int) -> np.ndarray:
    """$g_p(a)$: the edge gates and the node gates after the source, per example."""
    gate = np.ones(n)
    for item in (*p.path.edges, *p.path.nodes[1:]):
        if item in examples.gates:
            gate = gate * np.asarray(examples.gates[item], dtype=float)
    return gate


def _input(examples: ExampleSet, node: Hashable, n: int, size: int) -> np.ndarray:
    """The examples' values at an input node ``(n, size)``; zeros where it is unbound."""
    value = examples.inputs.get(str(node))
    return np.zeros((n, size)) if value is None else np.asarray(value, dtype=np.float64)


def _examples(problem: Problem) -> ExampleSet:
    examples = problem.examples()
    if examples.random_gates:
        raise GdlnError(
            f"{problem.source}: random gates: the kernel along a trajectory needs "
            "deterministic gates"
        )
    return examples
