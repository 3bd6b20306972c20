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

The kernel distance is $S(t) = 1 - \langle K_0, K_t\rangle_F/(\lVert K_0\rVert_F
\lVert K_t\rVert_F)$ (Fort et al. 2020; Kunin et al. 2024, "Get rich quick"), 0 while the
network is lazy. The representational similarity of node $v$ is the Gram matrix
$h_v(x_a)^\top h_v(x_b)$ over the examples (Fig. 4g; ``"rsm/<node>"`` of
:func:`gdln.simulate`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from .._edge import Edge, edge_name
from .._errors import GdlnError
from .._html import html_table
from ..reduction._system import Reduction
from ..solution._trajectory import KERNEL_DISTANCE, Trajectory, node_key, pathway_key
from ..task._examples import ExampleSet
from ..task._problem import Problem
from ._errors import BalancedSpecError
from ._pathways import Pathway, prepare

__all__ = ["TrajectoryKernels", "balanced_kernels", "decoupled_kernels", "weights_along"]

MAX_KERNEL_ENTRIES = 50_000_000
"""Most numbers (kernels and representations over all times) one call returns (400 MB)."""


@dataclass(frozen=True)
class TrajectoryKernels:
    r"""The neural tangent kernel and hidden representations at each time of a trajectory.

    Parameters
    ----------
    t
        ``(T,)`` times, in units of $\tau$.
    ntk
        ``(T, n*O, n*O)``: $K((a, i), (b, j))$ at row ``a*O + i``, for example ``a`` of
        the task's examples (:meth:`gdln.Problem.examples`) and output unit ``i`` of the
        outputs listed in ``outputs``, stacked in that order.
    representations
        Hidden node -> ``(T, n, n)``, $h_v(x_a)^\top h_v(x_b)$.
    outputs
        ``(node, size)`` of each output node, in the order of the output axis.
    origin
        How they were obtained, in words (recorded as ``meta["kernel"]`` by
        :meth:`added_to`).

    Raises
    ------
    ValueError
        The shapes disagree.

    References
    ----------
    Jacot, Gabriel & Hongler (2018) (the NTK); Saxe, Sodhani & Lewallen (2022), Fig. 4g
    (representational similarity); Kunin et al. (2024), "Get rich quick" (kernel distance).
    """

    t: np.ndarray
    ntk: np.ndarray
    representations: Mapping[str, np.ndarray] = field(default_factory=dict)
    outputs: tuple[tuple[str, int], ...] = ()
    origin: str = ""

    def __post_init__(self) -> None:
        t = np.asarray(self.t, dtype=float)
        ntk = np.asarray(self.ntk, dtype=float)
        object.__setattr__(self, "t", t)
        object.__setattr__(self, "ntk", ntk)
        if ntk.ndim != 3 or ntk.shape[0] != len(t) or ntk.shape[1] != ntk.shape[2]:
            raise ValueError(f"ntk must be (T={len(t)}, N, N), got {ntk.shape}")
        size = sum(k for _, k in self.outputs)
        if self.outputs and ntk.shape[1] % size:
            raise ValueError(f"ntk side {ntk.shape[1]} is not a multiple of {size} outputs")
        for node, rep in self.representations.items():
            if np.shape(rep)[0] != len(t):
                raise ValueError(f"representation {node!r} has {len(rep)} rows for {len(t)} times")

    def __repr__(self) -> str:
        nodes = ", ".join(self.representations)
        return (
            f"TrajectoryKernels(t=<{len(self.t)} times>, ntk=<{self.ntk.shape[1]}x"
            f"{self.ntk.shape[2]}>, representations=[{nodes}])"
        )

    def _repr_html_(self) -> str:
        """The kernels' sizes, the kernel distance $S(t)$ at a few times, and the
        representations, as a table for Jupyter."""
        shown = np.unique(np.linspace(0, len(self.t) - 1, min(len(self.t), 6)).round().astype(int))
        distance = self.distance
        rows = [[f"{self.t[i]:.4g}", f"{distance[i]:.4g}"] for i in shown]
        caption = (
            f"NTK {self.ntk.shape[1]}x{self.ntk.shape[2]} over {len(self.t)} times"
            + (
                f"; outputs {', '.join(f'{n} ({k})' for n, k in self.outputs)}"
                if self.outputs
                else ""
            )
            + (
                f"; representations at {', '.join(self.representations)}"
                if self.representations
                else ""
            )
            + (f"; {self.origin}" if self.origin else "")
        )
        return html_table(["t / tau", "kernel distance S(t)"], rows, caption=caption)

    @property
    def distance(self) -> np.ndarray:
        r"""$S(t) = 1 - \langle K_0,K_t\rangle_F/(\lVert K_0\rVert_F\lVert K_t\rVert_F)$, ``(T,)``.

        $K_0$ is the kernel at the first time; $S = 0$ where either kernel is zero.
        """
        flat = self.ntk.reshape(len(self.t), -1)
        norms = np.linalg.norm(flat, axis=1)
        inner = flat @ flat[0]
        denominator = norms * norms[0]
        cosine = np.divide(inner, denominator, out=np.ones_like(inner), where=denominator > 0)
        return 1.0 - cosine

    def added_to(self, trajectory: Trajectory) -> Trajectory:
        r"""``trajectory`` with the kernel distance and the representations as series.

        Parameters
        ----------
        trajectory
            The trajectory these kernels were computed along (the same times).

        Returns
        -------
        Trajectory
            Its series plus ``kernel_distance`` $S(t)$ ``(T,)``
            (:meth:`gdln.Trajectory.kernel_distance`) and each hidden node's
            $h_v(x_a)^\top h_v(x_b)$ ``(T, n, n)`` (:meth:`gdln.Trajectory.rsm`);
            ``meta["kernel"]`` says how they were obtained, ``meta["kernel_examples"]``
            how many examples they run over.

        Raises
        ------
        ValueError
            The trajectory's times are not these kernels'.
        """
        if len(trajectory.t) != len(self.t) or not np.allclose(trajectory.t, self.t):
            raise ValueError(
                f"the kernels are at {len(self.t)} times, the trajectory at "
                f"{len(trajectory.t)} other ones"
            )
        series = dict(trajectory.series)
        series[KERNEL_DISTANCE] = self.distance
        for node, rep in self.representations.items():
            series[node_key("rsm", node)] = np.asarray(rep, dtype=float)
        meta = {**trajectory.meta, "kernel": self.origin}
        meta["kernel_examples"] = int(self.ntk.shape[1] // max(1, sum(k for _, k in self.outputs)))
        return Trajectory(trajectory.t, trajectory.loss, series, meta)


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
    graph = reduction.problem.graph
    T = len(trajectory.t)
    values = _mode_values(reduction, trajectory)
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


def _mode_values(reduction: Reduction, trajectory: Trajectory) -> dict[tuple[Edge, int], Any]:
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


def decoupled_kernels(
    reduction: Reduction, trajectory: Trajectory, *, seed: int = 0
) -> TrajectoryKernels:
    r"""The NTK and hidden representations along a reduced trajectory, from the theory alone.

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
        to it, the task has random gates, or the kernels would hold more than
        :data:`MAX_KERNEL_ENTRIES` numbers.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (9) and Sec. 2; Jacot, Gabriel & Hongler (2018).
    """
    problem = reduction.problem
    _examples(problem)
    weights = weights_along(reduction, trajectory, seed=seed)
    return kernels_of_weights(
        problem, trajectory.t, weights, origin="the decoupled weights of Eq. (9)"
    )


def kernels_of_weights(
    problem: Problem, t: np.ndarray, weights: Mapping[Edge, np.ndarray], *, origin: str
) -> TrajectoryKernels:
    """The kernels from every edge's weights ``(T, |target|, |source|)`` at the times ``t``."""
    examples = _examples(problem)
    graph = problem.graph
    outputs = _outputs(graph)
    hidden = [v for v in graph.nodes if graph.in_degree(v) and graph.out_degree(v)]
    _check_size(problem, len(t), len(examples.weights), outputs, len(hidden))
    T = len(t)
    n = len(examples.weights)
    side = n * sum(k for _, k in outputs)
    ntk = np.empty((T, side, side))
    reps = {str(v): np.empty((T, n, n)) for v in hidden}
    for k in range(T):
        kernel, acts = network_kernel(graph, examples, {e: w[k] for e, w in weights.items()})
        ntk[k] = kernel
        for v in hidden:
            reps[str(v)][k] = acts[v] @ acts[v].T
    return TrajectoryKernels(
        t=t, ntk=ntk, representations=reps, outputs=tuple(outputs), origin=origin
    )


def network_kernel(
    graph: nx.DiGraph, examples: ExampleSet, weights: Mapping[Edge, np.ndarray]
) -> tuple[np.ndarray, dict[Hashable, np.ndarray]]:
    """The NTK ``(n*O, n*O)`` over the trained edges, and every node's $h_v$ ``(n, |v|)``.

    Forward and backward passes of the GDLN of Sec. 2 (module docstring), in numpy.
    """
    n = len(examples.weights)
    order = list(nx.topological_sort(graph))
    size = {v: int(graph.nodes[v]["size"]) for v in graph.nodes}
    ones = np.ones(n)

    def gate(item: Hashable) -> np.ndarray:
        return np.asarray(examples.gates.get(item, ones), dtype=float)

    acts: dict[Hashable, np.ndarray] = {}
    for v in order:
        if graph.in_degree(v) == 0:
            acts[v] = _input(examples, v, n, size[v])
            continue
        u = np.zeros((n, size[v]))
        for s in graph.predecessors(v):
            u += gate((s, v))[:, None] * (acts[s] @ weights[(s, v)].T)
        acts[v] = gate(v)[:, None] * u
    outputs = _outputs(graph)
    width = sum(k for _, k in outputs)
    jac: dict[Hashable, np.ndarray] = {}  # d f / d u_v, (n, O, |v|)
    offset = 0
    for v, k in outputs:
        J = np.zeros((n, width, k))
        J[:, offset : offset + k, :] = gate(v)[:, None, None] * np.eye(k)
        jac[v] = J
        offset += k
    for v in reversed(order):
        if v in jac or graph.out_degree(v) == 0 or graph.in_degree(v) == 0:
            continue
        back = np.zeros((n, width, size[v]))
        for t in graph.successors(v):
            back += gate((v, t))[:, None, None] * (jac[t] @ weights[(v, t)])
        jac[v] = gate(v)[:, None, None] * back
    kernel = np.zeros((n, width, n, width))
    for v in order:
        trained = [s for s in graph.predecessors(v) if "fixed" not in graph.edges[s, v]]
        if not trained:
            continue
        gram = np.zeros((n, n))
        for s in trained:
            gram += _gram(gate((s, v))[:, None] * acts[s])
        kernel += np.einsum("aik,bjk->aibj", jac[v], jac[v]) * gram[:, None, :, None]
    return kernel.reshape(n * width, n * width), acts


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
        The task has random gates, or the kernels would hold more than
        :data:`MAX_KERNEL_ENTRIES` numbers.

    References
    ----------
    Braun, Dominé, Fitzgerald & Saxe (2022) and Dominé et al. (2025) (the NTK and the
    representations from $QQ^\top$);
    Jacot, Gabriel & Hongler (2018).
    """
    prepared = prepare(problem)
    examples = _examples(problem)
    graph = problem.graph
    outputs = _outputs(graph)
    T, n = len(trajectory.t), len(examples.weights)
    _check_size(problem, T, n, outputs, len(prepared.pathways))
    offsets: dict[Hashable, int] = {}
    width = 0
    for v, k in outputs:
        offsets[v] = width
        width += k
    kernel = np.zeros((T, n, width, n, width))
    reps = {}
    for p in prepared.pathways:
        g1 = _series(problem, trajectory, "W1TW1", p)
        g2 = _series(problem, trajectory, "W2W2T", p)
        x = _input(examples, p.path.source, n, p.sizes[0])
        gate = _path_gate(examples, p, n)
        inner = np.einsum("ai,tij,bj->tab", x, g1, x)  # x_a^T W1^T W1 x_b
        gg = np.outer(gate, gate)
        o, k = offsets[p.path.target], p.sizes[2]
        block = inner[:, :, None, :, None] * np.eye(k)[None, None, :, None, :]
        block = block + (x @ x.T)[None, :, None, :, None] * g2[:, None, :, None, :]
        kernel[:, :, o : o + k, :, o : o + k] += gg[None, :, None, :, None] * block
        reps[str(p.hidden)] = _hidden_gram(problem, examples, p, inner, n)
    return TrajectoryKernels(
        t=trajectory.t,
        ntk=kernel.reshape(T, n * width, n * width),
        representations=reps,
        outputs=tuple(outputs),
        origin="the lambda-balanced representations W1^T W1, W2 W2^T of each pathway",
    )


def _hidden_gram(
    problem: Problem, examples: ExampleSet, p: Pathway, inner: np.ndarray, n: int
) -> np.ndarray:
    r"""$h^\top h$ at the pathway's hidden node: $\gamma_a\gamma_b\,x_a^\top W_1^\top W_1x_b$."""
    graph = problem.graph
    others = [s for s in graph.predecessors(p.hidden) if (s, p.hidden) != p.first]
    if others:
        raise BalancedSpecError(
            f"{problem.source}: node {p.hidden} of pathway {p.name} has another in-edge "
            f"{edge_name((others[0], p.hidden))}; its representation needs weights the "
            "λ-balanced solution does not give"
        )
    ones = np.ones(n)
    gamma = np.asarray(examples.gates.get(p.first, ones), float) * np.asarray(
        examples.gates.get(p.hidden, ones), float
    )
    return np.outer(gamma, gamma)[None] * inner


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


def _gram(h: np.ndarray) -> np.ndarray:
    return h @ h.T


def _outputs(graph: nx.DiGraph) -> list[tuple[str, int]]:
    return [(v, int(graph.nodes[v]["size"])) for v in graph.nodes if graph.out_degree(v) == 0]


def _examples(problem: Problem) -> ExampleSet:
    examples = problem.examples()
    if examples.random_gates:
        raise GdlnError(
            f"{problem.source}: random gates: the kernel along a trajectory needs "
            "deterministic gates"
        )
    return examples


def _check_size(
    problem: Problem, T: int, n: int, outputs: list[tuple[str, int]], nodes: int
) -> None:
    side = n * sum(k for _, k in outputs)
    total = T * (side * side + nodes * n * n)
    if total > MAX_KERNEL_ENTRIES:
        raise GdlnError(
            f"{problem.source}: the kernels at {T} times on {n} examples would hold {total} "
            f"numbers, more than {MAX_KERNEL_ENTRIES}; pass a trajectory with fewer times"
        )
