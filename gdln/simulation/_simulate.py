r"""Simulation of the full gated network of Sec. 2 of Saxe, Sodhani & Lewallen (2022).

The network is the architecture graph itself: one weight matrix $W_e$ per edge, input
nodes clamped to the data, and in topological order

$$h_v = g_v \sum_{q:\, t(q)=v} g_q W_q h_{s(q)},$$

with the node gates $g_v$ and edge gates $g_q$ of each example (1 where ungated). Fixed
edges (``fixed`` edge attribute $c$) hold $W_e = c\,I$ and are not trained. Independent
random gates (``examples.random_gates``, stochastic depth) multiply their item's gate by
$\delta\sim\mathrm{Bernoulli}(p)$, one draw per step per repetition shared by all
examples, from ``numpy.random.default_rng((seed, 2))``; the recorded loss is then that of
the step's draw. The loss is Eq. (1): the weighted average over examples of
$\tfrac12\sum_{v\in\mathrm{Out}}\lVert y_v-h_v\rVert^2$. Gradients are torch autograd on
this full network; nothing here uses the reduced equations.

Time convention
---------------
Full-batch gradient descent with learning rate ``lr`` is the Euler step $dt = \mathrm{lr}$
of the gradient flow $\tau\,dW/dt = -\partial\mathcal L/\partial W$ (Eq. 2) with
$\tau = 1$, so after ``step`` steps $t/\tau = \mathrm{lr}\cdot\mathrm{step}$. Heavy-ball
momentum $\mu$ sums past gradients with weights $\mu^j$, so once its buffer has filled
each step moves the weights as far as a flow step $dt = \mathrm{lr}/(1-\mu)$; the clock
is therefore $t/\tau = \mathrm{step}\cdot\mathrm{lr}/(1-\mu)$ (``meta["effective_lr"]``),
which is $\mathrm{lr}\cdot\mathrm{step}$ without momentum. Minibatch SGD keeps the same
clock.

Seeds
-----
Many repetitions run as one tensor program: every weight carries a leading seed axis
``S``. Repetition ``r`` draws its initial weights from ``numpy.random.default_rng(seeds[r])``,
its minibatches (SGD) from ``default_rng((seeds[r], 1))`` and its random gates from
``default_rng((seeds[r], 2))``, and nothing else, so a batched run equals the per-seed runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import torch
from tqdm.auto import tqdm

from .._edge import Edge, edge_name
from .._errors import TaskSpecError
from ..solution._trajectory import Trajectory
from ..task._examples import ExampleSet
from ._errors import SimulationDivergedError, SimulationSpecError
from ._names import INITS
from ._settings import MINIBATCH, SimulationSettings, check_positive

__all__ = ["TIME_CONVENTION", "initial_weights", "minibatch_indices", "simulate"]

TIME_CONVENTION = (
    "t/tau = step * lr / (1 - momentum): full-batch gradient descent with learning rate lr is "
    "the Euler step dt = lr of tau dW/dt = -dL/dW (Eq. 2 of Saxe et al. 2022) with tau = 1; "
    "heavy-ball momentum mu approximates the same flow with dt = lr / (1 - mu)"
)


# --------------------------------------------------------------------------- initialisation


def _draw_xavier(rng: np.random.Generator, rows: int, cols: int, scale: float) -> np.ndarray:
    r"""Xavier (Glorot) normal entries times $\sigma_0$.

    Standard deviation $\sigma_0\sqrt{2/(\mathrm{fan_{in}}+\mathrm{fan_{out}})}$.
    """
    return scale * rng.normal(0.0, math.sqrt(2.0 / (rows + cols)), size=(rows, cols))


def _haar_columns(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """``k`` orthonormal columns in $R^n$, Haar distributed (QR with the sign fix)."""
    q, r = np.linalg.qr(rng.normal(size=(n, k)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def _draw_singular(rng: np.random.Generator, rows: int, cols: int, scale: float) -> np.ndarray:
    r"""A random matrix whose $\min(\text{rows}, \text{cols})$ singular values all equal $\sigma_0$.

    $W = \sigma_0 U V^\top$ with Haar-random orthonormal columns (Sec. 4.3 of Saxe et al.
    2022 varies this scale).
    """
    k = min(rows, cols)
    return scale * _haar_columns(rng, rows, k) @ _haar_columns(rng, cols, k).T


_DRAWS: Mapping[str, Callable[[np.random.Generator, int, int, float], np.ndarray] | None] = {
    "xavier": _draw_xavier,
    "singular": _draw_singular,
    "orthogonal": _draw_singular,
    "given": None,
}
"""The initialisations of :data:`INITS` by the same names; ``None``: weights are given."""

_TORCH_DTYPES: Mapping[str, torch.dtype] = {"float64": torch.float64, "float32": torch.float32}
"""The torch dtypes of :data:`DTYPES` by the same names."""


def _seed_list(seeds: int | Sequence[int], seed: int) -> list[int]:
    if isinstance(seeds, (bool, np.bool_)):
        raise SimulationSpecError(f"seeds: expected a count >= 1 or a list of ints, got {seeds!r}")
    if isinstance(seeds, (int, np.integer)):
        if seeds < 1:
            raise SimulationSpecError(f"seeds: expected a count >= 1, got {seeds}")
        return [int(seed) + r for r in range(int(seeds))]
    out = list(seeds)
    if not out or not all(isinstance(s, (int, np.integer)) and s >= 0 for s in out):
        raise SimulationSpecError(
            f"seeds: expected a non-empty list of non-negative ints, got {seeds!r}"
        )
    return [int(s) for s in out]


def _edges(graph: nx.DiGraph) -> list[Edge]:
    order = {node: i for i, node in enumerate(nx.topological_sort(graph))}
    return sorted(graph.edges, key=lambda e: (order[e[1]], order[e[0]]))


def initial_weights(
    graph: nx.DiGraph,
    *,
    init_scheme: str = "xavier",
    init: float = 0.2,
    seeds: int | Sequence[int] = 1,
    seed: int = 0,
) -> dict[Edge, np.ndarray]:
    r"""Draw the random initial weights that :func:`simulate` would use.

    Parameters
    ----------
    graph
        The architecture (node attribute ``size``).
    init_scheme
        A random scheme of :data:`INITS`: ``"xavier"``, ``"singular"`` or ``"orthogonal"``.
    init
        The initial scale $\sigma_0$.
    seeds, seed
        As in :func:`simulate`.

    Returns
    -------
    dict
        Edge ``(source, target)`` -> float64 array ``(S, |target|, |source|)``; repetition
        ``r`` is drawn from ``numpy.random.default_rng(seeds[r])`` only.
    """
    draw = _DRAWS.get(init_scheme)
    if draw is None:
        random = sorted(k for k, v in _DRAWS.items() if v is not None)
        raise SimulationSpecError(f"init_scheme: expected one of {random}, got {init_scheme!r}")
    if not (isinstance(init, (int, float)) and math.isfinite(init) and init >= 0):
        raise SimulationSpecError(
            f"init: expected a finite number >= 0 (the initial scale sigma0), got {init!r}"
        )
    sizes = _sizes(graph)
    edges = _edges(graph)
    out: dict[Edge, list[np.ndarray]] = {e: [] for e in edges}
    for s in _seed_list(seeds, seed):
        rng = np.random.default_rng(s)
        for e in edges:
            out[e].append(draw(rng, sizes[e[1]], sizes[e[0]], float(init)))
    return {e: np.stack(v) for e, v in out.items()}


# --------------------------------------------------------------------------- the network


def _sizes(graph: nx.DiGraph) -> dict[Hashable, int]:
    if not isinstance(graph, nx.DiGraph):
        raise SimulationSpecError(f"graph: expected a networkx.DiGraph, got {type(graph).__name__}")
    if not nx.is_directed_acyclic_graph(graph):
        cycle = nx.find_cycle(graph)
        raise SimulationSpecError(f"graph: expected a DAG, found the cycle {cycle}")
    sizes: dict[Hashable, int] = {}
    for node, attrs in graph.nodes(data=True):
        size = attrs.get("size")
        if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size < 1:
            raise SimulationSpecError(
                f"graph: node {node!r} attribute 'size': expected an int >= 1, got {size!r}"
            )
        sizes[node] = int(size)
    return sizes


@dataclass(frozen=True)
class _Net:
    r"""The graph as a computation plan.

    ``fan_out[s]``: out-edges of ``s`` whose targets have no other in-edge, when there are
    at least two; they share one matmul $h_s [W_1^\top \cdots W_k^\top]$. ``fan_in[v]``: the
    other in-edges of ``v``; they share one matmul $[g_1 h_{s_1} \cdots g_k h_{s_k}]
    [W_1 \cdots W_k]^\top$. Both are the same sum $\sum_q g_q W_q h_{s(q)}$, fewer ops.
    ``sparse``: gated edges switched on for few examples, computed on those rows only.
    """

    order: tuple[str, ...]
    sizes: Mapping[Hashable, int]
    edges: tuple[Edge, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    hidden: tuple[str, ...]
    fan_in: Mapping[str, tuple[int, ...]]
    fan_out: Mapping[str, tuple[int, ...]]
    fan_out_into: Mapping[str, tuple[int, ...]]  # node -> the fan-out edges ending there
    output_group: str | None  # the fan-out source whose targets are the outputs, in order
    sparse_into: Mapping[str, tuple[int, ...]]  # node -> its sparse in-edges
    sparse_from: Mapping[str, tuple[int, ...]]  # node -> its sparse out-edges
    graph: nx.DiGraph

    def __post_init__(self) -> None:
        if not self.outputs:
            raise SimulationSpecError("graph: expected at least one output node, found none")


def _compile(graph: nx.DiGraph, sparse: frozenset[int] = frozenset()) -> _Net:
    sizes = _sizes(graph)
    order = tuple(nx.topological_sort(graph))
    edges = tuple(_edges(graph))
    inputs = tuple(v for v in order if graph.in_degree(v) == 0)
    outputs = tuple(v for v in order if graph.out_degree(v) == 0 and graph.in_degree(v) > 0)
    hidden = tuple(v for v in order if v not in inputs and v not in outputs)
    dense_in = {v: [i for i, e in enumerate(edges) if e[1] == v and i not in sparse] for v in order}
    fan_out: dict[str, tuple[int, ...]] = {}
    for u in order:
        group = tuple(
            i
            for i, (a, b) in enumerate(edges)
            if a == u and i not in sparse and graph.in_degree(b) == 1
        )
        if len(group) >= 2:
            fan_out[u] = group
    grouped = {i for g in fan_out.values() for i in g}
    fan_in = {v: tuple(i for i in dense_in[v] if i not in grouped) for v in order}
    into = {v: tuple(i for i in sorted(grouped) if edges[i][1] == v) for v in order}
    output_group = next(
        (u for u, g in fan_out.items() if tuple(edges[i][1] for i in g) == outputs), None
    )
    sparse_into = {v: tuple(i for i in sorted(sparse) if edges[i][1] == v) for v in order}
    sparse_from = {
        u: tuple(i for i in sorted(sparse) if edges[i][0] == u)
        for u in order
        if any(edges[i][0] == u for i in sparse)
    }
    return _Net(
        order,
        sizes,
        edges,
        inputs,
        outputs,
        hidden,
        fan_in,
        fan_out,
        into,
        output_group,
        sparse_into,
        sparse_from,
        graph,
    )


SPARSE_FRACTION = 1 / 16
"""A gated edge on for at most this fraction of (at least 16) examples is computed on
those rows only (full-batch passes): the routing network of Fig. 4 with M domains then
costs O(n) instead of O(M n) per gated layer. The sum computed is the same. Above it the
grouped dense products are faster (routing M=7: 2.3x for one seed, 1.4x for ten)."""


@dataclass(frozen=True)
class _Data:
    """An ExampleSet as tensors: data ``(n, |v|)``, gates ``(n,)``, weights ``(n,)``."""

    x: Mapping[Hashable, torch.Tensor]
    y: Mapping[Hashable, torch.Tensor]
    node_gates: Mapping[Hashable, torch.Tensor]
    edge_gates: Mapping[int, torch.Tensor]
    w: torch.Tensor
    context_avg: torch.Tensor  # (n, C): column c averages over context c
    labels: tuple[str, ...]
    n: int
    group_gates: Mapping[tuple[int, ...], torch.Tensor | None]  # fan-out group -> (n, sum |t|)
    y_cat: torch.Tensor  # (n, sum over outputs |v|)
    rows: Mapping[int, torch.Tensor]  # sparse gated edge -> the rows where its gate is on
    plan: _Net  # the computation plan for full-batch passes over these examples
    sparse_outputs: tuple[str, ...]  # outputs fed by one sparse edge only (full batch)
    sparse_const: torch.Tensor  # (n,): 1/2 sum over sparse outputs of |y_v|^2
    y_dense: torch.Tensor  # (n, sum |v| over the other outputs)

    def __post_init__(self) -> None:
        if self.w.ndim != 1 or len(self.w) != self.n:
            raise ValueError("weights must be (n,)")


def _tensorise(
    net: _Net, ex: ExampleSet, name: str, dtype: torch.dtype, device: torch.device
) -> _Data:
    if not isinstance(ex, ExampleSet):
        raise SimulationSpecError(f"{name}: expected an ExampleSet, got {type(ex).__name__}")
    n = len(ex)
    if n == 0:
        raise TaskSpecError("expected at least one example, got none", source=name)

    def tensor(a: Any) -> torch.Tensor:
        return torch.as_tensor(np.asarray(a, dtype=np.float64), dtype=dtype, device=device)

    def check(table: Mapping[str, np.ndarray], kind: str, allowed: tuple[str, ...]) -> None:
        for node, arr in table.items():
            if node not in allowed:
                raise TaskSpecError(
                    f"{node!r} is not an {kind[:-1]} node of the graph; expected one of "
                    f"{list(allowed)}",
                    source=name,
                    key=f"{kind}[{node!r}]",
                )
            if np.shape(arr)[1] != net.sizes[node]:
                raise TaskSpecError(
                    f"expected width |{node}| = {net.sizes[node]}, got shape {np.shape(arr)}",
                    source=name,
                    key=f"{kind}[{node!r}]",
                )
            if not np.all(np.isfinite(arr)):
                raise TaskSpecError("expected finite values", source=name, key=f"{kind}[{node!r}]")

    check(ex.inputs, "inputs", net.inputs)
    check(ex.targets, "targets", net.outputs)

    def column(table: Mapping[str, np.ndarray], v: str) -> torch.Tensor:
        if v in table:
            return tensor(table[v])
        return torch.zeros(n, net.sizes[v], dtype=dtype, device=device)

    x: dict[Hashable, torch.Tensor] = {v: column(ex.inputs, v) for v in net.inputs}
    y: dict[Hashable, torch.Tensor] = {v: column(ex.targets, v) for v in net.outputs}
    index = {e: i for i, e in enumerate(net.edges)}
    node_gates: dict[Hashable, torch.Tensor] = {}
    edge_gates: dict[int, torch.Tensor] = {}
    for key, g in ex.gates.items():
        if not np.all(np.isfinite(g)):
            raise TaskSpecError("expected finite gate values", source=name, key=f"gates[{key!r}]")
        if isinstance(key, tuple) and tuple(key) in index:
            edge_gates[index[tuple(key)]] = tensor(g)
        elif isinstance(key, Hashable) and key in net.sizes:
            node_gates[str(key)] = tensor(g)
        else:
            raise TaskSpecError(
                f"{key!r} is neither a node nor an edge (source, target) of the graph",
                source=name,
                key=f"gates[{key!r}]",
            )
    w = np.asarray(ex.weights, dtype=np.float64)
    if np.any(w < 0) or not np.isclose(w.sum(), 1.0, rtol=1e-9, atol=1e-12):
        raise TaskSpecError(
            f"expected non-negative weights summing to 1, got sum {w.sum()!r}, min {w.min()!r}",
            source=name,
            key="weights",
        )
    ctx = np.asarray(ex.context, dtype=np.int64)
    n_ctx = max(int(ctx.max()) + 1, len(ex.context_labels))
    labels = tuple(ex.context_labels) + tuple(str(c) for c in range(len(ex.context_labels), n_ctx))
    avg = np.zeros((n, n_ctx))
    for c in range(n_ctx):
        mass = w[ctx == c].sum()
        if mass > 0:
            avg[ctx == c, c] = w[ctx == c] / mass
        else:
            avg[:, c] = np.nan
    rows: dict[int, torch.Tensor] = {}
    if n >= 16:
        for i, gate_values in edge_gates.items():
            on = torch.nonzero(gate_values != 0).flatten()
            if len(on) <= SPARSE_FRACTION * n:
                rows[i] = on
    plan = _compile(net.graph, frozenset(rows)) if rows else net
    group_gates: dict[tuple[int, ...], torch.Tensor | None] = {}
    for group in (*net.fan_out.values(), *plan.fan_out.values()):
        if any(i in edge_gates for i in group):
            columns = [
                (edge_gates[i] if i in edge_gates else torch.ones(n, dtype=dtype, device=device))
                .unsqueeze(-1)
                .expand(n, net.sizes[net.edges[i][1]])
                for i in group
            ]
            group_gates[group] = torch.cat(columns, dim=-1).contiguous()
        else:
            group_gates[group] = None
    y_cat = torch.cat([y[v] for v in net.outputs], dim=-1)
    sparse_outputs = tuple(
        v
        for v in net.outputs
        if v not in node_gates
        and len(plan.sparse_into[v]) == 1
        and not plan.fan_in[v]
        and not plan.fan_out_into[v]
    )
    sparse_const = torch.zeros(n, dtype=dtype, device=device)
    for v in sparse_outputs:
        sparse_const = sparse_const + 0.5 * y[v].square().sum(-1)
    dense = [y[v] for v in net.outputs if v not in sparse_outputs]
    y_dense = torch.cat(dense, dim=-1) if dense else torch.zeros(n, 0, dtype=dtype, device=device)
    return _Data(
        x,
        y,
        node_gates,
        edge_gates,
        tensor(w),
        tensor(avg),
        labels,
        n,
        group_gates,
        y_cat,
        rows,
        plan,
        sparse_outputs,
        sparse_const,
        y_dense,
    )


def _forward(
    net: _Net,
    weights: Sequence[torch.Tensor],
    data: _Data,
    rows: torch.Tensor | None = None,
    *,
    outputs: bool = False,
) -> tuple[dict[Hashable, torch.Tensor], torch.Tensor]:
    r"""Activations $h_v$ ``(S, n, |v|)`` and per-example losses ``(S, n)``.

    $h_v = g_v\sum_{q: t(q)=v} g_q W_q h_{s(q)}$ (Sec. 2), input nodes $h_v = g_v x_v$; the
    per-example loss is $\tfrac12\sum_{v\in\mathrm{Out}}\lVert y_v-h_v\rVert^2$ (Eq. 1).
    ``rows`` ``(S, b)`` selects a minibatch per seed; full-batch passes follow the
    examples' own plan, which computes sparsely gated edges on their active rows only,
    and an output fed by one such edge enters Eq. (1) as
    $\tfrac12\lVert y\rVert^2 + (\tfrac12\lVert h\rVert^2 - y\cdot h)$ on those rows; its
    $h_v$ is built only if ``outputs``.
    """
    sparse_outputs: tuple[str, ...] = ()
    if rows is None:
        net = data.plan
        sparse_outputs = data.sparse_outputs
    per_example: torch.Tensor | None = None

    def pick(a: torch.Tensor) -> torch.Tensor:
        # (n, ...) -> (1, n, ...) shared, or (S, b, ...) per seed
        return a.unsqueeze(0) if rows is None else a[rows]

    def gate(i: int, a: torch.Tensor) -> torch.Tensor:
        g = data.edge_gates.get(i)
        return a if g is None else a * pick(g).unsqueeze(-1)

    h: dict[Hashable, torch.Tensor] = {}
    split: dict[int, torch.Tensor] = {}  # fan-out products g_q W_q h_s, by edge
    whole: dict[Hashable, torch.Tensor] = {}  # fan-out source -> the gated product, all targets
    picked: dict[int, torch.Tensor] = {}  # sparse edge -> g_q h_s on its active rows
    for v in net.order:
        if v in net.inputs:
            hv = pick(data.x[v])
        else:
            terms = []
            fan_in = net.fan_in[v]
            if len(fan_in) == 1:
                i = fan_in[0]
                terms.append(gate(i, torch.matmul(h[net.edges[i][0]], weights[i].mT)))
            elif fan_in:
                sources = [gate(i, h[net.edges[i][0]]) for i in fan_in]
                batch = max(a.shape[0] for a in sources)
                sources = [a.expand(batch, -1, -1) for a in sources]
                stacked = torch.cat([weights[i] for i in fan_in], dim=-1)
                terms.append(torch.matmul(torch.cat(sources, dim=-1), stacked.mT))
            terms += [split.pop(i) for i in net.fan_out_into[v]]
            if v in sparse_outputs:  # its share of Eq. (1), on the active rows only
                i = net.sparse_into[v][0]
                a = torch.matmul(picked.pop(i), weights[i].mT)
                share = 0.5 * a.square().sum(-1) - (data.y[v][data.rows[i]] * a).sum(-1)
                base = data.sparse_const if per_example is None else per_example
                base = base.expand(share.shape[0], -1)
                per_example = base.index_add(1, data.rows[i], share)
                if not outputs:
                    continue
                full = a.new_zeros((a.shape[0], data.n, net.sizes[v]))
                h[v] = full.index_add(1, data.rows[i], a)
                continue
            if net.sparse_into[v]:  # all sparse in-edges scattered into one buffer
                active = [torch.matmul(picked.pop(i), weights[i].mT) for i in net.sparse_into[v]]
                where = [data.rows[i] for i in net.sparse_into[v]]
                batch = max(a.shape[0] for a in active)
                stacked = torch.cat([a.expand(batch, -1, -1) for a in active], dim=1)
                full = stacked.new_zeros((batch, data.n, net.sizes[v]))
                terms.append(full.index_add(1, torch.cat(where), stacked))
            hv = terms[0]
            for term in terms[1:]:
                hv = hv + term
        if v in data.node_gates:
            hv = hv * pick(data.node_gates[v]).unsqueeze(-1)
        h[v] = hv
        if v in net.sparse_from:  # one gather for all sparse out-edges (one scatter back)
            out_edges = net.sparse_from[v]
            on = torch.cat([data.rows[i] for i in out_edges])
            gates = torch.cat([data.edge_gates[i][data.rows[i]] for i in out_edges])
            counts = [len(data.rows[i]) for i in out_edges]
            rows_of = torch.split(hv[:, on] * gates.unsqueeze(-1), counts, dim=1)
            picked.update(zip(out_edges, rows_of, strict=True))
        group = net.fan_out.get(v)
        if group is not None:
            product = torch.matmul(hv, torch.cat([weights[i] for i in group], dim=-2).mT)
            group_gate = data.group_gates[group]
            if group_gate is not None:
                product = product * pick(group_gate)
            whole[v] = product
            sizes = [net.sizes[net.edges[i][1]] for i in group]
            split.update(zip(group, torch.split(product, sizes, dim=-1), strict=True))
    # Eq. (1) per example, the other outputs at once; reuse the fan-out product when it is them
    if rows is not None:
        target, dense = pick(data.y_cat), list(net.outputs)
    else:
        target, dense = pick(data.y_dense), [v for v in net.outputs if v not in sparse_outputs]
    if dense:
        if net.output_group is not None and not any(v in data.node_gates for v in dense):
            out = whole[net.output_group]
        else:
            out = torch.cat([h[v] for v in dense], dim=-1)
        err = 0.5 * (target - out).square().sum(-1)
        per_example = err if per_example is None else per_example + err
    assert per_example is not None
    return h, per_example


# --------------------------------------------------------------------------- recording


class _Recorder:
    def __init__(
        self,
        net: _Net,
        train: _Data,
        evaluation: _Data | None,
        bases: Mapping[Edge, tuple[torch.Tensor, torch.Tensor]],
        rsm: bool,
        weights: bool,
    ) -> None:
        self.net, self.train, self.eval, self.bases, self.rsm = net, train, evaluation, bases, rsm
        self.weights = weights
        self.steps: list[int] = []
        self.rows: dict[str, list[np.ndarray]] = {}

    def _put(self, name: str, value: torch.Tensor) -> None:
        # copy: on CPU in float64 .numpy() shares memory with weights updated in place
        array = np.array(value.detach().to("cpu", torch.float64).numpy(), copy=True)
        self.rows.setdefault(name, []).append(array)

    def record(
        self,
        step: int,
        weights: Sequence[torch.Tensor],
        acts: dict[Hashable, torch.Tensor],
        per_example: torch.Tensor,
    ) -> None:
        net = self.net
        self.steps.append(step)
        self._put("loss", per_example @ self.train.w)
        ctx = per_example @ self.train.context_avg
        for c, label in enumerate(self.train.labels):
            self._put(f"loss/{label}", ctx[:, c])
        with torch.no_grad():
            for e, w in zip(net.edges, weights, strict=True):
                self._put(f"sv/{edge_name(e)}", torch.linalg.svdvals(w))
                if self.weights:
                    self._put(f"W/{edge_name(e)}", w)
                if e in self.bases:
                    left, right = self.bases[e]
                    self._put(f"proj/{edge_name(e)}", torch.einsum("ta,Sts,sa->Sa", left, w, right))
            rsm_acts = acts
            if self.eval is not None:
                eval_acts, eval_loss = _forward(net, weights, self.eval, outputs=True)
                rsm_acts = eval_acts
                self._put("eval/loss", eval_loss @ self.eval.w)
                ectx = eval_loss @ self.eval.context_avg
                for c, label in enumerate(self.eval.labels):
                    self._put(f"eval/loss/{label}", ectx[:, c])
                self._put("eval/example_loss", eval_loss)
                for v in net.outputs:
                    self._put(f"eval/output/{v}", eval_acts[v])
            if self.rsm:
                for v in net.hidden:
                    a = rsm_acts[v]
                    self._put(f"rsm/{v}", a @ a.transpose(-1, -2))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        series = {k: np.stack(v) for k, v in self.rows.items()}
        loss = series.pop("loss")
        return np.asarray(self.steps), loss, series


# --------------------------------------------------------------------------- the run


def _device(device: str | None) -> torch.device:
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise SimulationSpecError(
            f"device: expected 'auto', 'cpu' or 'cuda[:k]', got {device!r}"
        ) from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SimulationSpecError(
            f"device: {device!r} requested but CUDA is not available; use 'cpu' or 'auto'"
        )
    if dev.type not in ("cpu", "cuda"):
        raise SimulationSpecError(f"device: expected 'auto', 'cpu' or 'cuda[:k]', got {device!r}")
    return dev


def _record_at(steps: int, record_every: int, record_steps: Sequence[int] | None) -> set[int]:
    """The steps to record: every ``record_every`` (and the last), or exactly ``record_steps``."""
    if record_steps is None:
        return set(range(0, steps + 1, record_every)) | {steps}
    if max(record_steps) > steps:
        raise SimulationSpecError(
            f"record_steps: expected a non-empty list of ints in [0, steps={steps}], "
            f"got {list(record_steps)}"
        )
    return set(record_steps)


def _given_weights(net: _Net, weights: Mapping[Edge, Any] | None, n_seeds: int) -> list[np.ndarray]:
    if weights is None:
        raise SimulationSpecError(
            "weights: init_scheme='given' needs weights {edge: array}, got None"
        )
    unknown = [e for e in weights if tuple(e) not in net.edges]
    if unknown:
        raise SimulationSpecError(
            f"weights: {unknown[0]!r} is not an edge of the graph; "
            f"expected one of {list(net.edges)}"
        )
    out = []
    for e in net.edges:
        if e not in weights:
            raise SimulationSpecError(
                f"weights: missing edge {e!r}; init_scheme='given' needs every edge"
            )
        a = np.asarray(weights[e], dtype=np.float64)
        shape = (net.sizes[e[1]], net.sizes[e[0]])
        if a.shape == shape:
            a = np.broadcast_to(a, (n_seeds, *shape))
        elif a.shape != (n_seeds, *shape):
            raise SimulationSpecError(
                f"weights[{e!r}]: expected shape {shape} or {(n_seeds, *shape)}, got {a.shape}"
            )
        if not np.all(np.isfinite(a)):
            raise SimulationSpecError(f"weights[{e!r}]: expected finite values")
        out.append(a)
    return out


def simulate(
    graph: nx.DiGraph,
    examples: ExampleSet,
    *,
    steps: int,
    lr: float,
    init_scheme: str = "xavier",
    init: float = 0.2,
    weights: Mapping[Edge, Any] | None = None,
    seeds: int | Sequence[int] = 1,
    seed: int = 0,
    eval_examples: ExampleSet | None = None,
    bases: Mapping[Edge, tuple[np.ndarray, np.ndarray]] | None = None,
    settings: SimulationSettings | None = None,
) -> Trajectory:
    r"""Train the full gated network by gradient descent and record its trajectory.

    Forward pass $h_v = g_v\sum_{q:t(q)=v} g_q W_q h_{s(q)}$ (Sec. 2), loss Eq. (1), and
    the Euler discretisation of the gradient flow Eq. (2) of Saxe et al. 2022,
    $W_e \leftarrow W_e - \mathrm{lr}\,\partial\mathcal L/\partial W_e$, with gradients
    from torch autograd on the full network. Time is $t/\tau = \mathrm{lr}\cdot\mathrm{step}$,
    and $\mathrm{step}\cdot\mathrm{lr}/(1-\mu)$ with momentum $\mu$ (module docstring).

    Parameters
    ----------
    graph
        The architecture: node attribute ``size``; in-degree-0 nodes are inputs and
        out-degree-0 nodes outputs.
    examples
        The training examples, gates and weights.
    steps
        Number of updates.
    lr
        Learning rate = Euler time step in units of $\tau$ (with momentum $\mu$ one step
        is $\mathrm{lr}/(1-\mu)$ of flow time).
    init_scheme
        Name in :data:`INITS`: ``"xavier"`` ($\sigma_0\times$ Xavier normal),
        ``"singular"``/``"orthogonal"`` (all singular values $\sigma_0$) or ``"given"``.
    init
        The initial scale $\sigma_0$ of the random schemes.
    weights
        For ``init_scheme="given"``: edge -> ``(|t|, |s|)`` (all seeds) or
        ``(S, |t|, |s|)``, e.g. the decoupled weights of Eq. (9).
    seeds, seed
        A count ``S`` (repetitions use the seeds ``seed, ..., seed+S-1``) or an explicit
        list of seeds. All repetitions run batched along a leading tensor axis.
    eval_examples
        A second ExampleSet (e.g. untrained routes, Fig. 4h) evaluated at each record.
    bases
        Edge -> ``(left (|t|, k), right (|s|, k))``: the reduced variable of mode $a$,
        ``left[:, a] @ W @ right[:, a]``, is recorded as ``"proj/<edge>"`` (e.g.
        ``Reduction.decoupled_bases``).
    settings
        How to train and what to record (:class:`SimulationSettings`: optimiser, momentum,
        dtype, device, threads, record steps...); default ``SimulationSettings()``.

    Returns
    -------
    Trajectory
        ``t`` ``(T,)`` in units of $\tau$; ``loss`` ``(T, S)``; series ``"loss/<context>"``
        ``(T, S)`` (the average within a context); ``"sv/<edge>"`` ``(T, S, k)`` singular
        values, descending; ``"proj/<edge>"`` ``(T, S, k)``; ``"rsm/<node>"``
        ``(T, S, n, n)``; ``"eval/loss"``, ``"eval/loss/<context>"`` ``(T, S)``,
        ``"eval/example_loss"`` ``(T, S, n)``, ``"eval/output/<node>"`` ``(T, S, n, |v|)``.

    Raises
    ------
    SimulationSpecError
        An option is malformed.
    TaskSpecError
        The examples do not fit the graph.
    SimulationDivergedError
        The loss became non-finite or exceeded ``diverge_above``.
    """
    settings = SimulationSettings() if settings is None else settings
    if not isinstance(settings, SimulationSettings):
        raise SimulationSpecError(
            f"settings: expected a SimulationSettings, got {type(settings).__name__}"
        )
    threads = settings.threads
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
    try:
        return _run(
            graph,
            examples,
            steps=steps,
            lr=lr,
            init_scheme=init_scheme,
            init=init,
            weights=weights,
            seeds=seeds,
            seed=seed,
            eval_examples=eval_examples,
            bases=bases,
            settings=settings,
        )
    finally:
        torch.set_num_threads(before)


def _run(
    graph: nx.DiGraph,
    examples: ExampleSet,
    *,
    steps: int,
    lr: float,
    init_scheme: str,
    init: float,
    weights: Mapping[Edge, Any] | None,
    seeds: int | Sequence[int],
    seed: int,
    eval_examples: ExampleSet | None,
    bases: Mapping[Edge, tuple[np.ndarray, np.ndarray]] | None,
    settings: SimulationSettings,
) -> Trajectory:
    """The body of :func:`simulate`, with torch's thread count already set."""
    check_positive("steps", steps, integer=True, allow_zero=True)
    check_positive("lr", lr, integer=False)
    record_at = _record_at(steps, settings.record_every, settings.record_steps)
    if init_scheme not in INITS:
        raise SimulationSpecError(
            f"init_scheme: expected one of {sorted(INITS)}, got {init_scheme!r}"
        )
    optimizer, batch_size, momentum = settings.optimizer, settings.batch_size, settings.momentum
    dtype, diverge_above, progress = settings.dtype, settings.diverge_above, settings.progress
    minibatch = optimizer in MINIBATCH
    seed_list = _seed_list(seeds, seed)
    n_seeds = len(seed_list)
    tdtype, dev = _TORCH_DTYPES[dtype], _device(settings.device)
    net = _compile(graph)
    train = _tensorise(net, examples, "examples", tdtype, dev)
    evaluation = (
        None
        if eval_examples is None
        else _tensorise(net, eval_examples, "eval_examples", tdtype, dev)
    )
    torch_bases = _bases(net, bases, tdtype, dev)

    if _DRAWS[init_scheme] is None:
        w0 = _given_weights(net, weights, n_seeds)
    else:
        if weights is not None:
            raise SimulationSpecError(
                f"weights: only used with init_scheme='given', got init_scheme={init_scheme!r}"
            )
        drawn = initial_weights(graph, init_scheme=init_scheme, init=init, seeds=seed_list)
        w0 = [drawn[e] for e in net.edges]
    fixed = _fixed_edges(net)
    for i, c in fixed.items():  # W_e = c I, never trained
        w0[i] = np.broadcast_to(c * np.eye(net.sizes[net.edges[i][0]]), w0[i].shape)
    W = [torch.tensor(np.array(a), dtype=tdtype, device=dev, requires_grad=True) for a in w0]
    buffers = [torch.zeros_like(w) for w in W] if momentum > 0 else None
    gates = _RandomGates(net, examples.random_gates, seed_list, tdtype, dev)

    sampler = _Sampler(examples.weights, seed_list, batch_size, dev) if minibatch else None
    recorder = _Recorder(net, train, evaluation, torch_bases, settings.rsm, settings.record_weights)
    dt = lr / (1.0 - momentum)  # flow time per step (module docstring)
    bad_step = torch.full((n_seeds,), -1, dtype=torch.int64, device=dev)
    bad_value = torch.zeros(n_seeds, dtype=tdtype, device=dev)

    def check(step: int) -> None:
        if bool((bad_step >= 0).any()):
            steps_cpu = bad_step.cpu().numpy()
            r = int(np.argmin(np.where(steps_cpu >= 0, steps_cpu, np.iinfo(np.int64).max)))
            first, value = int(steps_cpu[r]), float(bad_value[r].cpu())
            raise SimulationDivergedError(
                f"training diverged at step {first} (t = {first * dt:.6g} tau), seed "
                f"{seed_list[r]}: loss = {value!r}, expected a finite loss <= diverge_above="
                f"{diverge_above:g}; lower lr (got {lr!r}) or the initial scale",
                step=first,
                value=value,
                seed=seed_list[r],
            )

    bar = tqdm(total=steps, disable=not progress, desc="simulate", unit="step")
    for step in range(steps + 1):
        last = step == steps
        with torch.set_grad_enabled(not last):
            Wm = gates.apply(W)  # this step's random gates, folded into the weights
            full = None  # (activations, per-example loss) on the whole set, at record steps
            if minibatch or last:
                if step in record_at or last:
                    with torch.no_grad():
                        full = _forward(net, Wm, train)
                if last:
                    assert full is not None
                    loss = full[1] @ train.w
                else:
                    assert sampler is not None
                    _, batch_ex = _forward(net, Wm, train, sampler.rows(step))
                    loss = batch_ex.mean(-1)
            else:
                acts, per_ex = _forward(net, Wm, train)
                loss = per_ex @ train.w
                if step in record_at:
                    full = (acts, per_ex)
            ld = loss.detach()
            if full is not None and minibatch:
                whole = full[1] @ train.w
                ld = torch.where(torch.isfinite(whole), ld, whole)
            bad = ~torch.isfinite(ld) | (ld > diverge_above)
            new = bad & (bad_step < 0)
            bad_step = torch.where(new, torch.full_like(bad_step, step), bad_step)
            bad_value = torch.where(new, ld, bad_value)
            if last or full is not None or step % 256 == 0:
                check(step)  # before recording: the SVDs of non-finite weights would fail
            if full is not None and step in record_at:
                recorder.record(step, W, *full)
            if last:
                break
            grads = torch.autograd.grad(loss.sum(), W)
        with torch.no_grad():
            for i, (w, g) in enumerate(zip(W, grads, strict=True)):
                if i in fixed:
                    continue
                if buffers is not None:
                    buffers[i].mul_(momentum).add_(g)
                    g = buffers[i]
                w.sub_(lr * g)
        if progress and (step % 100 == 99 or step == steps - 1):
            bar.update(step + 1 - bar.n)
    bar.close()

    steps_rec, loss_rec, series = recorder.arrays()
    meta = {
        "method": "simulate",
        "graph": str(graph.graph.get("name", "")),
        "time": TIME_CONVENTION,
        "lr": float(lr),
        "effective_lr": float(dt),
        "steps": int(steps),
        "step_at": steps_rec.tolist(),
        "init_scheme": init_scheme,
        "init": float(init) if _DRAWS[init_scheme] is not None else None,
        "seeds": seed_list,
        "optimizer": optimizer,
        "batch_size": batch_size,
        "momentum": float(momentum),
        "dtype": dtype,
        "device": str(dev),
        "edges": [edge_name(e) for e in net.edges],
        "hidden": list(net.hidden),
        "outputs": list(net.outputs),
        "contexts": list(train.labels),
        "eval_contexts": [] if evaluation is None else list(evaluation.labels),
        "loss_axes": ["time", "seed"],
        "random_gates": {str(k): float(p) for k, p in examples.random_gates.items()},
        "fixed_edges": [edge_name(net.edges[i]) for i in fixed],
    }
    return Trajectory(t=dt * steps_rec.astype(float), loss=loss_rec, series=series, meta=meta)


