r"""The full matrix flow (Eqs. 3-4 of Saxe et al. 2022) in floats, ready to evaluate.

$$\tau\frac{d}{dt}W_e=\sum_{p\in\mathcal{P}(e)}W_{\bar t(p,e)}^\top\,\mathcal{E}(p)\,
W_{\bar s(p,e)}^\top,\qquad
\mathcal{E}(p)=\Sigma^{yx}(p)-\sum_{j\in\mathcal{T}(t(p))}W_j\,\Sigma^x(j,p).$$

Only active paths and co-active pairs enter (the rest have zero statistics); with
independent random gates the statistics are their expectations, so this is the expected
flow; fixed edges ($W_e = c\,I$) do not move. :class:`FlowPlan` converts the statistics
to floats once and stacks them per output, so that $\sum_j W_j\Sigma^x(j,p)$ for every
path into one output is one matrix product, and walks each path once from its output
back to its input ($O(L)$ products for a path of $L$ edges).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from .._edge import Edge, edge_name
from .._errors import GdlnError, TaskSpecError
from ..paths._paths import Path
from ..paths._statistics import PathStatistics, active_paths
from ..task._problem import Problem
from ..task._task import as_float, unbound_message

__all__ = ["full_flow", "zero_weight_loss"]

MAX_DENSE_COLUMNS = 2048
r"""Largest number of input columns into one output whose $\Sigma^x$ is stored as one matrix."""


@dataclass(frozen=True)
class _Target:
    r"""The paths into one output, with their statistics side by side.

    ``columns[i]`` is the slice of path ``paths[i]``'s input in the stacked
    $[W_{p_1}, W_{p_2}, \dots]$; ``input_output`` is $[\Sigma^{yx}(p_1), \dots]$ and
    ``input`` the block matrix of $\Sigma^x(p_i, p_j)$ (``None`` when too large: then
    ``pairs`` lists the nonzero blocks).
    """

    paths: tuple[int, ...]
    columns: tuple[slice, ...]
    input_output: np.ndarray
    input: np.ndarray | None
    pairs: tuple[tuple[int, int, np.ndarray], ...]


@dataclass(frozen=True)
class FlowPlan:
    r"""The path statistics of a problem as floats, laid out for evaluating Eqs. (3)-(4).

    Attributes
    ----------
    edges
        The edges of the network, in the order of the weights.
    paths
        Per active path: the indices into ``edges`` of its edges, source first.
    targets
        Per output: its paths with their statistics (Eqs. 5-6) as stacked float arrays.
    trained
        Per edge, whether it is trained (fixed edges $W_e = c\,I$ do not move).
    constant
        $\tfrac12\langle\lVert y\rVert^2\rangle$, the loss of zero weights.
    weight_decay
        The weight decay $\gamma$: :meth:`flow` is that of Eq. (1) plus
        $\tfrac\gamma2\sum_e\lVert W_e\rVert_F^2$ over the trained edges.
    """

    edges: tuple[Edge, ...]
    paths: tuple[tuple[int, ...], ...]
    targets: tuple[_Target, ...]
    trained: tuple[bool, ...]
    constant: float
    weight_decay: float = 0.0

    @classmethod
    def of(
        cls,
        problem: Problem,
        edges: Sequence[Edge],
        stats: PathStatistics | None = None,
        *,
        gamma: float = 0.0,
        constant: float | None = None,
    ) -> FlowPlan:
        r"""The plan of ``problem`` for weights on ``edges`` (statistics found if not given;
        ``constant``, the loss of zero weights, found if not given), with weight decay
        $\gamma$."""
        graph = problem.graph
        paths, yx, xx = _float_statistics(problem) if stats is None else _floats_of(stats)
        index = {e: i for i, e in enumerate(edges)}
        missing = [e for p in paths for e in p.edges if e not in index]
        if missing:
            raise GdlnError(f"weights: no weight for edge {edge_name(missing[0])!r}")
        by_target: dict[Hashable, list[int]] = defaultdict(list)
        for i, p in enumerate(paths):
            by_target[p.target].append(i)
        targets = tuple(_target(members, paths, yx, xx) for members in by_target.values())
        return cls(
            edges=tuple(edges),
            paths=tuple(tuple(index[e] for e in p.edges) for p in paths),
            targets=targets,
            trained=tuple(graph.edges[e].get("fixed") is None for e in edges),
            constant=zero_weight_loss(problem) if constant is None else float(constant),
            weight_decay=float(gamma),
        )

    def products(self, weights: Sequence[np.ndarray]) -> list[list[np.ndarray]]:
        r"""Per path, the partial products $W_{e_i}\cdots W_{e_1}$, $i = 1..L$ (the last is $W_p$)."""
        out = []
        for path in self.paths:
            partial = [weights[path[0]]]
            for i in path[1:]:
                partial.append(weights[i] @ partial[-1])
            out.append(partial)
        return out

    def _predicted(self, target: _Target, partial: Sequence[Sequence[np.ndarray]]) -> np.ndarray:
        r"""$[\sum_j W_j\Sigma^x(j, p)]_p$: the stacked predictions of Eq. (4)."""
        stacked = np.hstack([partial[p][-1] for p in target.paths])
        if target.input is not None:
            return stacked @ target.input
        out = np.zeros_like(stacked)
        for a, b, m in target.pairs:
            out[:, target.columns[b]] += partial[target.paths[a]][-1] @ m
        return out

    def flow(self, weights: Sequence[np.ndarray]) -> list[np.ndarray]:
        r"""$\tau\,dW_e/dt$ per edge (Eqs. 3-4), $-\gamma W_e$ with weight decay; zero for
        fixed edges."""
        partial = self.products(weights)
        decay = self.weight_decay
        flow = [
            -decay * w if decay and trained else np.zeros_like(w)
            for w, trained in zip(weights, self.trained, strict=True)
        ]
        for target in self.targets:
            errors = target.input_output - self._predicted(target, partial)
            for p, columns in zip(target.paths, target.columns, strict=True):
                path = self.paths[p]
                G = errors[:, columns]  # E(p); then W_{after}^T E(p), walking back
                for i in range(len(path) - 1, -1, -1):
                    e = path[i]
                    if self.trained[e]:
                        flow[e] += G if i == 0 else G @ partial[p][i - 1].T
                    if i:
                        G = weights[e].T @ G
        return flow

    def loss(self, weights: Sequence[np.ndarray]) -> float:
        r"""Eq. (1) from the statistics (expected over random gates).

        $\tfrac12\langle\lVert y\rVert^2\rangle-\sum_p\mathrm{tr}(W_p\Sigma^{yx}(p)^\top)
        +\tfrac12\sum_{j,p}\mathrm{tr}(W_j\Sigma^x(j,p)W_p^\top)$.
        """
        partial = self.products(weights)
        total = self.constant
        for target in self.targets:
            stacked = np.hstack([partial[p][-1] for p in target.paths])
            predicted = self._predicted(target, partial)
            total += float(np.sum(stacked * (0.5 * predicted - target.input_output)))
        return total


def _target(
    members: Sequence[int],
    paths: Sequence[Path],
    yx: Sequence[np.ndarray],
    xx: Mapping[tuple[int, int], np.ndarray],
) -> _Target:
    """The stacked statistics of the paths ``members`` into one output."""
    widths = [yx[p].shape[1] for p in members]
    starts = np.concatenate([[0], np.cumsum(widths)]).astype(int)
    columns = tuple(slice(int(a), int(b)) for a, b in itertools.pairwise(starts))
    position = {p: i for i, p in enumerate(members)}
    pairs = tuple(
        (position[j], position[p], m) for (j, p), m in xx.items() if j in position and p in position
    )
    dense = None
    if starts[-1] <= MAX_DENSE_COLUMNS:
        dense = np.zeros((starts[-1], starts[-1]))
        for a, b, m in pairs:
            dense[columns[a], columns[b]] = m
    return _Target(
        paths=tuple(members),
        columns=columns,
        input_output=np.hstack([yx[p] for p in members]),
        input=dense,
        pairs=pairs,
    )


Statistics = tuple[tuple[Path, ...], list[np.ndarray], dict[tuple[int, int], np.ndarray]]


def _float_statistics(problem: Problem) -> Statistics:
    r"""Eqs. (5)-(6) in floats: paths, $\Sigma^{yx}(p)$ and $\Sigma^x(j, p)$ by path index.

    The sums of :func:`gdln.paths.path_statistics`, each dataset moment converted to
    floats once, so that exact data cost no symbolic arithmetic.
    """
    graph = problem.graph
    task = problem.require_task()
    active = active_paths(graph, task)
    survival = task.random_gates
    moments: dict[tuple[str, str, str], np.ndarray] = {}

    def moment(dataset: str, a: str, b: str) -> np.ndarray:
        if (dataset, a, b) not in moments:
            moments[(dataset, a, b)] = as_float(task.datasets[dataset].moment(a, b))
        return moments[(dataset, a, b)]

    yx: dict[int, np.ndarray] = {}
    xx: dict[tuple[int, int], np.ndarray] = {}
    for k, (c, found) in enumerate(zip(task.contexts, active.gates, strict=True)):
        by_target: dict[Hashable, list[int]] = defaultdict(list)
        for i in found:
            p = active.paths[i]
            by_target[p.target].append(i)
            if p.target in c.targets:
                w = _number(c.probability * active.gate(k, i).expectation(survival))
                term = w * moment(c.dataset, c.targets[p.target], c.inputs[p.source])
                yx[i] = yx[i] + term if i in yx else term
        for members in by_target.values():
            for j, i in itertools.product(members, repeat=2):
                gate = active.gate(k, j) * active.gate(k, i)
                w = _number(c.probability * gate.expectation(survival))
                term = w * moment(
                    c.dataset, c.inputs[active.paths[j].source], c.inputs[active.paths[i].source]
                )
                xx[(j, i)] = xx[(j, i)] + term if (j, i) in xx else term
    for i, p in enumerate(active.paths):
        if i not in yx:
            yx[i] = np.zeros((graph.nodes[p.target]["size"], graph.nodes[p.source]["size"]))
    return active.paths, [yx[i] for i in range(len(active.paths))], xx


def _floats_of(stats: PathStatistics) -> Statistics:
    """Given path statistics, in the layout of :func:`_float_statistics`."""
    number = {p: i for i, p in enumerate(stats.paths)}
    yx = [as_float(stats.input_output[p]) for p in stats.paths]
    xx = {(number[j], number[p]): as_float(m) for (j, p), m in stats.input.items()}
    return stats.paths, yx, xx


def _number(value: Any) -> float:
    """A probability or gate product as a float; a symbol left in it is refused."""
    if isinstance(value, sp.Basic) and value.free_symbols:
        raise TaskSpecError(unbound_message(value.free_symbols))
    return float(value)


def zero_weight_loss(problem: Problem) -> float:
    r"""$\tfrac12\langle\lVert y\rVert^2\rangle$ over the contexts (the loss of zero weights)."""
    task = problem.require_task()
    total = 0.0
    for c in task.contexts:
        data = task.datasets[c.dataset]
        for f in c.targets.values():
            total += 0.5 * _number(c.probability) * float(np.trace(as_float(data.moment(f, f))))
    return total


def full_flow(
    problem: Problem,
    weights: Mapping[Edge, np.ndarray],
    *,
    stats: PathStatistics | None = None,
    weight_decay: float = 0.0,
) -> dict[Edge, np.ndarray]:
    r"""$\tau\,dW_e/dt$ for every edge, by Eqs. (3)-(4) (equal to $-\partial\mathcal{L}/\partial W_e$).

    Parameters
    ----------
    problem
        The network and its task.
    weights
        Edge -> current weight matrix $W_e$.
    stats
        The problem's path statistics, when already computed (default: compute them).
    weight_decay
        The weight decay $\gamma$: each trained edge's flow gains $-\gamma W_e$.

    Returns
    -------
    dict
        Edge -> $\tau\,dW_e/dt$, the shape of ``weights[e]``; zero for fixed edges.

    Raises
    ------
    GdlnError
        ``weights`` lacks an edge of an active path.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (3)-(4).
    """
    edges = list(weights)
    plan = FlowPlan.of(problem, edges, stats, gamma=weight_decay)
    values = [np.asarray(weights[e], dtype=float) for e in edges]
    return dict(zip(edges, plan.flow(values), strict=True))
