r"""A full-batch training step on the states of :mod:`~gdln.simulation._states`, by hand.

Forward, $h_v = g_v\sum_{q:\,t(q)=v} g_q W_q h_{s(q)}$ (Sec. 2 of Saxe et al. 2022), one
batched product per :class:`~gdln.simulation._states.Product`; the loss of Eq. (1) on the
outputs' states; and its gradient by the chain rule written out (no autograd graph): with
$\delta_v = \partial\mathcal L/\partial h_v$ and a product's slots $X = g\,h_{s}$,

$$\delta_{\text{out},u} = W_u (h_u - \bar y_u),\qquad
\frac{\partial\mathcal L}{\partial W_q} = \sum_{\text{slots}} \delta_t\, X^\top,\qquad
\delta_s \mathrel{+}= g\,\delta_t W_q,$$

summed into each source's rows. At a ReLU node (``activation: relu``) the forward pass
keeps $h_v = \max(0, z_v)$ of the gated sum $z_v$ (states stay exact: examples that share
a state share $z_v$, hence its pattern), and before $\delta_v$ is passed on it is masked,
$\delta_v \leftarrow \delta_v \odot 1[h_v > 0]$ (the derivative of the ReLU, 0 at the
kink); a linear network runs none of this. A step is then a fixed, short list of tensor operations
(16 for the routing network of Fig. 4, whatever M: three products, each one batched
matrix product forward and one or two backward), which is what makes small networks
fast: their cost is the number of operations, not the arithmetic. Every product is
prepared once (:class:`_Op`: its constants expanded to the seeds, its index tensors and
zero buffers made), so the step itself only calls torch.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ._states import OutputLoss, Product, StatePlan
from ._weights import Weights

__all__ = ["StateStep"]


class _Activations(Mapping[Hashable, torch.Tensor]):
    """$h_v$ per example ``(S, n, |v|)`` of the hidden nodes, built on first access."""

    def __init__(self, nodes: Sequence[Hashable], build: Callable[[Hashable], torch.Tensor]):
        self.nodes, self.build = tuple(nodes), build
        self.made: dict[Hashable, torch.Tensor] = {}

    def __getitem__(self, v: Hashable) -> torch.Tensor:
        if v not in self.nodes:
            raise KeyError(v)
        if v not in self.made:
            self.made[v] = self.build(v)
        return self.made[v]

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)


@dataclass(frozen=True)
class _Op:
    """One product, ready to run: 3-D shapes for ``bmm``, seeds folded into the batch.

    A stacked product of ``k`` edges runs as ``S k`` matrix products of ``(r, |s|)`` by
    ``(|s|, |t|)``; its result, viewed ``(S, k r, |t|)``, holds the slots edge by edge.
    Each step writes into the same buffers (``*_flat`` ``(S, k r, ·)`` and their 3-D
    views ``(S k, r, ·)``), so a step allocates almost nothing.
    """

    product: Product
    block: int
    batch: int  # S k (stacked) or S
    shape: tuple[int, int, int]  # (S, k, r)
    width: tuple[int, int]  # (|s|, |t|)
    constant: torch.Tensor | None  # (batch, r, |s|)
    sources: tuple[int, ...]  # node numbers
    gate: torch.Tensor | None  # (k r, 1)
    targets: tuple[int, ...]
    into: int | None
    loss: OutputLoss | None
    source_zeros: torch.Tensor | None  # (S, sum of the sources' rows, |s|)
    source_rows: tuple[int, ...]
    back: tuple[bool, ...]  # per source: whether its delta is needed (not an input)
    into_zeros: torch.Tensor | None  # (S, rows of into, |t|)
    read: bool  # whether a later product reads the targets (not all outputs)
    activate: tuple[int, ...]  # ReLU nodes this product completes: h = max(0, h) after it
    target_zeros: torch.Tensor  # (S, r, |t|): a target that no later edge reads
    buffers: dict[str, torch.Tensor]


def _completed(
    p: int, prod: Product, last: Mapping[Hashable, int], relu: frozenset[Hashable]
) -> tuple[Hashable, ...]:
    """The ReLU nodes whose gated sum is complete once product ``p`` has run: its targets
    (the single in-edges of each), or the node it scatters into if it is the last there."""
    if not relu:
        return ()
    if prod.into is None:
        return tuple(t for t in prod.targets if t in relu)
    return (prod.into,) if prod.into in relu and last[prod.into] == p else ()


class StateStep:
    r"""Loss of Eq. (1) and its gradient for every block of ``weights``, on states.

    Parameters
    ----------
    plan
        The states and products of the training examples.
    weights
        The layout of the weights: each stacked product one block (``plan`` groups).
    sizes, hidden
        Node widths, and the hidden nodes (for the activations of a record).
    relu
        The ReLU nodes (``activation: relu``); empty for a linear network.
    """

    def __init__(
        self,
        plan: StatePlan,
        weights: Weights,
        sizes: Mapping[Hashable, int],
        hidden: Sequence[Hashable],
        relu: frozenset[Hashable] = frozenset(),
    ) -> None:
        self.plan, self.sizes, self.hidden = plan, sizes, tuple(hidden)
        self.seeds = weights.blocks[0].shape[0]
        first = weights.blocks[0]
        self.dtype, self.device = first.dtype, first.device
        nodes = list(dict.fromkeys([*plan.inputs, *plan.storage]))
        self.number = {v: i for i, v in enumerate(nodes)}
        self.nodes = nodes
        self.inputs = [(self.number[v], t) for v, t in plan.inputs.items()]
        last = {prod.into: p for p, prod in enumerate(plan.products) if prod.into is not None}
        self.ops = [
            self._prepare(p, prod, weights, _completed(p, prod, last, relu))
            for p, prod in enumerate(plan.products)
        ]
        self.raw = weights.blocks
        self.views = self._views(self.raw)  # the blocks trained in place: views made once
        self.node_loss = [(self.number[v], t) for v, t in plan.node_loss.items()]
        self.grads = [torch.zeros_like(b) for b in weights.blocks]  # idle edges keep these
        for op in self.ops:
            self.grads[op.block] = op.buffers["grad"]
        self.constant = torch.full((), plan.constant, dtype=self.dtype, device=self.device)
        self._example_rows: dict[Hashable, torch.Tensor] = {}

    def _zeros(self, *shape: int) -> torch.Tensor:
        return torch.zeros(shape, dtype=self.dtype, device=self.device)

    def _prepare(
        self, p: int, prod: Product, weights: Weights, activate: tuple[Hashable, ...]
    ) -> _Op:
        plan, seeds, k, r = self.plan, self.seeds, len(prod.edges), prod.r
        block = weights.groups[prod.edges] if prod.stacked else weights.where[prod.edges[0]][0]
        s_width = self.sizes[prod.sources[0]] if prod.sources else prod.constant.shape[-1]  # type: ignore[union-attr]
        t_width = self.sizes[prod.targets[0]]
        batch = seeds * k if prod.stacked else seeds
        constant = None
        if prod.constant is not None:  # (1, [k,] r, |s|), expanded to the seeds once
            constant = prod.constant.expand(seeds, *prod.constant.shape[1:])
            constant = constant.reshape(batch, r, s_width).contiguous()
        gate = None if prod.gate is None else prod.gate.reshape(k * r, 1)
        rows = tuple(plan.rows[u] for u in prod.sources)
        back = tuple(u not in plan.inputs for u in prod.sources)
        source_zeros = None
        if prod.source_index is not None and any(back):
            source_zeros = self._zeros(seeds, sum(rows), s_width)
        into_zeros = None
        if prod.into is not None and prod.target_index is not None:
            into_zeros = self._zeros(seeds, plan.rows[prod.into], t_width)
        buffers = {}
        for name, width in (("x", s_width), ("p", t_width), ("back", s_width), ("d", t_width)):
            flat = self._zeros(seeds, k * r, width)
            buffers[name], buffers[name + "3"] = flat, flat.view(batch, r, width)
        buffers["grad"] = grad = torch.zeros_like(weights.blocks[block])
        buffers["grad3"] = grad.view(batch, t_width, s_width)
        if source_zeros is not None:
            buffers["scatter"] = torch.zeros_like(source_zeros)
        loss = plan.product_loss.get(p)
        if loss is not None:  # the output loss terms, expanded to the seeds once
            for name, values in (("mean", loss.mean), ("weight", loss.weight)):
                full = values.expand(seeds, *values.shape).reshape(batch, r, values.shape[-1])
                buffers[name] = full.contiguous()
            buffers["error"] = error = self._zeros(batch, r, t_width)
            buffers["dot"] = dot = self._zeros(seeds) if seeds > 1 else self._zeros()
            buffers["dot_seeds"] = dot.view(seeds)
            buffers["error_seeds"] = error.view(seeds, -1)
            buffers["d_seeds"] = buffers["d3"].view(seeds, -1)
            buffers["error_1d"], buffers["d_1d"] = error.view(-1), buffers["d3"].view(-1)
        return _Op(
            product=prod,
            block=block,
            batch=batch,
            shape=(seeds, k, r),
            width=(s_width, t_width),
            constant=constant,
            sources=tuple(self.number[u] for u in prod.sources),
            gate=gate,
            targets=tuple(self.number[t] for t in prod.targets),
            into=None if prod.into is None else self.number[prod.into],
            loss=loss,
            source_zeros=source_zeros,
            source_rows=rows,
            back=back,
            into_zeros=into_zeros,
            target_zeros=self._zeros(seeds, r, t_width),
            read=loss is None,
            activate=tuple(self.number[v] for v in activate),
            buffers=buffers,
        )

    def work(self) -> tuple[float, int]:
        """Floating-point operations of a step's products, and its tensor operations."""
        flops = 0.0
        for op in self.ops:
            seeds, k, r = op.shape
            products = 2 if op.constant is not None else 3  # forward, gradient, delta back
            flops += 2.0 * products * seeds * k * r * op.width[0] * op.width[1]
        return flops, 5 * len(self.ops) + 4

    def _views(self, blocks: Sequence[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each product's weights 3-D ``(batch, |t|, |s|)`` and transposed."""
        out = []
        for op in self.ops:
            weight = blocks[op.block]
            if op.product.stacked:
                weight = weight.view(op.batch, op.width[1], op.width[0])
            out.append((weight, weight.mT))
        return out

    def forward(
        self, blocks: Sequence[torch.Tensor]
    ) -> tuple[
        list[torch.Tensor | None],
        list[torch.Tensor],
        list[torch.Tensor],
        list[tuple[torch.Tensor, torch.Tensor]],
    ]:
        """Every node's storage, each product's slots $X$ and result $P = X W^\\top$
        (3-D), and the weights' views."""
        views = self.views if blocks is self.raw else self._views(blocks)
        h: list[torch.Tensor | None] = [None] * len(self.nodes)
        for i, values in self.inputs:
            h[i] = values
        xs, ps = [], []
        for op, (_, weight_t) in zip(self.ops, views, strict=True):
            prod, buffers = op.product, op.buffers
            seeds = op.shape[0]
            if op.constant is not None:
                x = op.constant
            else:
                if len(op.sources) == 1:
                    source = h[op.sources[0]]
                    assert source is not None
                else:
                    source = torch.cat([h[u].expand(seeds, -1, -1) for u in op.sources], dim=1)  # type: ignore[union-attr]
                if prod.source_index is None:
                    x = source
                else:
                    torch.index_select(source, 1, prod.source_index, out=buffers["x"])
                    if op.gate is not None:
                        torch.mul(buffers["x"], op.gate, out=buffers["x"])
                    x = buffers["x3"]
            result = torch.bmm(x, weight_t, out=buffers["p3"])
            xs.append(x)
            ps.append(result)
            if op.into is None:
                if not op.read:
                    continue
                if prod.stacked:
                    slots = buffers["p"].unflatten(1, (op.shape[1], op.shape[2]))
                    for j, t in enumerate(op.targets):
                        h[t] = slots[:, j]
                else:
                    h[op.targets[0]] = result
                for t in op.activate:
                    h[t] = torch.relu(h[t])  # type: ignore[arg-type]
                continue
            if op.into_zeros is None:
                h[op.into] = buffers["p"]
            else:
                into = h[op.into]
                assert prod.target_index is not None
                h[op.into] = (op.into_zeros if into is None else into).index_add(
                    1, prod.target_index, buffers["p"]
                )
            for t in op.activate:
                h[t] = torch.relu(h[t])  # type: ignore[arg-type]
        return h, xs, ps, views

    def step(
        self, blocks: Sequence[torch.Tensor], *, backward: bool = True
    ) -> tuple[torch.Tensor, list[torch.Tensor] | None, Callable[[], tuple]]:
        r"""The loss ``(S,)``, the gradient of every block, and the pass for a record.

        The last is a function returning ``(activations, per-example losses (S, n))``,
        computed only if called (a recorded step). The gradients are buffers that the
        next step overwrites.
        """
        h, xs, ps, views = self.forward(blocks)
        seeds = self.seeds
        parts = []
        dh: list[torch.Tensor | None] = [None] * len(self.nodes)
        for v, term in self.node_loss:
            error = h[v] - term.mean  # type: ignore[operator]
            dh[v] = delta = error * term.weight
            parts.append(torch.linalg.vecdot(error.reshape(seeds, -1), delta.reshape(seeds, -1)))
        for p in range(len(self.ops) - 1, -1, -1):
            op = self.ops[p]
            buffers = op.buffers
            if op.loss is not None:
                error = torch.sub(ps[p], buffers["mean"], out=buffers["error"])
                delta = torch.mul(error, buffers["weight"], out=buffers["d3"])
                if seeds == 1:
                    torch.dot(buffers["error_1d"], buffers["d_1d"], out=buffers["dot"])
                else:
                    vecdot = torch.linalg.vecdot
                    vecdot(buffers["error_seeds"], buffers["d_seeds"], out=buffers["dot"])
                parts.append(buffers["dot_seeds"])
            elif not backward:
                continue
            else:
                for t in op.activate:  # the ReLU's derivative, 1[h > 0], once per node
                    before, after = dh[t], h[t]
                    if before is not None and after is not None:
                        dh[t] = before * (after > 0)
                found = self._delta(op, dh)
                if found is None:
                    continue
                delta = found
            if not backward:
                continue
            torch.bmm(delta.mT, xs[p], out=buffers["grad3"])
            if op.constant is None:
                self._to_sources(op, delta, views[p][0], dh)
        if not parts:
            loss = self.constant.expand(seeds)
        else:
            total = parts[0] if len(parts) == 1 else torch.stack(parts).sum(0)
            loss = torch.add(self.constant, total, alpha=0.5)
        grads = list(self.grads) if backward else None
        return loss, grads, lambda: self.record_pass(h, ps)

    def _delta(self, op: _Op, dh: list[torch.Tensor | None]) -> torch.Tensor | None:
        r"""$\partial\mathcal L/\partial P$ of a product's slots, 3-D, from its targets."""
        prod, buffers = op.product, op.buffers
        if op.into is None:
            parts = [dh[t] for t in op.targets]
            if all(d is None for d in parts):
                return None
            if not prod.stacked:
                return parts[0]
            full = [op.target_zeros if d is None else d for d in parts]
            torch.stack(full, dim=1, out=buffers["d"].unflatten(1, (op.shape[1], op.shape[2])))
            return buffers["d3"]
        into = dh[op.into]
        if into is None:
            return None
        if prod.target_index is not None:
            into = torch.index_select(into, 1, prod.target_index, out=buffers["d"])
        return into.reshape(op.batch, op.shape[2], op.width[1]) if prod.stacked else into

    def _to_sources(
        self, op: _Op, delta: torch.Tensor, weight: torch.Tensor, dh: list[torch.Tensor | None]
    ) -> None:
        r"""Add $g\,\delta W_q$ of every slot to the $\delta$ of its source row."""
        prod, buffers = op.product, op.buffers
        torch.bmm(delta, weight, out=buffers["back3"])
        back = buffers["back"]
        if op.gate is not None:
            torch.mul(back, op.gate, out=back)
        if op.source_zeros is not None:
            assert prod.source_index is not None
            back = torch.index_add(
                op.source_zeros, 1, prod.source_index, back, out=buffers["scatter"]
            )
        parts = back.split(op.source_rows, dim=1) if len(op.sources) > 1 else (back,)
        for u, needed, part in zip(op.sources, op.back, parts, strict=True):
            if needed:
                before = dh[u]
                dh[u] = part if before is None else before + part

    def record_pass(
        self, h: Sequence[torch.Tensor | None], ps: Sequence[torch.Tensor]
    ) -> tuple[Mapping[Hashable, torch.Tensor], torch.Tensor]:
        r"""Per-example losses of Eq. (1) ``(S, n)``, and the hidden activations (lazily).

        Example $n$'s loss is $\tfrac12\sum_v\lVert y_v - h_v\rVert^2$, its outputs' rows
        gathered from the states.
        """
        plan, seeds = self.plan, self.seeds
        per_example = plan.base.expand(seeds, plan.n)
        terms: list[tuple[torch.Tensor | None, OutputLoss | None]] = [
            (ps[p], op.loss) for p, op in enumerate(self.ops) if op.loss is not None
        ]
        terms += [(h[v], t) for v, t in self.node_loss]
        for values, term in terms:
            assert values is not None and term is not None
            flat = values.reshape(seeds, -1, values.shape[-1])
            rows = flat.index_select(1, term.pair_row)
            share = 0.5 * (term.pair_y - rows).square().sum(-1)
            per_example = per_example.index_add(1, term.pair_example, share)
        return _Activations(self.hidden, lambda v: self._per_example(h, v)), per_example

    def _per_example(self, h: Sequence[torch.Tensor | None], v: Hashable) -> torch.Tensor:
        """$h_v$ of every example ``(S, n, |v|)`` (0 where no in-edge is active)."""
        width = self.sizes[v]
        values = h[self.number[v]] if v in self.number else None
        if values is None:
            return self._zeros(self.seeds, self.plan.n, width)
        rows = self._example_rows.get(v)
        if rows is None:
            state = self.plan.state[v]
            index = np.where(state >= 0, state, self.plan.rows[v])
            rows = torch.as_tensor(index, dtype=torch.int64, device=self.device)
            self._example_rows[v] = rows
        zero = self._zeros(self.seeds, 1, width)
        padded = torch.cat([values.expand(self.seeds, -1, -1), zero], dim=1)
        return padded.index_select(1, rows)
