r"""Distinct activations: examples that agree upstream of a node share its activation.

In the forward pass $h_v = g_v\sum_{q:\,t(q)=v} g_q W_q h_{s(q)}$ (Sec. 2 of Saxe et al.
2022) the activation of node $v$ on example $n$ depends on $n$ only through the input data
and the gates upstream of $v$, so examples that agree there have the same $h_v$ for every
weight. A *state* of $v$ is one such class: for an input node a distinct non-zero row of
$g_v x_v$; for any other node the set of its active in-edges $q$ with their gate
$g_v g_q \ne 0$ and the state of their source (examples where no in-edge is active hold
$h_v = 0$ and have no state). The forward and backward passes of a full-batch step then
run on states, not examples: in the routing network of Fig. 4 with M domains, K routes
per domain and 4 items, the $n = 4KM$ examples have $4M$ states at each hidden layer.

The loss of Eq. (1) needs only each output state's total example weight $W_u$ and
weighted mean target $\bar y_u$ (the rest is a constant):

$$\sum_n w_n \tfrac12\lVert y_n - h_{u(n)}\rVert^2 =
\sum_u \tfrac12 W_u \lVert h_u - \bar y_u\rVert^2 + \sum_n w_n \tfrac12\lVert y_n -
\bar y_{u(n)}\rVert^2,$$

every term non-negative. Edges are computed in *products*: a group of edges of one shape
whose terms are one batched matrix product over padded rows (``r`` per edge), either
into one target node that has several in-edges (the rows then scatter into the target's
states), or the single in-edges of several targets (each edge's rows *are* its target's
states).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np
import torch

from ..task._examples import ExampleSet
from ._plan import Plan

__all__ = ["OutputLoss", "Product", "StatePlan", "state_plan"]


@dataclass(frozen=True)
class Product:
    r"""Edges of one shape whose terms $g_q W_q h_{s(q)}$ are one batched product.

    Slot ``(j, a)`` is the ``a``-th active state of edge ``edges[j]`` (padded with gate 0
    to ``r`` rows). ``stacked``: the weights are one ``(S, k, |t|, |s|)`` block and the
    slots carry a leading edge axis; otherwise one edge, ``(S, |t|, |s|)``.
    """

    edges: tuple[int, ...]
    stacked: bool
    r: int
    sources: tuple[Hashable, ...]  # distinct sources, in order; their storages are stacked
    source_index: torch.Tensor | None  # (k r,) rows of the stacked sources; None: the source
    gate: torch.Tensor | None  # (k, r, 1) or (r, 1) gate g_v g_q at the slot, 0 on padding
    constant: torch.Tensor | None  # (1, k, r, |s|) or (1, r, |s|): the gated inputs
    targets: tuple[Hashable, ...]  # edge j's target
    into: Hashable | None  # the one target all slots scatter into; None: slots are storage
    target_index: torch.Tensor | None  # (k r,) rows of ``into``; None: the slots in order


@dataclass(frozen=True)
class OutputLoss:
    r"""Eq. (1) on the states of outputs: $\tfrac12\sum_u W_u\lVert h_u-\bar y_u\rVert^2$.

    ``weight`` ``(..., rows, 1)`` and ``mean`` ``(..., rows, |t|)`` have the shape of the
    storage they apply to (0 on padding). For records, example ``pair_example[i]`` has
    its output at row ``pair_row[i]`` of that storage (flattened), target ``pair_y[i]``.
    """

    weight: torch.Tensor
    mean: torch.Tensor
    pair_example: torch.Tensor
    pair_row: torch.Tensor
    pair_y: torch.Tensor


@dataclass(frozen=True)
class StatePlan:
    """The states of every node, the products in the order they run, and the loss terms.

    ``storage[v]``: ``("input",)`` (a constant ``(1, rows, |v|)`` in ``inputs``),
    ``("slots", p, j)`` (slot rows ``j`` of product ``p``) or ``("sum",)`` (the sum of the
    products into ``v``); ``rows[v]`` its number of rows; ``state[v]`` the state of each
    example (``-1``: $h_v = 0$). ``idle``: edges active on no example.
    """

    products: tuple[Product, ...]
    inputs: Mapping[Hashable, torch.Tensor]
    storage: Mapping[Hashable, tuple]
    rows: Mapping[Hashable, int]
    state: Mapping[Hashable, np.ndarray]
    product_loss: Mapping[int, OutputLoss]  # products whose targets are all outputs
    node_loss: Mapping[Hashable, OutputLoss]  # outputs that sum several products
    constant: float  # the loss that no weight changes
    base: torch.Tensor  # (n,): per example, 1/2 |y_v|^2 summed over outputs with h_v = 0
    idle: tuple[int, ...]
    n: int


def _gate_arrays(
    net: Plan, ex: ExampleSet
) -> tuple[dict[Hashable, np.ndarray], dict[int, np.ndarray]]:
    """Node gates by node and edge gates by edge index, float64 ``(n,)`` (as ``tensorise``)."""
    index = {e: i for i, e in enumerate(net.edges)}
    nodes: dict[Hashable, np.ndarray] = {}
    edges: dict[int, np.ndarray] = {}
    for key, g in ex.gates.items():
        if isinstance(key, tuple) and tuple(key) in index:
            edges[index[tuple(key)]] = np.asarray(g, dtype=np.float64)
        else:
            nodes[str(key)] = np.asarray(g, dtype=np.float64)
    return nodes, edges


def _input_states(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct non-zero rows of ``h`` and each row's state (``-1`` for zero rows)."""
    state = np.full(len(h), -1, dtype=np.int64)
    nonzero = np.any(h != 0, axis=1)
    if not nonzero.any():
        return np.zeros((0, h.shape[1])), state
    rows, inverse = np.unique(h[nonzero], axis=0, return_inverse=True)
    state[nonzero] = inverse.reshape(-1)
    return rows, state


