r"""Components and bases of the moment route, found without listing paths.

The symbolic route groups *paths* into components and finds their bases from path
statistics. The moment route must not list paths, so it groups *edges* instead (two
active edges meeting at a node lie on one active path; two edges into one output join
when inputs reaching them are correlated) and takes the bases from the dataset-level
moments $\langle yx^\top\rangle$, $\langle xx^\top\rangle$ (Eqs. 7-8 of Saxe et al. 2022),
which needs every data node of a component to see one dataset field.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from .._edge import Edge
from .._errors import GdlnError
from ..paths._statistics import ContextActivity
from ..task._problem import Problem
from ..task._task import Context, Task, as_float
from ._bases import Modes
from ._fixed import fixed_value, joint_modes_fixed, with_fixed_blocks
from ._modes import MAX_EXACT_DIMS, FieldBindings, Space, blocks_key, dataset_level_blocks

__all__: list[str] = []  # package-internal: components and bases of the moment route


def sources(c: Context, act: ContextActivity, node: Hashable) -> frozenset[Hashable]:
    """The bound inputs of context ``c`` that reach ``node`` through open gates."""
    return frozenset({node}) if node in c.inputs else act.reach.get(node, frozenset())


def edge_components(
    graph: nx.DiGraph, task: Task, activity: Sequence[ContextActivity]
) -> dict[Edge, int]:
    """Groups of edges that share a path or feed one output with correlated inputs.

    The same grouping as the path components of :func:`gdln.paths.active_paths`,
    found from edges: two active edges meeting at a node lie on one active path, and two
    active edges into one output join when inputs reaching them are correlated.
    """
    parent: dict[Edge, Edge] = {}

    def find(e: Edge) -> Edge:
        while parent[e] != e:
            parent[e] = parent[parent[e]]
            e = parent[e]
        return e

    def union(a: Edge, b: Edge) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[rb] = ra

    nonzero: dict[tuple[str, str, str], bool] = {}
    outputs = {v for v in graph.nodes if graph.out_degree(v) == 0}
    for c, act in zip(task.contexts, activity, strict=True):
        into: dict[Hashable, list[Edge]] = defaultdict(list)
        out_of: dict[Hashable, list[Edge]] = defaultdict(list)
        for e in act.edges:
            parent.setdefault(e, e)
            into[e[1]].append(e)
            out_of[e[0]].append(e)
        for v, ins in into.items():
            for e in ins[1:] + out_of.get(v, []):
                if v not in outputs or e in out_of.get(v, []):
                    union(ins[0], e)
        for o in outputs:
            for a, b in itertools.combinations(into.get(o, []), 2):
                if find(a) != find(b) and _correlated(task, c, act, a, b, nonzero):
                    union(a, b)
    roots: dict[Edge, int] = {}
    order = {v: i for i, v in enumerate(nx.topological_sort(graph))}
    out = {}
    for e in sorted(parent, key=lambda e: (order[e[1]], order[e[0]])):
        out[e] = roots.setdefault(find(e), len(roots))
    return out


def _correlated(
    task: Task,
    c: Context,
    act: ContextActivity,
    a: Edge,
    b: Edge,
    nonzero: dict[tuple[str, str, str], bool],
) -> bool:
    """Whether some inputs reaching edges ``a`` and ``b`` have a nonzero moment in ``c``."""
    data = task.datasets[c.dataset]
    for i, j in itertools.product(sources(c, act, a[0]), sources(c, act, b[0])):
        key = (c.dataset, c.inputs[i], c.inputs[j])
        if key not in nonzero:
            nonzero[key] = bool(np.any(as_float(data.moment(key[1], key[2])) != 0))
        if nonzero[key]:
            return True
    return False


def path_free_modes(
    problem: Problem, activity: Sequence[ContextActivity], component: Mapping[Edge, int]
) -> tuple[Space, list[Modes]]:
    """Bases per component from dataset-level blocks and fixed-edge identity blocks."""
    task = problem.require_task()
    graph = problem.graph
    bindings, nodes = _edge_bindings(graph, task, activity, component)
    space: Space = {}
    result: list[Modes] = []
    cache: dict[Any, Modes] = {}
    for k in range(max(component.values()) + 1):
        shared = [v for role, v in nodes[k] if len(bindings.node[(k, role, v)]) > 1]
        if shared:
            raise GdlnError(
                f"{problem.source}: node {shared[0]!r} sees several dataset fields in one group "
                "of coupled edges, so its basis comes from path statistics; the moment route "
                "finds bases without paths only from datasets. Reduce the problem first and "
                "pass the reduction: gdln.expected_dynamics(gdln.reduce(problem))"
            )
        ordered = sorted(nodes[k], key=str)
        spaces, blocks, out_spaces = dataset_level_blocks(graph, task, k, ordered, bindings, space)
        blocks, pairs = with_fixed_blocks(graph, k, space, spaces, blocks)
        exact = task.exact and sum(spaces.values()) <= MAX_EXACT_DIMS
        key = blocks_key(spaces, blocks)
        if key not in cache:
            try:
                cache[key] = joint_modes_fixed(spaces, blocks, frozenset(out_spaces), exact, pairs)
            except GdlnError as err:
                raise type(err)(f"{problem.source}: {err}") from err
        result.append(cache[key])
    return space, result


def _edge_bindings(
    graph: nx.DiGraph,
    task: Task,
    activity: Sequence[ContextActivity],
    component: Mapping[Edge, int],
) -> tuple[FieldBindings, dict[int, set[tuple[str, Hashable]]]]:
    """The fields each data node sees and the field pairs that meet at an output."""
    outputs = {v for v in graph.nodes if graph.out_degree(v) == 0}
    bindings = FieldBindings()
    nodes: dict[int, set[tuple[str, Hashable]]] = defaultdict(set)
    for c, act in zip(task.contexts, activity, strict=True):
        into: dict[tuple[int, Hashable], set[Hashable]] = defaultdict(set)
        for e in act.edges:
            k = component[e]
            if e[0] in c.inputs:
                nodes[k].add(("in", e[0]))
                bindings.node[(k, "in", e[0])].add((c.dataset, c.inputs[e[0]]))
            if e[1] in outputs:
                into[(k, e[1])] |= sources(c, act, e[0])
        for (k, o), found in into.items():
            nodes[k].add(("out", o))
            if o in c.targets:
                bindings.node[(k, "out", o)].add((c.dataset, c.targets[o]))
                for i in found:
                    bindings.yx[k].add((c.dataset, c.targets[o], c.inputs[i]))
            for i, j in itertools.product(found, repeat=2):
                bindings.xx[k].add((c.dataset, c.inputs[i], c.inputs[j]))
    return bindings, nodes


@dataclass(frozen=True)
class EdgeTable:
    """The rows of the edge-value table: every edge of a component, fixed ones included.

    Attributes
    ----------
    edges
        One row per edge, ordered by target then source in topological order.
    alive
        ``(rows, modes)``: whether both ends of the edge carry the mode.
    fixed
        ``(rows, modes)``: $c_e$ of fixed edges where alive, 0 elsewhere.
    trained
        The trained edges, and ``trained_row`` their rows.
    """

    edges: tuple[Edge, ...]
    alive: np.ndarray
    fixed: np.ndarray
    trained: tuple[Edge, ...]
    trained_row: np.ndarray


def edge_table(
    graph: nx.DiGraph,
    component: Mapping[Edge, int],
    space: Mapping[tuple[int, Hashable], Hashable],
    modes: Sequence[Modes],
    n_modes: int,
) -> EdgeTable:
    """Which edge carries which mode, and the values of the fixed ones."""
    data_nodes = {v for v in graph.nodes if graph.in_degree(v) == 0 or graph.out_degree(v) == 0}

    def node_alive(k: int, v: Hashable) -> np.ndarray:
        if v not in data_nodes:
            return np.arange(n_modes) < graph.nodes[v]["size"]
        if (k, v) not in space:
            return np.zeros(n_modes, dtype=bool)
        label = space[(k, v)]
        return np.array(
            [a < len(modes[k]) and label in modes[k].vectors[a] for a in range(n_modes)]
        )

    order = {v: i for i, v in enumerate(nx.topological_sort(graph))}
    edges = tuple(sorted(component, key=lambda e: (order[e[1]], order[e[0]])))
    alive = np.array(
        [node_alive(component[e], e[0]) & node_alive(component[e], e[1]) for e in edges]
    ).reshape(len(edges), n_modes)
    fixed = np.zeros((len(edges), n_modes))
    for i, e in enumerate(edges):
        c = fixed_value(graph, e)
        if c is not None:
            fixed[i] = float(c) * alive[i]
    trained = tuple(e for e in edges if fixed_value(graph, e) is None)
    row = {e: i for i, e in enumerate(edges)}
    trained_row = np.array([row[e] for e in trained], dtype=np.int64)
    return EdgeTable(edges, alive, fixed, trained, trained_row)
