r"""The architecture graph as a computation plan for torch.

A plan fixes the order in which the forward pass visits nodes and edges and groups edges
whose products can share one matrix multiplication; it changes the cost of the pass,
never the sum $h_v = g_v \sum_{q:\,t(q)=v} g_q W_q h_{s(q)}$ it computes (Sec. 2 of
Saxe et al. 2022).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import networkx as nx
import numpy as np

from .._edge import Edge
from ._errors import SimulationSpecError

__all__ = [
    "SPARSE_FRACTION",
    "Plan",
    "SparseGroup",
    "compile_plan",
    "edge_order",
    "fixed_edges",
    "node_sizes",
    "relu_nodes",
    "sparse_groups",
]


def edge_order(graph: nx.DiGraph) -> list[Edge]:
    """The edges sorted by (target, source) in topological order: the order of the weights."""
    order = {node: i for i, node in enumerate(nx.topological_sort(graph))}
    return sorted(graph.edges, key=lambda e: (order[e[1]], order[e[0]]))


def node_sizes(graph: nx.DiGraph) -> dict[Hashable, int]:
    """Node -> its width ``|v|`` (node attribute ``size``), once the graph is checked a DAG."""
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
class Plan:
    r"""The graph as a computation plan.

    ``fan_out[s]``: out-edges of ``s`` whose targets have no other in-edge, when there are
    at least two; they share one matmul $h_s [W_1^\top \cdots W_k^\top]$. ``fan_in[v]``: the
    other in-edges of ``v``; they share one matmul $[g_1 h_{s_1} \cdots g_k h_{s_k}]
    [W_1 \cdots W_k]^\top$. Both are the same sum $\sum_q g_q W_q h_{s(q)}$, fewer ops.
    ``sparse``: gated edges switched on for few examples, computed on those rows only.
    ``relu``: the hidden nodes whose ``activation`` is ``relu``; each holds
    $h_v = \max(0, g_v\sum_q g_q W_q h_{s(q)})$ unit by unit (empty: a linear network,
    whose passes are unchanged).
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
    relu: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.outputs:
            raise SimulationSpecError("graph: expected at least one output node, found none")


def compile_plan(graph: nx.DiGraph, sparse: frozenset[int] = frozenset()) -> Plan:
    """The plan of ``graph``; the edges indexed in ``sparse`` are computed on their rows only."""
    sizes = node_sizes(graph)
    order = tuple(nx.topological_sort(graph))
    edges = tuple(edge_order(graph))
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
    return Plan(
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
        relu_nodes(graph),
    )


def relu_nodes(graph: nx.DiGraph) -> frozenset[str]:
    """The nodes of ``graph`` whose ``activation`` attribute is ``relu``: hidden nodes
    (a node with edges in and out); an input or output is refused."""
    found = frozenset(v for v, a in graph.nodes(data="activation") if a == "relu")
    for v in found:
        if not graph.in_degree(v) or not graph.out_degree(v):
            raise SimulationSpecError(
                f"graph: node {v!r} has activation relu, which is for hidden nodes (a node "
                "with edges in and out)"
            )
    for v, a in graph.nodes(data="activation"):
        if a not in (None, "linear", "relu"):
            raise SimulationSpecError(
                f"graph: node {v!r} attribute 'activation': expected linear or relu, got {a!r}"
            )
    return found


SPARSE_FRACTION = 1 / 4
"""A gated edge on for at most this fraction of (at least 16) examples is computed on
those rows only, in the full-batch passes of :func:`~gdln.simulation._forward.forward`
(minibatch SGD's recorded passes, evaluation examples; full-batch GD runs on the
examples' states instead, ``_states.py``): the routing network of Fig. 4 with M domains then
costs O(n) instead of O(M n) per gated layer. The sum computed is the same. Since the
gated edges of one shape became one batched product, this is faster than the grouped
dense products from M = 4 on (routing, 1 thread, float64: M=7 hidden 64, 1.14 -> 0.89 ms
a step for one seed and 3.19 -> 2.55 ms for eight; at M = 4 up to 10% faster). At M = 3
the two are within 6%, and the dense products stay above 1/4 (section 2c of
``benchmarks/bench_simulate.py``)."""


def fixed_edges(net: Plan) -> dict[int, float]:
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


@dataclass(frozen=True)
class SparseGroup:
    r"""Sparsely gated edges of one shape that one batched product computes.

    ``into``: the edges into the hidden (or dense output) node ``node``, from sources of
    one width; their sum $\sum_q g_q W_q h_{s(q)}$ is one batched matmul on each edge's
    active rows and one scatter into $h_v$. Otherwise (``into`` false) the edges out of
    ``node`` into outputs that they alone feed, whose share of Eq. (1) of Saxe et al.
    2022 is taken on the active rows directly.
    """

    edges: tuple[int, ...]
    node: Hashable
    into: bool


def sparse_groups(plan: Plan, sparse_outputs: tuple[str, ...]) -> tuple[SparseGroup, ...]:
    """The sparse edges of ``plan`` in groups of one shape, each computed at once.

    An edge into a sparse output joins the group of its source (and its shape); any
    other sparse edge joins the group of its target (and its shape).
    """
    keyed: dict[tuple[Hashable, bool, int, int], list[int]] = {}
    for v in plan.order:
        for i in plan.sparse_into[v]:
            u = plan.edges[i][0]
            into = v not in sparse_outputs
            key = (v if into else u, into, plan.sizes[v], plan.sizes[u])
            keyed.setdefault(key, []).append(i)
    return tuple(SparseGroup(tuple(g), key[0], key[1]) for key, g in keyed.items())
