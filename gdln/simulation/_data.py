r"""An :class:`~gdln.task.ExampleSet` as the tensors the forward pass reads.

Besides the data, gates and weights of Eq. (1) of Saxe et al. 2022, the examples fix
what the plan can skip: a gated edge that is on for few examples is computed on those
rows only (:data:`~gdln.simulation._plan.SPARSE_FRACTION`), and an output fed by such an
edge alone enters the loss through its active rows.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .._errors import TaskSpecError
from ..task._examples import ExampleSet
from ._errors import SimulationSpecError
from ._plan import SPARSE_FRACTION, Plan, SparseGroup, compile_plan, sparse_groups
from ._states import StatePlan, state_plan

__all__ = ["Data", "GroupRows", "tensorise"]


@dataclass(frozen=True)
class GroupRows:
    r"""What a :class:`~gdln.simulation._plan.SparseGroup` reads, padded to ``r`` rows per edge.

    Slot ``(j, a)`` of edge ``j`` of the group holds its ``a``-th active example
    ``rows[j * r + a]``, or example 0 with gate 0 (padding, adding nothing).
    """

    group: SparseGroup
    r: int
    rows: torch.Tensor  # (k r,) the example of each slot
    gate: torch.Tensor | None  # (k, r, 1) the edge gate g_q there, 0 on padding; None: all 1
    sources: tuple[Hashable, ...]  # the distinct sources, in order
    source_index: torch.Tensor  # (k r,) slot -> row of the sources stacked (m n, |s|)
    constant: torch.Tensor | None  # (k, r, |s|) g_q h_s, when every source is an input
    targets: tuple[Hashable, ...]  # the distinct targets, in order
    target_index: torch.Tensor  # (k r,) slot -> row of the targets stacked (m n, |t|)
    y: torch.Tensor | None  # (k, r, |t|) the targets' data, for a group into outputs


@dataclass(frozen=True)
class Data:
    """An ExampleSet as tensors: data ``(n, |v|)``, gates ``(n,)``, weights ``(n,)``."""

    x: Mapping[Hashable, torch.Tensor]
    y: Mapping[Hashable, torch.Tensor]
    node_gates: Mapping[Hashable, torch.Tensor]
    edge_gates: Mapping[int, torch.Tensor]
    w: torch.Tensor
    context: torch.Tensor  # (n,) int64: the context of each example
    context_weight: torch.Tensor  # (n,): its weight within its context (summing to 1)
    context_empty: torch.Tensor  # (C,): nan for a context without weight, else 0
    labels: tuple[str, ...]
    n: int
    group_gates: Mapping[tuple[int, ...], torch.Tensor | None]  # fan-out group -> (n, sum |t|)
    y_cat: torch.Tensor  # (n, sum over outputs |v|)
    rows: Mapping[int, torch.Tensor]  # sparse gated edge -> the rows where its gate is on
    plan: Plan  # the computation plan for full-batch passes over these examples
    sparse_outputs: tuple[str, ...]  # outputs fed by one sparse edge only (full batch)
    sparse_const: torch.Tensor  # (n,): 1/2 sum over sparse outputs of |y_v|^2
    y_dense: torch.Tensor  # (n, sum |v| over the other outputs)
    groups: tuple[GroupRows, ...] = ()  # the sparse edges, in batched groups
    states: StatePlan | None = None  # the examples' states, for full-batch steps by hand

    def __post_init__(self) -> None:
        if self.w.ndim != 1 or len(self.w) != self.n:
            raise ValueError("weights must be (n,)")

    def per_context(self, per_example: torch.Tensor) -> torch.Tensor:
        """The weighted average of ``per_example`` ``(S, n)`` within each context ``(S, C)``.

        ``nan`` for a context without weight.
        """
        weighted = per_example * self.context_weight
        zeros = self.context_empty.expand(per_example.shape[0], -1)
        return zeros.index_add(1, self.context, weighted)


@dataclass(frozen=True)
class _Tensors:
    """Makes float tensors of one dtype on one device."""

    dtype: torch.dtype
    device: torch.device

    def __call__(self, a: Any) -> torch.Tensor:
        return torch.as_tensor(
            np.asarray(a, dtype=np.float64), dtype=self.dtype, device=self.device
        )

    def zeros(self, *shape: int) -> torch.Tensor:
        return torch.zeros(*shape, dtype=self.dtype, device=self.device)

    def ones(self, *shape: int) -> torch.Tensor:
        return torch.ones(*shape, dtype=self.dtype, device=self.device)


def tensorise(
    net: Plan,
    ex: ExampleSet,
    name: str,
    dtype: torch.dtype,
    device: torch.device,
    *,
    states: bool = False,
) -> Data:
    """Check ``ex`` (called ``name`` in messages) against the graph and make its tensors.

    ``states``: also find the examples' states (:func:`~gdln.simulation._states.state_plan`).
    """
    _check_examples(net, ex, name)
    n = len(ex)
    tensor = _Tensors(dtype, device)
    x: dict[Hashable, torch.Tensor] = {v: _column(ex.inputs, v, n, net, tensor) for v in net.inputs}
    y: dict[Hashable, torch.Tensor] = {
        v: _column(ex.targets, v, n, net, tensor) for v in net.outputs
    }
    node_gates, edge_gates = _gates(net, ex, name, tensor)
    w = _example_weights(ex, name)
    labels, context, within, empty = _context_average(ex, w)
    rows = _sparse_rows(n, edge_gates)
    plan = compile_plan(net.graph, frozenset(rows)) if rows else net
    sparse_outputs = tuple(
        v
        for v in net.outputs
        if v not in node_gates
        and len(plan.sparse_into[v]) == 1
        and not plan.fan_in[v]
        and not plan.fan_out_into[v]
    )
    sparse_const = tensor.zeros(n)
    for v in sparse_outputs:
        sparse_const = sparse_const + 0.5 * y[v].square().sum(-1)
    dense = [y[v] for v in net.outputs if v not in sparse_outputs]
    groups = tuple(
        _group_rows(g, plan, x, y, node_gates, edge_gates, rows, n)
        for g in sparse_groups(plan, sparse_outputs)
    )
    return Data(
        x=x,
        y=y,
        node_gates=node_gates,
        edge_gates=edge_gates,
        w=tensor(w),
        context=torch.as_tensor(context, dtype=torch.int64, device=device),
        context_weight=tensor(within),
        context_empty=tensor(empty),
        labels=labels,
        n=n,
        group_gates=_group_gates(net, plan, edge_gates, n, tensor),
        y_cat=torch.cat([y[v] for v in net.outputs], dim=-1),
        rows=rows,
        plan=plan,
        sparse_outputs=sparse_outputs,
        sparse_const=sparse_const,
        y_dense=torch.cat(dense, dim=-1) if dense else tensor.zeros(n, 0),
        groups=groups,
        states=state_plan(net, ex, w, dtype, device) if states else None,
    )


def _group_rows(
    group: SparseGroup,
    plan: Plan,
    x: Mapping[Hashable, torch.Tensor],
    y: Mapping[Hashable, torch.Tensor],
    node_gates: Mapping[Hashable, torch.Tensor],
    edge_gates: Mapping[int, torch.Tensor],
    rows: Mapping[int, torch.Tensor],
    n: int,
) -> GroupRows:
    """The padded rows, gates and (constant) data of one sparse group, gathered once."""
    edges = group.edges
    device = edge_gates[edges[0]].device
    r = max(1, *(len(rows[i]) for i in edges))
    index = torch.zeros((len(edges), r), dtype=torch.int64, device=device)
    gate = edge_gates[edges[0]].new_zeros((len(edges), r))
    for j, i in enumerate(edges):
        on = rows[i]
        index[j, : len(on)] = on
        gate[j, : len(on)] = edge_gates[i][on]
    flat = index.flatten()
    sources = tuple(dict.fromkeys(plan.edges[i][0] for i in edges))
    targets = tuple(dict.fromkeys(plan.edges[i][1] for i in edges))

    def stacked_index(nodes: tuple[Hashable, ...], end: int) -> torch.Tensor:
        slot = torch.as_tensor(
            [nodes.index(plan.edges[i][end]) for i in edges], dtype=torch.int64, device=device
        )
        return (slot[:, None] * n + index).flatten()

    constant = None
    if all(u in x for u in sources):
        h = [x[u] if u not in node_gates else x[u] * node_gates[u][:, None] for u in sources]
        src = torch.stack(h)[
            torch.as_tensor([sources.index(plan.edges[i][0]) for i in edges], device=device)
        ]
        constant = src[torch.arange(len(edges), device=device)[:, None], index] * gate[..., None]
    y_rows = None
    if not group.into:
        y_rows = torch.stack([y[plan.edges[i][1]][index[j]] for j, i in enumerate(edges)])
        y_rows = y_rows * (gate[..., None] != 0)
    return GroupRows(
        group=group,
        r=r,
        rows=flat,
        gate=None if bool((gate == 1).all()) else gate[..., None],  # 0/1 gates, no padding
        sources=sources,
        source_index=stacked_index(sources, 0),
        constant=constant,
        targets=targets,
        target_index=stacked_index(targets, 1),
        y=y_rows,
    )


def _check_examples(net: Plan, ex: ExampleSet, name: str) -> None:
    """An ExampleSet with at least one example whose data fit the graph's nodes."""
    if not isinstance(ex, ExampleSet):
        raise SimulationSpecError(f"{name}: expected an ExampleSet, got {type(ex).__name__}")
    if len(ex) == 0:
        raise TaskSpecError("expected at least one example, got none", source=name)
    for kind, table, allowed in (
        ("inputs", ex.inputs, net.inputs),
        ("targets", ex.targets, net.outputs),
    ):
        for node, arr in table.items():
            key = f"{kind}[{node!r}]"
            if node not in allowed:
                raise TaskSpecError(
                    f"{node!r} is not an {kind[:-1]} node of the graph; expected one of "
                    f"{list(allowed)}",
                    source=name,
                    key=key,
                )
            if np.shape(arr)[1] != net.sizes[node]:
                raise TaskSpecError(
                    f"expected width |{node}| = {net.sizes[node]}, got shape {np.shape(arr)}",
                    source=name,
                    key=key,
                )
            if not np.all(np.isfinite(arr)):
                raise TaskSpecError("expected finite values", source=name, key=key)


