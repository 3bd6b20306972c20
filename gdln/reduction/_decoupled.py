r"""Decoupled weights $W_e = R_{t(e)}B_eR_{s(e)}^\top$ (Eq. 9 of Saxe et al. 2022).

A data node's basis $R_v$ holds the mode vectors of its space; a hidden node's is a
random orthogonal matrix (column $\alpha$ carries mode $\alpha$), shared by all nodes that
fixed edges join, so that a fixed edge $W_e = c\,I$ is diagonal in every mode. When such
a class holds a data node, that node's basis is imposed on the whole class (the *anchor*).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import networkx as nx
import numpy as np

from .._edge import Edge
from .._runtime._blas import blas_threads
from ..task._problem import Problem
from ._bases import Modes
from ._fixed import fixed_classes

__all__: list[str] = []  # package-internal: Eq. (9) for Reduction and ExpectedDynamics


def mode_vectors_at_ends(
    graph: nx.DiGraph,
    edge: Edge,
    slots: Sequence[int],
    modes: Modes,
    space: Mapping[Hashable, Hashable],
    hidden: Mapping[Hashable, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    r"""Columns $r^\alpha_{t(e)}$ and $r^\alpha_{s(e)}$, $\alpha$ in ``slots`` (Eq. 9).

    A hidden node takes its basis from ``hidden``; a data node the mode vectors of its
    space (``space``: node -> space label in this component).
    """
    cols = []
    for node in (edge[1], edge[0]):
        if node in hidden:
            cols.append(hidden[node][:, list(slots)])
        elif slots:
            cols.append(np.column_stack([modes.vectors[a][space[node]] for a in slots]))
        else:
            cols.append(np.zeros((graph.nodes[node]["size"], 0)))
    return cols[0], cols[1]


def hidden_bases(
    graph: nx.DiGraph, seed: int, anchors: Mapping[int, np.ndarray] | None = None
) -> dict[Hashable, np.ndarray]:
    """Random orthogonal $R_v$ per hidden node; nodes joined by fixed edges share one.

    ``anchors``: fixed class index -> the basis its data nodes impose (column = slot).
    """
    rng = np.random.default_rng(seed)
    out = {}
    for v in nx.topological_sort(graph):
        if graph.in_degree(v) and graph.out_degree(v):
            n = graph.nodes[v]["size"]
            with blas_threads(n):
                q, r = np.linalg.qr(rng.standard_normal((n, n)))
            out[v] = q * np.sign(np.diag(r))
    for index, members in enumerate(fixed_classes(graph)):
        hidden = [v for v in members if v in out]
        if hidden:
            shared = anchors[index] if anchors and index in anchors else out[hidden[0]]
            for v in hidden:
                out[v] = shared
    return out


def anchor_bases(
    graph: nx.DiGraph, space: Mapping[tuple[int, Hashable], Hashable], modes: Sequence[Modes]
) -> dict[int, np.ndarray]:
    """Per fixed class holding a data node: the basis it imposes, column ``a`` = slot ``a``."""
    out = {}
    for index, members in enumerate(fixed_classes(graph)):
        found = [(k, space[(k, v)]) for k in range(len(modes)) for v in members if (k, v) in space]
        if not found:
            continue
        k, label = found[0]
        n = modes[k].spaces[label]
        columns: list[np.ndarray | None] = [None] * n
        spare = []
        for alpha, mode in enumerate(modes[k].vectors):
            if label in mode:
                if alpha < n:
                    columns[alpha] = mode[label]
                else:
                    spare.append(mode[label])
        rest = modes[k].complement.get(label, np.zeros((n, 0)))
        spare += [rest[:, j] for j in range(rest.shape[1])]
        out[index] = np.column_stack([c if c is not None else spare.pop(0) for c in columns])
    return out


class DecoupledBases:
    """The bases of Eq. (9) for a result that holds modes per component of coupled edges.

    Mixed into :class:`~gdln.Reduction` and :class:`~gdln.ExpectedDynamics`, which supply
    the attributes below; hidden-node bases are drawn once per seed and kept.
    """

    problem: Problem
    modes: tuple[Modes, ...]
    _space: Mapping[tuple[int, Hashable], Hashable]
    _edge_component: Mapping[Edge, int]
    _anchors: Mapping[int, np.ndarray]
    _hidden: dict[int, dict[Hashable, np.ndarray]]

    def _hidden_bases(self, seed: int) -> dict[Hashable, np.ndarray]:
        """The random hidden-node bases $R_v$ of ``seed``, drawn once per seed."""
        if seed not in self._hidden:
            self._hidden[seed] = hidden_bases(self.problem.graph, seed, self._anchors)
        return self._hidden[seed]

    def _mode_vectors(
        self, edge: Edge, slots: Sequence[int], seed: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """:func:`mode_vectors_at_ends` of ``edge`` in its component, for modes ``slots``."""
        k = self._edge_component[edge]
        space = {node: label for (j, node), label in self._space.items() if j == k}
        graph = self.problem.graph
        return mode_vectors_at_ends(
            graph, edge, slots, self.modes[k], space, self._hidden_bases(seed)
        )