@dataclass(frozen=True)
class _Terms:
    """The active in-edges of a node's states: one entry per (state, in-edge) pair."""

    state: np.ndarray  # the node's state
    position: np.ndarray  # the in-edge's position among the node's in-edges
    source: np.ndarray  # the source's state
    gate: np.ndarray  # g_v g_q


def _node_states(
    n: int, source_states: list[np.ndarray], gates: list[np.ndarray]
) -> tuple[np.ndarray, int, _Terms]:
    """The states of a node from its in-edges' source states and gates.

    States are numbered in the order of (first active in-edge, its source state, its
    gate, the next active in-edge, ...), so a node fed by one edge has the states of
    its source in their order, and a node whose examples each use one of several edges
    has them edge by edge.
    """
    degree = len(gates)
    active = np.zeros((n, degree), dtype=bool)
    source = np.full((n, degree), -1, dtype=np.int64)
    code = np.full((n, degree), -1, dtype=np.int64)
    values = []
    for p, (s, g) in enumerate(zip(source_states, gates, strict=True)):
        on = (g != 0) & (s >= 0)
        vals, inverse = np.unique(g, return_inverse=True)
        active[:, p], source[on, p], code[on, p] = on, s[on], inverse.reshape(-1)[on]
        values.append(vals)
    state = np.full(n, -1, dtype=np.int64)
    count = active.sum(1)
    used = count > 0
    none = np.zeros(0, dtype=np.int64)
    empty = _Terms(none, none, none, np.zeros(0))
    if not used.any():
        return state, 0, empty
    width = int(count.max())
    order = np.argsort(~active, axis=1, kind="stable")[:, :width]  # active in-edges first
    on = np.take_along_axis(active, order, 1)[used]
    columns = [order, np.take_along_axis(source, order, 1), np.take_along_axis(code, order, 1)]
    # an inactive term sorts after every active one of its column
    key = np.stack([np.where(on, c[used], -1) for c in columns], axis=2).reshape(-1, 3 * width)
    key = np.where(key < 0, key.max(0, initial=0) + 1, key)
    first, inverse = _unique_rows(key)
    state[used] = inverse
    unique, live = key[first].reshape(len(first), width, 3), on[first]
    which, slot = np.nonzero(live)
    position, code_at = unique[which, slot, 0], unique[which, slot, 2]
    offsets = np.cumsum([0] + [len(v) for v in values])
    gate = np.concatenate(values)[offsets[position] + code_at]
    terms = _Terms(which, position, unique[which, slot, 1], gate)
    return state, len(first), terms