def _column(
    table: Mapping[str, np.ndarray], v: str, n: int, net: Plan, tensor: _Tensors
) -> torch.Tensor:
    """Node ``v``'s data ``(n, |v|)``; zeros where the examples give none."""
    return tensor(table[v]) if v in table else tensor.zeros(n, net.sizes[v])


def _gates(
    net: Plan, ex: ExampleSet, name: str, tensor: _Tensors
) -> tuple[dict[Hashable, torch.Tensor], dict[int, torch.Tensor]]:
    """Node gates by node, edge gates by edge index; each ``(n,)``."""
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
    return node_gates, edge_gates


def _example_weights(ex: ExampleSet, name: str) -> np.ndarray:
    """The weights of Eq. (1), checked to be non-negative and to sum to 1."""
    w = np.asarray(ex.weights, dtype=np.float64)
    if np.any(w < 0) or not np.isclose(w.sum(), 1.0, rtol=1e-9, atol=1e-12):
        raise TaskSpecError(
            f"expected non-negative weights summing to 1, got sum {w.sum()!r}, min {w.min()!r}",
            source=name,
            key="weights",
        )
    return w


def _context_average(
    ex: ExampleSet, w: np.ndarray
) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray]:
    """Context labels, each example's context and weight within it, and ``nan`` (else 0)
    for each context without weight.

    Within a context the examples count by their weights; a context without weight
    averages to ``nan``.
    """
    ctx = np.asarray(ex.context, dtype=np.int64)
    n_ctx = max(int(ctx.max()) + 1, len(ex.context_labels))
    labels = tuple(ex.context_labels) + tuple(str(c) for c in range(len(ex.context_labels), n_ctx))
    mass = np.bincount(ctx, weights=w, minlength=n_ctx)
    within = np.divide(w, mass[ctx], out=np.zeros_like(w), where=mass[ctx] > 0)
    return labels, ctx, within, np.where(mass > 0, 0.0, np.nan)


