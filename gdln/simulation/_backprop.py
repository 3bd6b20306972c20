r"""A full-batch training step on the states of :mod:`~gdln.simulation._states`, by hand.

Forward, $h_v = g_v\sum_{q:\,t(q)=v} g_q W_q h_{s(q)}$ (Sec. 2 of Saxe et al. 2022), one
batched product per :class:`~gdln.simulation._states.Product`; the loss of Eq. (1) on the
outputs' states; and its gradient by the chain rule written out (no autograd graph): with
$\delta_v = \partial\mathcal L/\partial h_v$ and a product's slots $X = g\,h_{s}$,

$$\delta_{\text{out},u} = W_u (h_u - \bar y_u),\qquad
\frac{\partial\mathcal L}{\partial W_q} = \sum_{\text{slots}} \delta_t\, X^\top,\qquad
\delta_s \mathrel{+}= g\,\delta_t W_q,$$

summed into each source's rows. A step is then a fixed, short list of tensor operations
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
    target_zeros: torch.Tensor  # (S, r, |t|): a target that no later edge reads


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
    """

    def __init__(
        self,
        plan: StatePlan,
        weights: Weights,
        sizes: Mapping[Hashable, int],
        hidden: Sequence[Hashable],
    ) -> None:
        self.plan, self.sizes, self.hidden = plan, sizes, tuple(hidden)
        self.seeds = weights.blocks[0].shape[0]
        first = weights.blocks[0]
        self.dtype, self.device = first.dtype, first.device
        nodes = list(dict.fromkeys([*plan.inputs, *plan.storage]))
        self.number = {v: i for i, v in enumerate(nodes)}
        self.nodes = nodes
        self.inputs = [(self.number[v], t) for v, t in plan.inputs.items()]
        self.ops = [self._prepare(p, prod, weights) for p, prod in enumerate(plan.products)]
        self.raw = weights.blocks
        self.views = self._views(self.raw)  # the blocks trained in place: views made once
        self.node_loss = [(self.number[v], t) for v, t in plan.node_loss.items()]
        self.zero_grads = [torch.zeros_like(b) for b in weights.blocks]
        self.constant = torch.full((), plan.constant, dtype=self.dtype, device=self.device)
        self._example_rows: dict[Hashable, torch.Tensor] = {}

    def _zeros(self, *shape: int) -> torch.Tensor:
        return torch.zeros(shape, dtype=self.dtype, device=self.device)

    def _prepare(self, p: int, prod: Product, weights: Weights) -> _Op:
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
            loss=plan.product_loss.get(p),
            source_zeros=source_zeros,
            source_rows=rows,
            back=back,
            into_zeros=into_zeros,
            target_zeros=self._zeros(seeds, r, t_width),
            read=p not in plan.product_loss,
        )

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
        """Every node's storage, each product's slots $X$ and result $P = X W^\\top$, and
        the weights' views."""
        views = self.views if blocks is self.raw else self._views(blocks)
        h: list[torch.Tensor | None] = [None] * len(self.nodes)
        for i, values in self.inputs:
            h[i] = values
        xs, ps = [], []
        for op, (_, weight_t) in zip(self.ops, views, strict=True):
            prod = op.product
            seeds, k, r = op.shape
            s_width, t_width = op.width
            if op.constant is not None:
                x = op.constant
            else:
                if len(op.sources) == 1:
                    source = h[op.sources[0]]
                    assert source is not None
                else:
                    source = torch.cat([h[u].expand(seeds, -1, -1) for u in op.sources], dim=1)  # type: ignore[union-attr]
                if prod.source_index is not None:
                    source = source.index_select(1, prod.source_index)
                    if op.gate is not None:
                        source = source * op.gate
                x = source.view(op.batch, r, s_width) if prod.stacked else source
            result = torch.bmm(x, weight_t)
            xs.append(x)
            ps.append(result)
            if op.into is None:
                if not op.read:
                    continue
                if prod.stacked:
                    slots = result.view(seeds, k, r, t_width)
                    for j, t in enumerate(op.targets):
                        h[t] = slots[:, j]
                else:
                    h[op.targets[0]] = result
                continue
            flat = result.view(seeds, k * r, t_width) if prod.stacked else result
            if op.into_zeros is None:
                h[op.into] = flat
            else:
                into = h[op.into]
                h[op.into] = (op.into_zeros if into is None else into).index_add(
                    1, prod.target_index, flat
                )
        return h, xs, ps, views

    def step(
        self, blocks: Sequence[torch.Tensor], *, backward: bool = True
    ) -> tuple[torch.Tensor, list[torch.Tensor] | None, Callable[[], tuple]]:
        r"""The loss ``(S,)``, the gradient of every block, and the pass for a record.

        The last is a function returning ``(activations, per-example losses (S, n))``,
        computed only if called (a recorded step).
        """
        h, xs, ps, views = self.forward(blocks)
        seeds = self.seeds
        parts = []
        dh: list[torch.Tensor | None] = [None] * len(self.nodes)
        for v, term in self.node_loss:
            error = h[v] - term.mean  # type: ignore[operator]
            dh[v] = delta = error * term.weight
            parts.append(self._dot(error, delta))
        grads: list[torch.Tensor] | None = list(self.zero_grads) if backward else None
        for p in range(len(self.ops) - 1, -1, -1):
            op = self.ops[p]
            if op.loss is not None:
                shape = op.shape if op.product.stacked else (seeds, op.shape[2])
                error = ps[p].view(*shape, -1) - op.loss.mean
                delta = error * op.loss.weight
                parts.append(self._dot(error, delta))
                delta = delta.view(ps[p].shape)
            elif grads is None:
                continue
            else:
                found = self._delta(op, dh)
                if found is None:
                    continue
                delta = found
            if grads is None:
                continue
            grad = torch.bmm(delta.mT, xs[p])
            grads[op.block] = grad.view(blocks[op.block].shape) if op.product.stacked else grad
            if op.constant is None:
                self._to_sources(op, delta, views[p][0], dh)
        if not parts:
            loss = self.constant.expand(seeds)
        else:
            total = parts[0] if len(parts) == 1 else torch.stack(parts).sum(0)
            loss = torch.add(self.constant, total.view(seeds), alpha=0.5)
        return loss, grads, lambda: self.record_pass(h, ps)

    def _dot(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """The dot product of each seed's ``a`` and ``b`` ``(S,)``: one kernel for one seed."""
        if self.seeds == 1:
            return torch.dot(a.view(-1), b.view(-1)).view(1)
        return torch.linalg.vecdot(a.view(self.seeds, -1), b.view(self.seeds, -1))

    def _delta(self, op: _Op, dh: list[torch.Tensor | None]) -> torch.Tensor | None:
        r"""$\partial\mathcal L/\partial P$ of a product's slots, 3-D, from its targets."""
        prod = op.product
        seeds, k, r = op.shape
        if op.into is None:
            parts = [dh[t] for t in op.targets]
            if all(d is None for d in parts):
                return None
            if not prod.stacked:
                return parts[0]
            stacked = torch.stack([op.target_zeros if d is None else d for d in parts], dim=1)
            return stacked.view(op.batch, r, op.width[1])
        into = dh[op.into]
        if into is None:
            return None
        if prod.target_index is not None:
            into = into.index_select(1, prod.target_index)
        return into.reshape(op.batch, r, op.width[1]) if prod.stacked else into

    def _to_sources(
        self, op: _Op, delta: torch.Tensor, weight: torch.Tensor, dh: list[torch.Tensor | None]
    ) -> None:
        r"""Add $g\,\delta W_q$ of every slot to the $\delta$ of its source row."""
        prod = op.product
        seeds, k, r = op.shape
        s_width = op.width[0]
        back = torch.bmm(delta, weight)
        if prod.stacked:
            back = back.view(seeds, k * r, s_width)
        if op.gate is not None:
            back = back * op.gate
        if op.source_zeros is not None:
            back = op.source_zeros.index_add(1, prod.source_index, back)
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
        terms = [(ps[p], op.loss) for p, op in enumerate(self.ops) if op.loss is not None]
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