def _bases(
    net: _Net,
    bases: Mapping[Edge, tuple[np.ndarray, np.ndarray]] | None,
    dtype: torch.dtype,
    device: torch.device,
) -> dict[Edge, tuple[torch.Tensor, torch.Tensor]]:
    out: dict[Edge, tuple[torch.Tensor, torch.Tensor]] = {}
    for key, pair in (bases or {}).items():
        e = (str(key[0]), str(key[1]))
        if e not in net.edges:
            raise SimulationSpecError(
                f"bases: {e!r} is not an edge of the graph; expected one of {list(net.edges)}"
            )
        try:
            left, right = (np.asarray(b, dtype=np.float64) for b in pair)
        except (TypeError, ValueError) as exc:
            raise SimulationSpecError(
                f"bases[{e!r}]: expected a pair (left, right) of arrays, got {pair!r}"
            ) from exc
        rows, cols = net.sizes[e[1]], net.sizes[e[0]]
        if (
            left.ndim != 2
            or right.ndim != 2
            or left.shape[0] != rows
            or right.shape[0] != cols
            or left.shape[1] != right.shape[1]
        ):
            raise SimulationSpecError(
                f"bases[{e!r}]: expected left ({rows}, k) and right ({cols}, k), got "
                f"{left.shape} and {right.shape}"
            )
        out[e] = (
            torch.as_tensor(left, dtype=dtype, device=device),
            torch.as_tensor(right, dtype=dtype, device=device),
        )
    return out