def _sparse_rows(n: int, edge_gates: Mapping[int, torch.Tensor]) -> dict[int, torch.Tensor]:
    """Edge index -> its active rows, for gated edges on in few of at least 16 examples."""
    rows: dict[int, torch.Tensor] = {}
    if n >= 16:
        for i, gate_values in edge_gates.items():
            on = torch.nonzero(gate_values != 0).flatten()
            if len(on) <= SPARSE_FRACTION * n:
                rows[i] = on
    return rows


def _group_gates(
    net: Plan, plan: Plan, edge_gates: Mapping[int, torch.Tensor], n: int, tensor: _Tensors
) -> dict[tuple[int, ...], torch.Tensor | None]:
    """Fan-out group -> its edges' gates side by side ``(n, sum |t|)``; ``None``: ungated."""
    group_gates: dict[tuple[int, ...], torch.Tensor | None] = {}
    for group in (*net.fan_out.values(), *plan.fan_out.values()):
        if any(i in edge_gates for i in group):
            columns = [
                (edge_gates[i] if i in edge_gates else tensor.ones(n))
                .unsqueeze(-1)
                .expand(n, net.sizes[net.edges[i][1]])
                for i in group
            ]
            group_gates[group] = torch.cat(columns, dim=-1).contiguous()
        else:
            group_gates[group] = None
    return group_gates
