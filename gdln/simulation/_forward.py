r"""The forward pass of the full network and its per-example loss (Sec. 2, Eq. 1).

$h_v = g_v\sum_{q:\,t(q)=v} g_q W_q h_{s(q)}$ in topological order (at a ReLU node,
``activation: relu``, $h_v = \max(0, g_v\sum_q g_q W_q h_{s(q)})$), input nodes
$h_v = g_v x_v$, and the per-example loss $\tfrac12\sum_{v\in\mathrm{Out}}\lVert
y_v-h_v\rVert^2$ of Eq. (1) of Saxe et al. 2022. Every tensor carries a leading seed
axis ``S`` (1 for data shared by all seeds).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

from ._data import Data, GroupRows
from ._plan import Plan
from ._weights import Weights

__all__ = ["Activations", "forward"]

Activations = dict[Hashable, torch.Tensor]
"""Node -> $h_v$ ``(S, n, |v|)``."""


def forward(
    net: Plan,
    weights: Sequence[torch.Tensor] | Weights,
    data: Data,
    rows: torch.Tensor | None = None,
    *,
    outputs: bool = False,
) -> tuple[Activations, torch.Tensor]:
    r"""Activations $h_v$ ``(S, n, |v|)`` and per-example losses ``(S, n)``.

    $h_v = g_v\sum_{q: t(q)=v} g_q W_q h_{s(q)}$ (Sec. 2), input nodes $h_v = g_v x_v$; the
    per-example loss is $\tfrac12\sum_{v\in\mathrm{Out}}\lVert y_v-h_v\rVert^2$ (Eq. 1).
    ``weights``: one tensor per edge, or :class:`Weights` blocks. ``rows`` ``(S, b)``
    selects a minibatch per seed; full-batch passes follow the examples' own plan, which
    computes each group of sparsely gated edges as one batched product on their active
    rows, and an output fed by one such edge enters Eq. (1) as
    $\tfrac12\lVert y\rVert^2 + (\tfrac12\lVert h\rVert^2 - y\cdot h)$ on those rows;
    its $h_v$ is built only if ``outputs``. Input activations are built only where a
    dense product reads them.
    """
    if not isinstance(weights, Weights):
        weights = Weights.of_edges(weights)
    state = _Pass(net, weights, data, rows, outputs=outputs)
    for v in state.net.order:
        state.visit(v)
    for group in state.groups:
        if not group.group.into:
            state.sparse_output_loss(group)
    return state.h, state.loss()


class _Pass:
    """One forward pass in progress: the activations so far and what later nodes need."""

    def __init__(
        self,
        net: Plan,
        weights: Weights,
        data: Data,
        rows: torch.Tensor | None,
        *,
        outputs: bool,
    ) -> None:
        full_batch = rows is None
        self.net = data.plan if full_batch else net
        self.sparse_outputs = data.sparse_outputs if full_batch else ()
        self.groups = data.groups if full_batch else ()
        self.into: dict[Hashable, list[GroupRows]] = {}
        for g in self.groups:
            if g.group.into:
                self.into.setdefault(g.group.node, []).append(g)
        self.weights, self.data, self.rows, self.outputs = weights, data, rows, outputs
        self.h: Activations = {}
        self.split: dict[int, torch.Tensor] = {}  # fan-out products g_q W_q h_s, by edge
        self.whole: Activations = {}  # fan-out source -> the gated product, all targets
        self.per_example: torch.Tensor | None = None

    def pick(self, a: torch.Tensor) -> torch.Tensor:
        """``(n, ...)`` -> ``(1, n, ...)`` shared by the seeds, or ``(S, b, ...)`` per seed."""
        return a.unsqueeze(0) if self.rows is None else a[self.rows]

    def gate(self, i: int, a: torch.Tensor) -> torch.Tensor:
        """``a`` times the gate $g_q$ of edge ``i`` (if gated)."""
        g = self.data.edge_gates.get(i)
        return a if g is None else a * self.pick(g).unsqueeze(-1)

    def act(self, v: Hashable) -> torch.Tensor:
        """$h_v$, built now for an input node read for the first time."""
        if v not in self.h:
            hv = self.pick(self.data.x[v])
            if v in self.data.node_gates:
                hv = hv * self.pick(self.data.node_gates[v]).unsqueeze(-1)
            self.h[v] = hv
        return self.h[v]

    def visit(self, v: str) -> None:
        """Compute $h_v$, and from it what $v$'s out-edges pass on."""
        net, data = self.net, self.data
        if v in net.inputs:
            if v in net.fan_out:
                self.fan_out(v, self.act(v))
            return
        if v in self.sparse_outputs:
            return
        terms = self.dense_terms(v)
        terms += [self.sparse_term(g) for g in self.into.get(v, ())]
        hv = terms[0]
        for term in terms[1:]:
            hv = hv + term
        if v in data.node_gates:
            hv = hv * self.pick(data.node_gates[v]).unsqueeze(-1)
        if v in net.relu:
            hv = torch.relu(hv)
        self.h[v] = hv
        if v in net.fan_out:
            self.fan_out(v, hv)

    def dense_terms(self, v: str) -> list[torch.Tensor]:
        """$g_q W_q h_{s(q)}$ of the dense in-edges: one matmul for a fan-in, then fan-outs."""
        net, weights = self.net, self.weights
        terms = []
        fan_in = net.fan_in[v]
        if len(fan_in) == 1:
            i = fan_in[0]
            product = torch.matmul(self.act(net.edges[i][0]), weights.edge(i).mT)
            terms.append(self.gate(i, product))
        elif fan_in:
            sources = [self.gate(i, self.act(net.edges[i][0])) for i in fan_in]
            batch = max(a.shape[0] for a in sources)
            sources = [a.expand(batch, -1, -1) for a in sources]
            stacked = torch.cat([weights.edge(i) for i in fan_in], dim=-1)
            terms.append(torch.matmul(torch.cat(sources, dim=-1), stacked.mT))
        terms += [self.split.pop(i) for i in net.fan_out_into[v]]
        return terms

    def group_product(self, group: GroupRows) -> torch.Tensor:
        r"""$g_q W_q h_{s(q)}$ on each edge's active rows, ``(S, k, r, |t|)``: one matmul."""
        k = len(group.group.edges)
        if group.constant is not None:
            gathered = group.constant.unsqueeze(0)
        else:
            hs = [self.act(u) for u in group.sources]
            if len(hs) == 1:
                source = hs[0]
            else:
                batch = max(a.shape[0] for a in hs)
                source = torch.cat([a.expand(batch, -1, -1) for a in hs], dim=1)
            gathered = source[:, group.source_index].unflatten(1, (k, group.r))
            if group.gate is not None:
                gathered = gathered * group.gate
        return torch.matmul(gathered, self.weights.group(group.group.edges).mT)

    def sparse_term(self, group: GroupRows) -> torch.Tensor:
        """A group of sparse in-edges of one node, computed on their rows, scattered at once."""
        product = self.group_product(group).flatten(1, 2)
        full = product.new_zeros((product.shape[0], self.data.n, product.shape[-1]))
        return full.index_add(1, group.rows, product)

    def sparse_output_loss(self, group: GroupRows) -> None:
        r"""The share of Eq. (1) of the outputs a group of sparse edges alone feeds.

        $\tfrac12\lVert y\rVert^2$ is in ``data.sparse_const``; the active rows add
        $\tfrac12\lVert h\rVert^2 - y\cdot h$. $h_v$ itself is built only if asked for.
        """
        assert group.y is not None
        a = self.group_product(group)
        share = ((0.5 * a - group.y) * a).sum(-1).flatten(1)
        base = self.data.sparse_const if self.per_example is None else self.per_example
        self.per_example = base.expand(share.shape[0], -1).index_add(1, group.rows, share)
        if self.outputs:
            n, width = self.data.n, a.shape[-1]
            full = a.new_zeros((a.shape[0], len(group.targets) * n, width))
            full = full.index_add(1, group.target_index, a.flatten(1, 2))
            self.h.update(zip(group.targets, full.unflatten(1, (-1, n)).unbind(1), strict=True))

    def fan_out(self, v: str, hv: torch.Tensor) -> None:
        r"""$h_v [W_1^\top \cdots W_k^\top]$ for ``v``'s fan-out group, gated, in one matmul."""
        net = self.net
        group = net.fan_out[v]
        product = torch.matmul(hv, torch.cat([self.weights.edge(i) for i in group], dim=-2).mT)
        group_gate = self.data.group_gates[group]
        if group_gate is not None:
            product = product * self.pick(group_gate)
        self.whole[v] = product
        sizes = [net.sizes[net.edges[i][1]] for i in group]
        self.split.update(zip(group, torch.split(product, sizes, dim=-1), strict=True))

    def loss(self) -> torch.Tensor:
        """Eq. (1) per example ``(S, n)``: the sparse outputs' shares plus the other outputs.

        The other outputs are taken at once, from the fan-out product when they are it.
        """
        net, data = self.net, self.data
        if self.rows is not None:
            target, dense = self.pick(data.y_cat), list(net.outputs)
        else:
            target = self.pick(data.y_dense)
            dense = [v for v in net.outputs if v not in self.sparse_outputs]
        if dense:
            if net.output_group is not None and not any(v in data.node_gates for v in dense):
                out = self.whole[net.output_group]
            else:
                out = torch.cat([self.h[v] for v in dense], dim=-1)
            err = 0.5 * (target - out).square().sum(-1)
            self.per_example = err if self.per_example is None else self.per_example + err
        assert self.per_example is not None
        return self.per_example