def _fixed_edges(net: _Net) -> dict[int, float]:
    r"""Edge index -> $c$ for fixed edges $W_e = c\,I$ (edge attribute ``fixed``)."""
    out = {}
    for i, (u, v) in enumerate(net.edges):
        c = net.graph.edges[u, v].get("fixed")
        if c is not None:
            if net.sizes[u] != net.sizes[v]:
                raise SimulationSpecError(
                    f"graph: fixed edge {u}->{v} needs equal sizes, got {net.sizes[u]} and "
                    f"{net.sizes[v]}"
                )
            out[i] = float(c)
    return out


class _RandomGates:
    r"""Independent Bernoulli gates, redrawn every step, folded into the weights.

    An edge's random gate multiplies $g_qW_qh_{s(q)}$, a node's multiplies every edge into
    it, so $\delta$ times the weight is the same network. Repetition ``r`` draws from
    ``numpy.random.default_rng((seeds[r], 2))`` alone, one Bernoulli per item per step.
    """

    def __init__(
        self,
        net: _Net,
        survival: Mapping[Hashable, Any],
        seeds: list[int],
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        index = {e: i for i, e in enumerate(net.edges)}
        self.targets: list[list[int]] = []
        probabilities = []
        for item, p in survival.items():
            if isinstance(item, tuple) and tuple(item) in index:
                self.targets.append([index[tuple(item)]])
            elif item in net.sizes:
                self.targets.append([i for i, e in enumerate(net.edges) if e[1] == item])
            else:
                raise SimulationSpecError(
                    f"random_gates: {item!r} is neither a node nor an edge of the graph"
                )
            try:
                value = float(p)
            except TypeError:
                raise SimulationSpecError(
                    f"random_gates: the survival probability of {item!r} is {p}, not a "
                    "number; give it a value to simulate"
                ) from None
            if not 0 <= value <= 1:
                raise SimulationSpecError(
                    f"random_gates: survival probability of {item!r} is {value}, not in [0, 1]"
                )
            probabilities.append(value)
        self.p = np.array(probabilities)
        self.rngs = [np.random.default_rng((s, 2)) for s in seeds]
        self.dtype, self.device = dtype, device

    def apply(self, weights: list[torch.Tensor]) -> list[torch.Tensor]:
        """This step's weights: each multiplied by the gates of the items acting on it."""
        if not self.targets:
            return weights
        draws = np.array([rng.random(len(self.p)) < self.p for rng in self.rngs], dtype=float)
        factor: dict[int, np.ndarray] = {}
        for k, edges in enumerate(self.targets):
            for i in edges:
                factor[i] = factor.get(i, 1.0) * draws[:, k]
        out = list(weights)
        for i, f in factor.items():
            scale = torch.as_tensor(f, dtype=self.dtype, device=self.device)
            out[i] = weights[i] * scale[:, None, None]
        return out


def minibatch_indices(
    examples: ExampleSet,
    *,
    steps: int,
    batch_size: int,
    seeds: int | Sequence[int] = 1,
    seed: int = 0,
) -> np.ndarray:
    """The example indices of every minibatch that ``simulate(optimizer="sgd")`` uses.

    Returns
    -------
    numpy.ndarray
        ``(steps, S, batch_size)`` ints: step ``k`` of repetition ``r`` averages Eq. (1)
        over the examples ``out[k, r]`` (drawn with replacement, with probability equal
        to their weight, from ``numpy.random.default_rng((seeds[r], 1))`` alone).
    """
    check_positive("steps", steps, integer=True, allow_zero=True)
    check_positive("batch_size", batch_size, integer=True)
    sampler = _Sampler(examples.weights, _seed_list(seeds, seed), batch_size, torch.device("cpu"))
    rows = [sampler.rows(k).numpy() for k in range(steps)]
    return np.stack(rows) if rows else np.zeros((0, sampler.n_seeds, batch_size), dtype=np.int64)


class _Sampler:
    """Per-seed minibatch indices, drawn in chunks from ``default_rng((seed, 1))``."""

    chunk = 1024

    def __init__(
        self, weights: Any, seeds: list[int], batch_size: int | None, device: torch.device
    ):
        assert batch_size is not None
        self.p = np.asarray(weights, dtype=np.float64)
        self.p = self.p / self.p.sum()
        self.n, self.b, self.device = len(self.p), batch_size, device
        self.n_seeds = len(seeds)
        self.rngs = [np.random.default_rng((s, 1)) for s in seeds]
        self.start = -self.chunk
        self.block: torch.Tensor | None = None

    def rows(self, step: int) -> torch.Tensor:
        if step >= self.start + self.chunk:
            self.start = step - step % self.chunk
            draws = [r.choice(self.n, size=(self.chunk, self.b), p=self.p) for r in self.rngs]
            self.block = torch.as_tensor(np.stack(draws, axis=1), device=self.device)
        assert self.block is not None
        return self.block[step - self.start]
