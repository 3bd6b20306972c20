r"""Path statistics: the only data the learning dynamics see (Eqs. 5-6).

$$\Sigma^{yx}(p)=\langle g_p\,y_{t(p)}x_{s(p)}^\top\rangle,\qquad
\Sigma^{x}(j,p)=\langle g_j\,x_{s(j)}x_{s(p)}^\top g_p\rangle$$

with $g_p$ the product of the edge gates and the node gates (except the input node's)
along $p$. Averages run over contexts by probability and over each context's dataset.
Values are exact sympy matrices when the data are exact, float arrays otherwise.

Only paths that some context switches on with data at their source are kept ("active"),
and only pairs $(j, p)$ with the same target that are ever on together are formed, so the
cost grows with co-active pairs rather than with the square of the number of paths.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import sympy as sp

from ._errors import TaskSpecError
from ._paths import Path
from ._task import Task, as_float

__all__ = ["ActivePaths", "PathStatistics", "active_paths", "path_statistics"]


@dataclass(frozen=True)
class ActivePaths:
    """Which paths each context switches on, and how the paths couple.

    Attributes
    ----------
    paths
        Active paths, in order of first appearance.
    gates
        Per context: path index -> $g^c_p$ (nonzero).
    components
        Groups of path indices that share an edge or are co-active into the same output
        with a nonzero input correlation. Different components may use different bases.
    """

    paths: tuple[Path, ...]
    gates: tuple[Mapping[int, Any], ...]
    components: tuple[tuple[int, ...], ...]

    def component_of(self) -> dict[int, int]:
        return {p: k for k, members in enumerate(self.components) for p in members}


def active_paths(graph: nx.DiGraph, task: Task) -> ActivePaths:
    """Enumerate, per context, the paths it switches on (see :class:`ActivePaths`)."""
    index: dict[tuple[Hashable, ...], int] = {}
    paths: list[Path] = []
    per_context: list[dict[int, Any]] = []
    node_gated = {v: bool(g) for v, g in graph.nodes(data="gated")}
    succ = {v: [(w, bool(g)) for _, w, g in graph.out_edges(v, data="gated")] for v in graph.nodes}
    for c in task.contexts:
        found: dict[int, Any] = {}
        gates = c.gates
        for start in c.inputs:
            stack: list[tuple[tuple[Hashable, ...], Any]] = [((start,), 1)]
            while stack:
                nodes, g = stack.pop()
                last = nodes[-1]
                if not succ[last]:
                    key = nodes
                    if key not in index:
                        index[key] = len(paths)
                        paths.append(Path(nodes))
                    found[index[key]] = g
                    continue
                for w, edge_gated in succ[last]:
                    value = g
                    if edge_gated:
                        value = value * gates.get((last, w), 0)
                    if node_gated[w]:
                        value = value * gates.get(w, 0)
                    if value != 0:
                        stack.append(((*nodes, w), value))
        per_context.append(found)
    components = _components(graph, task, paths, per_context)
    return ActivePaths(paths=tuple(paths), gates=tuple(per_context), components=components)


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

    Attributes
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
    """

    paths: tuple[Path, ...]
    input_output: Mapping[Path, Any]
    input: Mapping[tuple[Path, Path], Any]
    exact: bool

    def __repr__(self) -> str:
        kind = "exact" if self.exact else "float"
        return f"PathStatistics(<{len(self.paths)} paths, {len(self.input)} pairs>, {kind})"

    def input_output_correlation(self, path: Path) -> Any:
        r"""$\Sigma^{yx}(p)$ (Eq. 5)."""
        return self.input_output[path]

    def input_correlation(self, j: Path, p: Path) -> Any:
        r"""$\Sigma^{x}(j, p)$ (Eq. 6); zero for pairs never on together."""
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
    """Compute Eqs. (5)-(6) for every active path and co-active pair."""
    require_numbers_for_float_data(task)
    active = active or active_paths(graph, task)
    paths = active.paths
    exact = task.exact
    yx: dict[int, Any] = {}
    xx: dict[tuple[int, int], Any] = {}
    for c, found in zip(task.contexts, active.gates, strict=True):
        data = task.datasets[c.dataset]
        by_target: dict[Hashable, list[int]] = defaultdict(list)
        for i, g in found.items():
            p = paths[i]
            by_target[p.target].append(i)
            field = c.targets.get(p.target)
            if field is not None:
                _accumulate(yx, i, c.probability * g, data.moment(field, c.inputs[p.source]), exact)
        for members in by_target.values():
            for j in members:
                for i in members:
                    weight = c.probability * found[j] * found[i]
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
    """Symbolic probabilities, weights or gates need exact data: float statistics cannot
    hold symbols."""
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


def _nonzero(moment: Any) -> bool:
    if isinstance(moment, sp.MatrixBase):  # exact, possibly symbolic
        return any(x != 0 for x in moment)
    return bool(np.any(moment != 0))


def _accumulate(table: dict[Any, Any], key: Any, weight: Any, moment: Any, exact: bool) -> None:
    term = moment * weight if exact else as_float(moment) * float(weight)
    table[key] = table[key] + term if key in table else term


def _freeze(value: Any) -> Any:
    return sp.ImmutableMatrix(value) if isinstance(value, sp.MatrixBase) else value
