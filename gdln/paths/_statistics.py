r"""Path statistics: the only data the learning dynamics see (Eqs. 5-6).

$$\Sigma^{yx}(p)=\langle g_p\,y_{t(p)}x_{s(p)}^\top\rangle,\qquad
\Sigma^{x}(j,p)=\langle g_j\,x_{s(j)}x_{s(p)}^\top g_p\rangle$$

with $g_p$ the product of the edge gates and the node gates (except the input node's)
along $p$. Averages run over contexts by probability and over each context's dataset.
Values are exact sympy matrices when the data are exact, float arrays otherwise.

Only paths that some context switches on with data at their source are kept ("active"),
and only pairs $(j, p)$ with the same target that are ever on together are formed, so the
cost grows with co-active pairs rather than with the square of the number of paths.

With independent random gates (:attr:`gdln.Task.random_gates`) a path's gate is
$g_p = g^c_p\prod_{i\in R(p)}\delta_i$, with $R(p)$ the random items on $p$. Since the
$\delta_i\sim\mathrm{Bernoulli}(p_i)$ are independent and $\delta^2=\delta$,
$\mathbb E[g_p] = g^c_p\prod_{R(p)}p_i$ and
$\mathbb E[g_jg_p] = g^c_jg^c_p\prod_{R(j)\cup R(p)}p_i$ (:class:`GateProduct`), and these
replace $g_p$ and $g_jg_p$ in Eqs. (5)-(6).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import sympy as sp

from .._errors import TaskSpecError
from ..task._problem import require_linear
from ..task._task import Task, as_float, is_symbolic
from ._paths import Path

__all__ = ["GateProduct", "PathStatistics", "path_statistics"]


@dataclass(frozen=True)
class GateProduct:
    r"""A product of gates: a deterministic coefficient times independent random gates.

    $g = c\prod_{i\in R}\delta_i$ with $\delta_i\sim\mathrm{Bernoulli}(p_i)$. Products
    multiply the coefficients and take the *union* of the random items ($\delta^2=\delta$),
    so $\mathbb E[g_jg_p]$ is ``(g_j * g_p).expectation(p)``.

    Parameters
    ----------
    coefficient
        The deterministic part $c$ (a number or sympy expression).
    random
        The random items $R$: each a Bernoulli gate, independent of the others.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (5)-(6): the path statistics average over the
    gates; Hayou & Ayed, "Regularization in ResNet with Stochastic Depth": Bernoulli
    gates as stochastic depth.

    Examples
    --------
    >>> g = GateProduct(2, frozenset({"a"})) * GateProduct(3, frozenset({"a", "b"}))
    >>> g.expectation({"a": 0.5, "b": 0.25})
    0.75
    """

    coefficient: Any
    random: frozenset[Hashable] = frozenset()

    def __mul__(self, other: GateProduct) -> GateProduct:
        return GateProduct(self.coefficient * other.coefficient, self.random | other.random)

    def expectation(self, survival: Mapping[Hashable, Any]) -> Any:
        r"""The expectation $c\prod_{i\in R}p_i$ over independent random gates.

        Parameters
        ----------
        survival
            Random gate -> its probability $p_i$ of being on.

        Returns
        -------
        Any
            A number, or an expression when a probability is symbolic.
        """
        value = self.coefficient
        for item in sorted(self.random, key=str):
            value = value * survival[item]
        return value


@dataclass(frozen=True)
class ActivePaths:
    """Which paths each context switches on, and how the paths couple.

    Attributes
    ----------
    paths
        Active paths, in order of first appearance.
    gates
        Per context: path index -> $g^c_p$ (nonzero), the deterministic part of the gate.
    random
        Per path: the random items on it, $R(p)$ (empty without random gates).
    components
        Groups of path indices that share an edge or are co-active into the same output
        with a nonzero input correlation. Different components may use different bases.
    """

    paths: tuple[Path, ...]
    gates: tuple[Mapping[int, Any], ...]
    components: tuple[tuple[int, ...], ...]
    random: tuple[frozenset[Hashable], ...] = ()

    def gate(self, context: int, path: int) -> GateProduct:
        """The gate of a path in a context, as a :class:`GateProduct`."""
        random = self.random[path] if self.random else frozenset()
        return GateProduct(self.gates[context][path], random)

    def component_of(self) -> dict[int, int]:
        return {p: k for k, members in enumerate(self.components) for p in members}


class Successors:
    """Each node's out-edges, split so that a context's open ones are found from its gates.

    Ungated out-edges are always candidates; a gated one only when the context gives it a
    nonzero gate, so a node with $M$ gated out-edges of which a context opens one costs
    $O(1)$ per context, not $O(M)$. Candidates keep the graph's out-edge order.
    """

    def __init__(self, graph: nx.DiGraph):
        self.gated: set[tuple[Hashable, Hashable]] = set()
        self.ungated: dict[Hashable, list[Hashable]] = {v: [] for v in graph.nodes}
        self.position: dict[tuple[Hashable, Hashable], int] = {}
        self.sinks = {v for v in graph.nodes if graph.out_degree(v) == 0}
        for v in graph.nodes:
            for k, (_, w, g) in enumerate(graph.out_edges(v, data="gated")):
                self.position[(v, w)] = k
                if g:
                    self.gated.add((v, w))
                else:
                    self.ungated[v].append(w)

    def opened(self, gates: Mapping[Hashable, Any]) -> dict[Hashable, list[Hashable]]:
        """Node -> its successors through ungated or open gated edges, for one context."""
        extra: dict[Hashable, list[Hashable]] = defaultdict(list)
        for item, value in gates.items():
            if item in self.gated and value != 0:
                extra[item[0]].append(item[1])  # type: ignore[index]
        out: dict[Hashable, list[Hashable]] = {}
        for v, ws in extra.items():
            rank = {w: self.position[(v, w)] for w in (*self.ungated[v], *ws)}
            out[v] = sorted(rank, key=rank.__getitem__)
        return out

    def of(self, v: Hashable, opened: Mapping[Hashable, list[Hashable]]) -> list[Hashable]:
        """The candidate successors of ``v`` in a context (from :meth:`opened`)."""
        return opened.get(v, self.ungated[v])


def active_paths(graph: nx.DiGraph, task: Task) -> ActivePaths:
    """Enumerate, per context, the paths it switches on (see :class:`ActivePaths`).

    Only each context's open gated edges are walked (:class:`Successors`).
    """
    require_linear(graph)
    index: dict[tuple[Hashable, ...], int] = {}
    paths: list[Path] = []
    per_context: list[dict[int, Any]] = []
    node_gated = {v: bool(g) for v, g in graph.nodes(data="gated")}
    succ = Successors(graph)
    for c in task.contexts:
        found: dict[int, Any] = {}
        gates = c.gates
        opened = succ.opened(gates)
        for start in c.inputs:
            stack: list[tuple[tuple[Hashable, ...], Any]] = [((start,), 1)]
            while stack:
                nodes, g = stack.pop()
                last = nodes[-1]
                if last in succ.sinks:
                    key = nodes
                    if key not in index:
                        index[key] = len(paths)
                        paths.append(Path(nodes))
                    found[index[key]] = g
                    continue
                for w in succ.of(last, opened):
                    value = g
                    if (last, w) in succ.gated:
                        value = value * gates[(last, w)]
                    if node_gated[w]:
                        value = value * gates.get(w, 0)
                    if value != 0:
                        stack.append(((*nodes, w), value))
        per_context.append(found)
    components = _components(graph, task, paths, per_context)
    random = tuple(random_items(p, task.random_gates) for p in paths)
    return ActivePaths(
        paths=tuple(paths), gates=tuple(per_context), components=components, random=random
    )


def random_items(path: Path, random_gates: Mapping[Hashable, Any]) -> frozenset[Hashable]:
    """$R(p)$: the random items (edges, and nodes after the source) on a path."""
    if not random_gates:
        return frozenset()
    items: list[Hashable] = [e for e in path.edges if e in random_gates]
    items += [v for v in path.nodes[1:] if v in random_gates]
    return frozenset(items)


def _components(
    graph: nx.DiGraph, task: Task, paths: list[Path], per_context: list[dict[int, Any]]
) -> tuple[tuple[int, ...], ...]:
    parent = list(range(len(paths)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)

    first_on_edge: dict[tuple[Hashable, Hashable], int] = {}
    for i, p in enumerate(paths):
        for e in p.edges:
            if e in first_on_edge:
                union(i, first_on_edge[e])
            else:
                first_on_edge[e] = i
    nonzero: dict[tuple[str, str, str], bool] = {}
    for c, found in zip(task.contexts, per_context, strict=True):
        by_target: dict[Hashable, list[int]] = defaultdict(list)
        for i in found:
            by_target[paths[i].target].append(i)
        data = task.datasets[c.dataset]
        for members in by_target.values():
            for a in range(len(members)):
                for b in range(a + 1, len(members)):
                    i, j = members[a], members[b]
                    if find(i) == find(j):
                        continue
                    key = (c.dataset, c.inputs[paths[i].source], c.inputs[paths[j].source])
                    if key not in nonzero:
                        nonzero[key] = _nonzero(data.moment(key[1], key[2]))
                    if nonzero[key]:
                        union(i, j)
    groups: dict[int, list[int]] = defaultdict(list)
    for i in range(len(paths)):
        groups[find(i)].append(i)
    return tuple(tuple(g) for g in groups.values())


@dataclass(frozen=True)
class PathStatistics:
    r"""$\Sigma^{yx}(p)$ for every active path and $\Sigma^x(j,p)$ for co-active pairs.

    Parameters
    ----------
    paths
        The active paths.
    input_output
        Path -> $\Sigma^{yx}(p)$, shape $|t(p)|\times|s(p)|$ (Eq. 5).
    input
        ``(j, p)`` -> $\Sigma^x(j,p)$, shape $|s(j)|\times|s(p)|$, for pairs with
        $t(j)=t(p)$ that are ever on together (Eq. 6); absent pairs are zero.
    exact
        Whether values are exact sympy matrices (else float arrays).

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (5)-(6).
    """

    paths: tuple[Path, ...]
    input_output: Mapping[Path, Any]
    input: Mapping[tuple[Path, Path], Any]
    exact: bool

    def __repr__(self) -> str:
        kind = "exact" if self.exact else "float"
        return f"PathStatistics(<{len(self.paths)} paths, {len(self.input)} pairs>, {kind})"

    def _repr_latex_(self) -> str:
        """Eqs. (5)-(6) as display math, for Jupyter (``paths._latex.statistics_latex``)."""
        from ._latex import statistics_latex

        return statistics_latex(self)

    def input_output_correlation(self, path: Path) -> Any:
        r"""$\Sigma^{yx}(p)$ (Eq. 5).

        Parameters
        ----------
        path
            An active path.

        Returns
        -------
        Any
            ``(|t(p)|, |s(p)|)``, exact (sympy) or float.
        """
        return self.input_output[path]

    def input_correlation(self, j: Path, p: Path) -> Any:
        r"""$\Sigma^{x}(j, p)$ (Eq. 6); zero for pairs never on together.

        Parameters
        ----------
        j, p
            Two active paths.

        Returns
        -------
        Any
            ``(|s(j)|, |s(p)|)``, exact (sympy) or float.
        """
        if (j, p) in self.input:
            return self.input[(j, p)]
        shape = (self._size(j), self._size(p))
        return sp.zeros(*shape) if self.exact else np.zeros(shape)

    def _size(self, path: Path) -> int:
        for (a, b), value in self.input.items():
            if a == path:
                return int(value.shape[0])
            if b == path:
                return int(value.shape[1])
        return int(self.input_output[path].shape[1])


def path_statistics(
    graph: nx.DiGraph, task: Task, active: ActivePaths | None = None
) -> PathStatistics:
    r"""Compute Eqs. (5)-(6) for every active path and co-active pair.

    Parameters
    ----------
    graph
        The architecture.
    task
        The task: contexts with their probabilities, gates and datasets, and the
        survival probabilities of random gates.
    active
        The active paths of ``task`` on ``graph``, if already enumerated (default: found
        here).

    Returns
    -------
    PathStatistics
        $\Sigma^{yx}(p)$ for every active path (zero where no context trains its
        target) and $\Sigma^x(j, p)$ for every pair on together into the same output;
        exact if the task's data are.

    Raises
    ------
    TaskSpecError
        A probability or gate is symbolic while the data are floats.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (5)
    $\Sigma^{yx}(p) = \langle g_p\, y_{t(p)} x_{s(p)}^\top\rangle$ and Eq. (6)
    $\Sigma^x(j, p) = \langle g_j g_p\, x_{s(j)} x_{s(p)}^\top\rangle$.
    """
    require_numbers_for_float_data(task)
    active = active or active_paths(graph, task)
    paths = active.paths
    exact = task.exact
    survival = task.random_gates
    yx: dict[int, Any] = {}
    xx: dict[tuple[int, int], Any] = {}
    for k, (c, found) in enumerate(zip(task.contexts, active.gates, strict=True)):
        data = task.datasets[c.dataset]
        by_target: dict[Hashable, list[int]] = defaultdict(list)
        for i in found:
            p = paths[i]
            by_target[p.target].append(i)
            field = c.targets.get(p.target)
            if field is not None:
                weight = c.probability * active.gate(k, i).expectation(survival)
                _accumulate(yx, i, weight, data.moment(field, c.inputs[p.source]), exact)
        for members in by_target.values():
            for j in members:
                for i in members:
                    gate = active.gate(k, j) * active.gate(k, i)
                    weight = c.probability * gate.expectation(survival)
                    moment = data.moment(c.inputs[paths[j].source], c.inputs[paths[i].source])
                    _accumulate(xx, (j, i), weight, moment, exact)
    for i, p in enumerate(paths):
        if i not in yx:
            shape = (graph.nodes[p.target]["size"], graph.nodes[p.source]["size"])
            yx[i] = sp.ImmutableMatrix.zeros(*shape) if exact else np.zeros(shape)
    return PathStatistics(
        paths=paths,
        input_output={paths[i]: _freeze(v) for i, v in sorted(yx.items())},
        input={(paths[j], paths[i]): _freeze(v) for (j, i), v in xx.items()},
        exact=exact,
    )


def require_numbers_for_float_data(task: Task) -> None:
    """Symbolic probabilities, gates or survival probabilities of random gates need exact
    data: float statistics cannot hold symbols."""
    if task.exact:
        return
    for index, c in enumerate(task.contexts):
        for what, value in [
            ("probability", c.probability),
            *(("gate", g) for g in c.gates.values()),
        ]:
            if isinstance(value, sp.Basic) and value.free_symbols:
                raise TaskSpecError(
                    f"context {index} ({c.label!r}): symbolic {what} {value} with float data "
                    f"(npz); give exact data or bind the symbols: "
                    + " ".join(f"--param {x}=VALUE" for x in sorted(map(str, value.free_symbols)))
                )
    for item, p in task.random_gates.items():
        if is_symbolic(p):
            raise TaskSpecError(
                f"random_gates: symbolic survival probability {p} of {item!r} with float data "
                "(npz); give exact data or bind the symbols: "
                + " ".join(f"--param {x}=VALUE" for x in sorted(map(str, p.free_symbols)))
            )


def _nonzero(moment: Any) -> bool:
    if isinstance(moment, sp.MatrixBase):  # exact, possibly symbolic
        return any(x != 0 for x in moment)
    return bool(np.any(moment != 0))


def _accumulate(table: dict[Any, Any], key: Any, weight: Any, moment: Any, exact: bool) -> None:
    term = moment * weight if exact else as_float(moment) * float(weight)
    table[key] = table[key] + term if key in table else term


def _freeze(value: Any) -> Any:
    return sp.ImmutableMatrix(value) if isinstance(value, sp.MatrixBase) else value


@dataclass(frozen=True)
class ContextActivity:
    """Which edges a context switches on, found without listing paths.

    Attributes
    ----------
    edges
        The edges on some path from a bound input to an output whose deterministic gates
        are all nonzero in this context.
    reach
        Node -> the bound inputs from which such a path reaches it.
    paths
        Output node -> the number of such paths ending there (a count, by dynamic
        programming over the graph; the paths themselves are not formed).
    """

    edges: frozenset[tuple[Hashable, Hashable]]
    reach: Mapping[Hashable, frozenset[Hashable]]
    paths: Mapping[Hashable, int]


def context_activity(graph: nx.DiGraph, task: Task) -> tuple[ContextActivity, ...]:
    """Per context, its active edges and path counts, in O(edges) each (no path listing)."""
    order = list(nx.topological_sort(graph))
    node_gated = {v: bool(g) for v, g in graph.nodes(data="gated")}
    out = []
    for c in task.contexts:

        def passes(u: Hashable, w: Hashable, c: Any = c) -> bool:
            if graph.edges[u, w].get("gated") and c.gates.get((u, w), 0) == 0:
                return False
            return not (node_gated[w] and c.gates.get(w, 0) == 0)

        reach: dict[Hashable, set[Hashable]] = {v: set() for v in graph.nodes}
        count: dict[Hashable, int] = dict.fromkeys(graph.nodes, 0)
        for v in c.inputs:
            reach[v].add(v)
            count[v] = 1
        for v in order:
            for u in graph.predecessors(v):
                if reach[u] and passes(u, v):
                    reach[v] |= reach[u]
                    count[v] += count[u]
        alive = {v for v in graph.nodes if graph.out_degree(v) == 0}
        for v in reversed(order):
            if any(w in alive and passes(v, w) for w in graph.successors(v)):
                alive.add(v)
        edges = frozenset(
            (u, w) for u, w in graph.edges if reach[u] and w in alive and passes(u, w)
        )
        out.append(
            ContextActivity(
                edges=edges,
                reach={v: frozenset(r) for v, r in reach.items() if v in alive and r},
                paths={v: count[v] for v in graph.nodes if graph.out_degree(v) == 0 and count[v]},
            )
        )
    return tuple(out)
