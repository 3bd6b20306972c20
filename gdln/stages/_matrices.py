r"""Full matrices for the asymptotic route: the network, its residuals, its plateaus.

The asymptotic route (:mod:`gdln.stages._asymptotic`) keeps a full weight matrix on every
edge. :class:`MatrixNetwork` holds them with the path statistics in floats and computes
the residual correlation $R_p = \Sigma^{yx}(p) - \sum_j W_j\Sigma^x(j,p)$ of each path
and the loss (Eqs. 1, 3-4 of Saxe et al. 2022); :func:`settle_active` runs the flow of
Eqs. (3)-(4) of the active edges to rest.

The settling flow keeps each node's directions in a subspace (below), so it is integrated
in those coordinates: a hidden layer of 100 units that the active edges use in two
directions is two numbers wide there, and the Jacobian of the Newton steps that end the settling
(:func:`~gdln.stages._flow.settle`) stays small.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from .._edge import Edge
from .._errors import TaskSpecError
from ..paths._paths import Path
from ..paths._statistics import PathStatistics, path_statistics
from ..solution._flow import FlowPlan
from ..task._problem import Problem
from ..task._task import as_float
from ._flow import Unsettled, settle

__all__ = ["MatrixNetwork", "settle_active"]

SPAN = 1e-9  # singular values below this fraction of the largest span no direction
STIFF = 200  # LSODA (a finite-difference Jacobian when stiff) up to this many numbers
BUDGET = 5000
"""The most evaluations of the flow that one plateau may take to come to rest."""


class MatrixNetwork:
    """Full matrices on every edge, the statistics, and the bookkeeping of the route."""

    def __init__(self, problem: Problem):
        self.problem = problem
        graph = problem.graph
        exact = path_statistics(graph, problem.require_task())
        self.paths: tuple[Path, ...] = exact.paths
        self.size = {v: int(graph.nodes[v]["size"]) for v in graph.nodes}
        try:
            self.syx = {p: as_float(exact.input_output[p]) for p in self.paths}
            self.sx = {k: as_float(m) for k, m in exact.input.items()}
        except TaskSpecError as err:
            raise TaskSpecError(str(err), source=problem.source) from err
        on_paths = {e for p in self.paths for e in p.edges}
        self.fixed = {e for e in on_paths if graph.edges[e].get("fixed") is not None}
        self.edges: list[Edge] = [e for e in graph.edges if e in on_paths and e not in self.fixed]
        self.W: dict[Edge, np.ndarray] = {}
        for e in graph.edges:
            rows, cols = self.size[e[1]], self.size[e[0]]
            fixed = graph.edges[e].get("fixed")
            self.W[e] = float(fixed) * np.eye(rows) if fixed is not None else np.zeros((rows, cols))
        # the flow of Eqs. (3)-(4) laid out once: each call converts nothing
        self.plan = FlowPlan.of(
            problem, list(graph.edges), PathStatistics(self.paths, self.syx, self.sx, exact=False)
        )
        self.constant = self.plan.constant
        self.reference: dict[Path, Any] = {}  # each path's first rank-one form
        # the size of a rate: the largest input-output correlation
        self.scale = max((float(np.linalg.norm(m, 2)) for m in self.syx.values()), default=0.0)

    def product(self, edges: Sequence[Edge], start: Hashable) -> np.ndarray:
        """The ordered product of ``edges`` (target on the left); identity if empty."""
        out = np.eye(self.size[start])
        for e in edges:
            out = self.W[e] @ out
        return out

    def residual(self, p: Path) -> np.ndarray:
        """$R_p$ at the current weights (Eqs. 3-4)."""
        R = self.syx[p].copy()
        for j in self.paths:
            if (j, p) in self.sx and j.target == p.target:
                R -= self.product(j.edges, j.source) @ self.sx[(j, p)]
        return R

    def loss(self) -> float:
        """Eq. (1) from the path statistics at the current weights."""
        Wp = {p: self.product(p.edges, p.source) for p in self.paths}
        total = self.constant - sum(float(np.sum(Wp[p] * self.syx[p])) for p in self.paths)
        for (j, p), m in self.sx.items():
            total += 0.5 * float(np.sum((Wp[j] @ m) * Wp[p]))
        return total

    def used(self, node: Hashable) -> np.ndarray:
        """An orthonormal basis of the directions the active edges use at ``node``."""
        graph = self.problem.graph
        blocks = [self.W[(u, node)] for u in graph.predecessors(node)]
        blocks += [self.W[(node, w)].T for w in graph.successors(node)]
        stacked = np.hstack(blocks) if blocks else np.zeros((self.size[node], 0))
        if not stacked.size:
            return np.zeros((self.size[node], 0))
        U, s, _ = np.linalg.svd(stacked, full_matrices=False)
        return U[:, s > 1e-9 * max(float(s.max(initial=0.0)), 1e-300)]

    def fresh(self, node: Hashable) -> np.ndarray:
        """A unit direction at ``node`` that no active edge uses (the first one free)."""
        U = self.used(node)
        basis = np.eye(self.size[node])
        rest = basis - U @ (U.T @ basis)
        k = int(np.argmax(np.linalg.norm(rest, axis=0)))
        if np.linalg.norm(rest[:, k]) < 1e-9:
            return U[:, 0]
        return rest[:, k] / np.linalg.norm(rest[:, k])

    def data_directions(self, node: Hashable) -> np.ndarray:
        r"""The directions at ``node`` that the statistics reach (columns, maybe dependent).

        For a path's input: the rows of $\Sigma^{yx}(p)$ and of $\Sigma^x(j, p)$; for its
        output: the columns of $\Sigma^{yx}(p)$. Empty at a hidden node.
        """
        blocks = [np.zeros((self.size[node], 0))]
        for p in self.paths:
            if p.source == node:
                blocks.append(self.syx[p].T)
                blocks += [m.T for (j, q), m in self.sx.items() if q == p]
            if p.target == node:
                blocks.append(self.syx[p])
        return np.hstack(blocks)


def _basis(vectors: np.ndarray, size: int) -> np.ndarray:
    """An orthonormal basis of the span of the columns of ``vectors``."""
    if not vectors.size:
        return np.zeros((size, 0))
    U, s, _ = np.linalg.svd(vectors, full_matrices=False)
    return U[:, s > SPAN * max(float(s.max(initial=0.0)), 1e-300)]


def invariant_bases(net: MatrixNetwork, edges: Sequence[Edge]) -> dict[Hashable, np.ndarray]:
    r"""Per node of ``edges``, an orthonormal basis $Q_v$ of a subspace the flow keeps.

    With the other edges at zero, $\dot W_{(u,v)} = \sum_p W_{\text{after}}^\top
    \mathcal{E}(p)\,W_{\text{before}}^\top$ (Eqs. 3-4): at a hidden node its new
    columns (rows) lie in the directions the edges there already use; at an input, in
    the row spaces of $\Sigma^{yx}(p)$ and $\Sigma^x(j,p)$; at an output, in the column
    spaces of $\Sigma^{yx}(p)$ and of the active maps. A node on a fixed edge
    ($W = c\,I$ ties its directions to its neighbour's) keeps the identity.
    """
    graph = net.problem.graph
    out: dict[Hashable, np.ndarray] = {}
    for v in {u for e in edges for u in e}:
        touching = [*graph.in_edges(v), *graph.out_edges(v)]
        if any(e in net.fixed or graph.edges[e].get("fixed") is not None for e in touching):
            out[v] = np.eye(net.size[v])
            continue
        blocks = [net.W[(u, v)] for u in graph.predecessors(v)]
        blocks += [net.W[(v, w)].T for w in graph.successors(v)]
        out[v] = _basis(np.hstack([*blocks, net.data_directions(v)]), net.size[v])
    return out


def settle_active(net: MatrixNetwork, active: np.ndarray) -> None:
    r"""Run the full-matrix flow of the active edges (others held at zero) to rest.

    Integrated in the coordinates $W'_e = Q_v^\top W_e Q_u$ of :func:`invariant_bases`,
    where it is the same flow (exactly: $W_e = Q_v W'_e Q_u^\top$ all along), with only the
    paths whose edges are all active.

    Raises
    ------
    Unsettled
        If the flow is still moving after :data:`BUDGET` evaluations; the weights are
        left where it stopped.
    """
    edges = [e for i, e in enumerate(net.edges) if active[i]]
    Q = invariant_bases(net, edges)
    shapes = [(Q[e[1]].shape[1], Q[e[0]].shape[1]) for e in edges]
    splits = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]
    order = list(net.problem.graph.edges)

    def unpack(y: np.ndarray) -> None:
        for e, s, part in zip(edges, shapes, np.split(y, splits), strict=True):
            net.W[e] = Q[e[1]] @ part.reshape(s) @ Q[e[0]].T

    def flow(y: np.ndarray) -> np.ndarray:
        unpack(y)
        f = plan.flow([net.W[e] for e in used])
        return np.concatenate(
            [(Q[e[1]].T @ f[i] @ Q[e[0]]).ravel() for e, i in zip(edges, where, strict=True)]
        )

    # only the paths whose edges are all active move them (any other product is zero)
    live = [p for p in net.paths if all(e in net.fixed or e in set(edges) for e in p.edges)]
    stats = PathStatistics(
        tuple(live),
        {p: net.syx[p] for p in live},
        {(j, p): m for (j, p), m in net.sx.items() if j in live and p in live},
        exact=False,
    )
    used = sorted({e for p in live for e in p.edges}, key=order.index)
    plan = FlowPlan.of(net.problem, used, stats, constant=net.constant)
    where = [used.index(e) for e in edges]
    start = np.concatenate([(Q[e[1]].T @ net.W[e] @ Q[e[0]]).ravel() for e in edges])
    try:
        rest = settle(
            flow,
            start,
            what=f"{net.problem.source}: plateau",
            method="LSODA" if len(start) <= STIFF else "DOP853",
            budget=BUDGET,
        )
    except Unsettled as err:
        unpack(err.state)
        raise
    unpack(rest)