def _unique_rows(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first row of each distinct row of ``key`` (int >= 0), in lexicographic order,
    and each row's number; one sort of integers when the rows fit one int64."""
    radix = key.max(0) + 1
    if math.prod(int(r) for r in radix) < 2**62:
        code = np.zeros(len(key), dtype=np.int64)
        for c in range(key.shape[1]):
            code = code * int(radix[c]) + key[:, c]
        _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    else:
        _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def state_plan(
    net: Plan, ex: ExampleSet, w: np.ndarray, dtype: torch.dtype, device: torch.device
) -> StatePlan:
    """The states, products and output loss terms of the examples ``ex`` (weights ``w``).

    ``ex`` must have been checked against ``net`` (:func:`~gdln.simulation._data.tensorise`).
    """
    n = len(w)
    node_gates, edge_gates = _gate_arrays(net, ex)
    ones = np.ones(n)

    def tensor(a: np.ndarray, kind: torch.dtype | None = None) -> torch.Tensor:
        return torch.as_tensor(np.asarray(a), dtype=kind or dtype, device=device)

    state: dict[Hashable, np.ndarray] = {}
    count: dict[Hashable, int] = {}
    inputs: dict[Hashable, np.ndarray] = {}
    terms: dict[Hashable, _Terms] = {}
    in_edges = {v: [i for i, e in enumerate(net.edges) if e[1] == v] for v in net.order}
    for v in net.order:
        g_v = node_gates.get(v, ones)
        if v in net.inputs:
            x = ex.inputs.get(v)
            h = np.zeros((n, net.sizes[v])) if x is None else np.asarray(x, dtype=np.float64)
            inputs[v], state[v] = _input_states(h * g_v[:, None])
            count[v] = len(inputs[v])
            continue
        sources = [state[net.edges[i][0]] for i in in_edges[v]]
        gates = [edge_gates.get(i, ones) * g_v for i in in_edges[v]]
        state[v], count[v], terms[v] = _node_states(n, sources, gates)

    builder = _Builder(net, in_edges, count, terms, inputs, tensor)
    products, storage, rows, idle = builder.products()
    product_loss, node_loss, constant, base = _output_losses(
        net, ex, w, state, storage, products, rows, tensor
    )
    return StatePlan(
        products=tuple(products),
        inputs={v: tensor(a).unsqueeze(0) for v, a in inputs.items()},
        storage=storage,
        rows=rows,
        state=state,
        product_loss=product_loss,
        node_loss=node_loss,
        constant=constant,
        base=tensor(base),
        idle=tuple(idle),
        n=n,
    )


class _Builder:
    """Groups the active edges into products and lays out every node's storage."""

    def __init__(self, net, in_edges, count, terms, inputs, tensor) -> None:  # type: ignore[no-untyped-def]
        self.net, self.in_edges, self.count, self.terms = net, in_edges, count, terms
        self.inputs, self.tensor = inputs, tensor
        self.storage: dict[Hashable, tuple] = {v: ("input",) for v in net.inputs}
        self.rows: dict[Hashable, int] = {v: count[v] for v in net.inputs}

    def edge_terms(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Edge ``i``'s active target states, their source states and gates, by state."""
        v = self.net.edges[i][1]
        t = self.terms[v]
        mine = t.position == self.in_edges[v].index(i)
        return t.state[mine], t.source[mine], t.gate[mine]

    def products(self) -> tuple[list[Product], dict, dict, list[int]]:
        net = self.net
        lone: dict[tuple, list[int]] = {}
        fan: dict[tuple, list[int]] = {}
        idle = []
        for i, (s, v) in enumerate(net.edges):
            if v in self.terms and not len(self.edge_terms(i)[0]):
                idle.append(i)
            elif len(self.in_edges[v]) == 1:
                lone.setdefault((s, net.sizes[v], v in net.outputs), []).append(i)
            else:
                fan.setdefault((v, net.sizes[s]), []).append(i)
        products: list[Product] = []
        for v in net.order:  # in the order the forward pass can run them
            into = [edges for (t, _), edges in fan.items() if t == v]
            for edges in into:
                products.append(self.fan_product(v, edges, single=len(into) == 1))
            if into:
                self.storage[v], self.rows[v] = ("sum",), self.count[v]
            for (s, _, _), edges in lone.items():
                if s == v:
                    products.append(self.lone_product(len(products), edges))
        return products, self.storage, self.rows, idle

    def gathered(self, edges: list[int], sources, r: int, sts, gts):  # type: ignore[no-untyped-def]
        """The source index, gate and constant input of slots ``(j, a)``."""
        net, k = self.net, len(edges)
        offsets = np.cumsum([0] + [self.rows[u] for u in sources])
        index = np.zeros((k, r), dtype=np.int64)
        gate = np.zeros((k, r))
        for j, i in enumerate(edges):
            m = len(sts[j])
            index[j, :m] = offsets[sources.index(net.edges[i][0])] + sts[j]
            gate[j, :m] = gts[j]
        padded = any(len(s) < r for s in sts)
        constant = None
        if all(u in net.inputs for u in sources):
            stacked = np.concatenate([self.inputs[u] for u in sources])
            constant = self.tensor(stacked[index] * gate[..., None]).unsqueeze(0)
        identity = (
            k == 1
            and not padded
            and len(sources) == 1
            and r == self.rows[sources[0]]
            and np.array_equal(index[0], np.arange(r))
            and bool((gate == 1).all())
        )
        source_index = None if identity else self.tensor(index.reshape(-1), torch.int64)
        ones = not padded and bool((gate == 1).all())
        gate_t = None if ones else self.tensor(gate[..., None] if k > 1 else gate[0][:, None])
        if constant is not None and k == 1:
            constant = constant[:, 0]
        return source_index, gate_t, constant

    def lone_product(self, p: int, edges: list[int]) -> Product:
        """The single in-edges of several targets: edge ``j``'s slots are its target's states."""
        net = self.net
        targets = tuple(net.edges[i][1] for i in edges)
        per = [self.edge_terms(i) for i in edges]
        r = max(len(st) for st, _, _ in per)
        sources = tuple(dict.fromkeys(net.edges[i][0] for i in edges))
        sts = [src for _, src, _ in per]  # the target's states are 0, 1, ... in order
        source_index, gate, constant = self.gathered(edges, sources, r, sts, [g for *_, g in per])
        for j, t in enumerate(targets):
            self.storage[t], self.rows[t] = ("slots", p, j), r
        return Product(
            edges=tuple(edges),
            stacked=len(edges) > 1,
            r=r,
            sources=sources,
            source_index=source_index,
            gate=gate,
            constant=constant,
            targets=targets,
            into=None,
            target_index=None,
        )

    def fan_product(self, v: Hashable, edges: list[int], *, single: bool) -> Product:
        """Several in-edges of ``v`` of one source width; their slots scatter into ``v``."""
        net, k = self.net, len(edges)
        per = [self.edge_terms(i) for i in edges]
        r = max(len(st) for st, _, _ in per)
        sources = tuple(dict.fromkeys(net.edges[i][0] for i in edges))
        source_index, gate, constant = self.gathered(
            edges, sources, r, [src for _, src, _ in per], [g for *_, g in per]
        )
        target = np.zeros((k, r), dtype=np.int64)
        for j, (st, _, _) in enumerate(per):
            target[j, : len(st)] = st
        in_order = (
            single
            and k * r == self.count[v]
            and np.array_equal(target.reshape(-1), np.arange(k * r))
            and all(len(st) == r for st, _, _ in per)
        )
        return Product(
            edges=tuple(edges),
            stacked=k > 1,
            r=r,
            sources=sources,
            source_index=source_index,
            gate=gate,
            constant=constant,
            targets=(v,) * k,
            into=v,
            target_index=None if in_order else self.tensor(target.reshape(-1), torch.int64),
        )


@dataclass(frozen=True)
class _OutputStates:
    """One output's states: total weight and weighted mean target, and its examples."""

    weight: np.ndarray  # (rows,) W_u
    mean: np.ndarray  # (rows, |v|) the weighted mean target of the state
    examples: np.ndarray  # the examples where the output is not 0
    state: np.ndarray  # their states
    y: np.ndarray  # their targets


def _output_states(
    y: np.ndarray, w: np.ndarray, state: np.ndarray, rows: int
) -> tuple[_OutputStates, float, np.ndarray]:
    r"""An output's states, its constant share of Eq. (1), and the share per example of the
    examples where it is 0 ($\tfrac12\lVert y\rVert^2$)."""
    on = state >= 0
    weight = np.bincount(state[on], weights=w[on], minlength=rows)
    total = np.zeros((rows, y.shape[1]))
    for c in range(y.shape[1]):
        total[:, c] = np.bincount(state[on], weights=w[on] * y[on, c], minlength=rows)
    mean = np.divide(total, weight[:, None], out=np.zeros_like(total), where=weight[:, None] > 0)
    residual = y[on] - mean[state[on]]
    off = np.zeros(len(w))
    off[~on] = 0.5 * (y[~on] ** 2).sum(1)
    # sums, not BLAS dot products: numpy's BLAS starts its threads for those, which on a
    # busy machine costs up to tens of milliseconds a call
    constant = 0.5 * float((w[on] * (residual**2).sum(1)).sum()) + float((w * off).sum())
    found = _OutputStates(weight, mean, np.nonzero(on)[0], state[on], y[on])
    return found, constant, off


def _output_losses(  # type: ignore[no-untyped-def]
    net: Plan, ex: ExampleSet, w: np.ndarray, state, storage, products, rows, tensor
) -> tuple[dict[int, OutputLoss], dict[Hashable, OutputLoss], float, np.ndarray]:
    """The loss terms of every output: by product (outputs fed by one edge) or by node."""
    constant, base = 0.0, np.zeros(len(w))
    outputs: dict[Hashable, _OutputStates] = {}
    for v in net.outputs:
        y = ex.targets.get(v)
        y = np.zeros((len(w), net.sizes[v])) if y is None else np.asarray(y, dtype=np.float64)
        outputs[v], share, off = _output_states(y, w, state[v], rows.get(v, 0))
        constant, base = constant + share, base + off
    product_loss: dict[int, OutputLoss] = {}
    for p, product in enumerate(products):
        if product.into is None and all(t in outputs for t in product.targets):
            k, r = len(product.targets), product.r
            weight = np.zeros((k, r, 1))
            mean = np.zeros((k, r, net.sizes[product.targets[0]]))
            pairs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
            for j, t in enumerate(product.targets):
                found = outputs[t]
                weight[j, : len(found.weight), 0], mean[j, : len(found.mean)] = (
                    found.weight,
                    found.mean,
                )
                pairs.append((found.examples, j * r + found.state, found.y))
            shape = (slice(None),) if product.stacked else (0,)
            product_loss[p] = _loss_terms(weight[shape], mean[shape], pairs, tensor)
    node_loss: dict[Hashable, OutputLoss] = {}
    for v in net.outputs:
        if storage.get(v, ("none",))[0] == "sum":
            found = outputs[v]
            pairs = [(found.examples, found.state, found.y)]
            node_loss[v] = _loss_terms(found.weight[:, None], found.mean, pairs, tensor)
    return product_loss, node_loss, constant, base


def _loss_terms(weight, mean, pairs, tensor) -> OutputLoss:  # type: ignore[no-untyped-def]
    example, row, y = (np.concatenate(a) for a in zip(*pairs, strict=True))
    return OutputLoss(
        weight=tensor(weight),
        mean=tensor(mean),
        pair_example=tensor(example, torch.int64),
        pair_row=tensor(row, torch.int64),
        pair_y=tensor(y),
    )
