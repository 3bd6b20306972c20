r"""Hidden nodes narrower than the modes that reach them (Eq. 9 of Saxe et al. 2022).

In the decoupled weights $W_e = R_{t(e)}B_eR_{s(e)}^\top$ a hidden node $v$ of width
$|v|$ carries the modes $\alpha < |v|$ of its component and drops the rest. The set of
decoupled weights is invariant under gradient flow whatever modes a node keeps, but the
network only *follows* it when the choice is stable: rounding puts weight of order
$10^{-16}$ into the dropped directions, and it grows wherever that lowers the loss.

Two-layer case (the argument for the rule below). Let slot $r$ of $v$ carry mode $a$ with
$W_2W_1$ reaching $b_1b_2 = F_a$ in that mode, and let mode $k$ be dropped, with
residual $\rho_k$ (Eq. 4 in mode $k$) and input variance $d_k$. The weights that move
slot $r$ towards mode $k$, $\delta_1 = r^\top W_1 v_k$ and $\delta_2 = u_k^\top W_2 r$, obey
$$\tau\frac{d}{dt}\begin{pmatrix}\delta_1\\ \delta_2\end{pmatrix}
=\begin{pmatrix}-b_2^2d_k & \rho_k\\ \rho_k & -b_1^2d_a\end{pmatrix}
\begin{pmatrix}\delta_1\\ \delta_2\end{pmatrix},$$
which grows exponentially when $F_a^2 d_a d_k < \rho_k^2$.

* **One pathway** (every path into the outputs that $v$ feeds goes through $v$): at the end
  $F_a = s_a/d_a$ and $\rho_k = s_k$, so the choice is stable when
  $s_a^2/d_a \ge s_k^2/d_k$, i.e. when each kept mode lowers the loss at least as much as
  each dropped one (Eckart-Young with input correlations). gdln orders modes by
  $|s|$, which is that order for whitened inputs but not in general.
* **Parallel pathways** (another path into the same output, with correlated input,
  avoids $v$): the modes $v$ keeps may be learnt by the other path as well, so $F_a$
  through $v$ can be arbitrarily small while a dropped mode's residual persists, and the
  decoupled trajectory is a saddle the network leaves (nine parallel width-2 modules on
  8 data modes: a predicted floor of 57% of $\mathcal L(0)$, while gradient descent from
  these very weights reaches $10^{-23}$).

:func:`check_narrow_nodes` accepts a narrow node only in the first case with the kept
modes first in that order, and otherwise refuses, naming the node, its width and the
number of modes that reach it, and pointing to the full-matrix dynamics (Eqs. 3-4),
which need no decoupling.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np
import sympy as sp

from .._edge import Edge
from .._errors import GdlnError
from ..paths._statistics import ContextActivity, context_activity
from ..task._problem import Problem
from ..task._task import Context, Task
from ._bases import Modes, generic_values

__all__: list[str] = []  # package-internal: the narrow-node check of both routes

GAIN_RTOL = 1e-9
"""Relative margin by which a dropped mode's gain must exceed a kept one's to refuse."""

FULL_MATRIX_ROUTE = (
    "use the full-matrix dynamics (Eqs. 3-4): gdln.solve(problem, route='matrix'), or "
    "`gdln solve FILE --route matrix`"
)


class NarrowNodeError(GdlnError):
    """A hidden node keeps fewer modes than reach it, and the network may not do the same."""


def check_narrow_nodes(
    problem: Problem,
    space: Mapping[tuple[int, Hashable], Hashable],
    modes: Sequence[Modes],
    edge_component: Mapping[Edge, int],
    *,
    activity: Sequence[ContextActivity] | None = None,
) -> None:
    r"""Refuse hidden nodes that drop modes where gradient descent would keep them.

    A hidden node $v$ of width $|v|$ carries the modes $\alpha<|v|$ of its component. When
    a mode $\alpha\ge|v|$ reaches it (is in the spaces of both ends of a path through
    $v$), $v$ is *narrow*, and it is accepted only if (see the module docstring)

    1. no path that avoids $v$ ends at an output fed through $v$, in a context where its
       input is correlated with an input reaching $v$ (else several pathways compete
       for the same modes), and
    2. every mode $v$ keeps lowers the loss at least as much as every mode it drops, by
       the gain $g_\alpha=\tfrac12\sum_c\pi_c\sum_o s^\top_{c,o}\,d_c^{+}\,s_{c,o}$ over
       the inputs that reach $o$ through $v$ in context $c$ ($s^2/2d$ for one path).

    Parameters
    ----------
    problem
        The problem being reduced (the contexts it reduces, e.g. a quotient's).
    space
        ``(component, data node)`` -> the label of its space in ``modes``.
    modes
        The modes of each component.
    edge_component
        Active edge -> its component.
    activity
        :func:`~gdln.paths.context_activity` of the problem, when already computed.

    Raises
    ------
    NarrowNodeError
        Naming the first narrow node that fails, its width and the number of modes that
        reach it, and pointing to the matrix route of :func:`gdln.solve`.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (3)-(4), (9)-(10).
    """
    graph = problem.graph
    candidates = _candidates(graph, modes, edge_component)
    if not candidates:
        return
    task = problem.require_task()
    activity = activity if activity is not None else context_activity(graph, task)
    gains = _Gains(task, space, modes)
    wanted = {v for v, _ in candidates}
    contexts: dict[Hashable, list[int]] = defaultdict(list)  # node -> contexts it is on in
    for ci, act in enumerate(activity):
        for v in wanted & {w for _, w in act.edges}:
            contexts[v].append(ci)
    for v, k in candidates:
        width = int(graph.nodes[v]["size"])
        through = _through(graph, activity, contexts[v], v, k, edge_component)
        reaching = _reaching(through, space, modes[k], k)
        if not reaching or max(reaching) < width:
            continue
        where = (
            f"{problem.source}: hidden node {v!r} (width {width}) is narrower than the "
            f"{len(reaching)} modes that reach it, and"
        )
        bypass = _bypass(task, activity, through, v, gains)
        if bypass is not None:
            raise NarrowNodeError(
                f"{where} another pathway into {bypass!r} bypasses it, so gradient descent "
                f"need not keep the modes it keeps; {FULL_MATRIX_ROUTE}"
            )
        per_mode = {a: gains.of(k, a, through) for a in range(len(modes[k]))}
        kept = list(range(min(width, len(modes[k]))))
        dropped = [a for a in reaching if a >= width]
        weakest = min(kept, key=lambda a: per_mode[a])
        strongest = max(dropped, key=lambda a: per_mode[a])
        margin = GAIN_RTOL * max(per_mode.values())
        if per_mode[strongest] > per_mode[weakest] * (1 + GAIN_RTOL) + margin:
            raise NarrowNodeError(
                f"{where} keeps mode {weakest + 1} (lowers the loss by {per_mode[weakest]:.3g}) "
                f"over mode {strongest + 1} (by {per_mode[strongest]:.3g}), which gradient "
                f"descent learns instead; {FULL_MATRIX_ROUTE}"
            )


def _candidates(
    graph: nx.DiGraph, modes: Sequence[Modes], edge_component: Mapping[Edge, int]
) -> list[tuple[Hashable, int]]:
    """(hidden node, component) pairs whose component has more modes than the node's width."""
    found: set[tuple[Hashable, int]] = set()
    for (u, w), k in edge_component.items():
        for v in (u, w):
            if (
                graph.in_degree(v)
                and graph.out_degree(v)
                and graph.nodes[v]["size"] < len(modes[k])
            ):
                found.add((v, k))
    order = {v: i for i, v in enumerate(nx.topological_sort(graph))}
    return sorted(found, key=lambda vk: (order[vk[0]], vk[1]))


Through = list[tuple[int, frozenset[Hashable], frozenset[Hashable]]]
"""Per context: (context index, inputs reaching the node, outputs it reaches)."""


def _through(
    graph: nx.DiGraph,
    activity: Sequence[ContextActivity],
    contexts: Iterable[int],
    v: Hashable,
    k: int,
    edge_component: Mapping[Edge, int],
) -> Through:
    """Per context of ``contexts``, the inputs and outputs joined via ``v`` (component ``k``)."""
    out = []
    for ci in contexts:
        act = activity[ci]
        ins = [e for e in act.edges if e[1] == v and edge_component.get(e) == k]
        outs = [e for e in act.edges if e[0] == v and edge_component.get(e) == k]
        if not ins or not outs:
            continue
        sources = frozenset().union(*(act.reach.get(e[0], frozenset()) for e in ins))
        targets = _downstream(graph, act.edges, [e[1] for e in outs])
        if sources and targets:
            out.append((ci, sources, targets))
    return out


def _downstream(
    graph: nx.DiGraph, edges: Iterable[Edge], start: Iterable[Hashable]
) -> frozenset[Hashable]:
    """The outputs reached from ``start`` along ``edges``."""
    succ: dict[Hashable, list[Hashable]] = defaultdict(list)
    for u, w in edges:
        succ[u].append(w)
    seen, stack = set(start), list(start)
    while stack:
        u = stack.pop()
        for w in succ[u]:
            if w not in seen:
                seen.add(w)
                stack.append(w)
    return frozenset(w for w in seen if graph.out_degree(w) == 0)


def _reaching(
    through: Through, space: Mapping[tuple[int, Hashable], Hashable], modes: Modes, k: int
) -> list[int]:
    """The modes in the spaces of both ends of some path through the node."""
    ends_in = {i for _, ins, _ in through for i in ins}
    ends_out = {o for _, _, outs in through for o in outs}
    found = []
    for alpha, vectors in enumerate(modes.vectors):
        if any(space.get((k, i)) in vectors for i in ends_in) and any(
            space.get((k, o)) in vectors for o in ends_out
        ):
            found.append(alpha)
    return found


def _bypass(
    task: Task,
    activity: Sequence[ContextActivity],
    through: Through,
    v: Hashable,
    gains: _Gains,
) -> Hashable | None:
    """An output fed through ``v`` that a correlated path avoiding ``v`` also reaches."""
    for ci, sources, targets in through:
        c = task.contexts[ci]
        reach = _reach_avoiding(activity[ci].edges, c.inputs, v)
        for o in sorted(targets, key=str):
            for i in sources:
                if any(gains.correlated(c, i, j) for j in reach.get(o, ())):
                    return o
    return None


def _reach_avoiding(
    edges: Iterable[Edge], inputs: Iterable[Hashable], v: Hashable
) -> dict[Hashable, set[Hashable]]:
    """Node -> the inputs that reach it along ``edges`` without passing through ``v``."""
    edges = [e for e in edges if v not in e]
    succ: dict[Hashable, list[Hashable]] = defaultdict(list)
    for u, w in edges:
        succ[u].append(w)
    reach: dict[Hashable, set[Hashable]] = defaultdict(set)
    for i in inputs:
        if i == v:
            continue
        stack, seen = [i], {i}
        while stack:
            u = stack.pop()
            reach[u].add(i)
            for w in succ[u]:
                if w not in seen:
                    seen.add(w)
                    stack.append(w)
    return reach


class _Gains:
    """Per-mode data values of the contexts' moments, and the gains they allow."""

    def __init__(
        self, task: Task, space: Mapping[tuple[int, Hashable], Hashable], modes: Sequence[Modes]
    ):
        self.task, self.space, self.modes = task, space, modes
        self._moments: dict[tuple[str, str, str], np.ndarray] = {}
        self._gains: dict[tuple[Any, ...], float] = {}

    def moment(self, dataset: str, fa: str, fb: str) -> np.ndarray:
        """A dataset moment as floats (symbols at generic values)."""
        key = (dataset, fa, fb)
        if key not in self._moments:
            self._moments[key] = _float(self.task.datasets[dataset].moment(fa, fb))
        return self._moments[key]

    def correlated(self, c: Context, i: Hashable, j: Hashable) -> bool:
        """Whether inputs ``i`` and ``j`` of context ``c`` have a nonzero moment."""
        return bool(np.any(self.moment(c.dataset, c.inputs[i], c.inputs[j]) != 0))

    def value(self, k: int, alpha: int, row: Hashable, col: Hashable, m: np.ndarray) -> float:
        r"""$r_{\rm row}^{\alpha\top}\,m\,r^\alpha_{\rm col}$ (0 where mode $\alpha$ misses a space)."""
        vectors = self.modes[k].vectors[alpha]
        a, b = self.space.get((k, row)), self.space.get((k, col))
        if a not in vectors or b not in vectors:
            return 0.0
        return float(vectors[a] @ m @ vectors[b])

    def of(self, k: int, alpha: int, through: Through) -> float:
        r"""$g_\alpha=\tfrac12\sum_c\pi_c\sum_o s^\top d^{+}s$ over the paths via the node."""
        total = 0.0
        for ci, sources, targets in through:
            c = self.task.contexts[ci]
            ins = sorted(sources, key=str)
            outs = sorted((o for o in targets if o in c.targets), key=str)
            key = (
                k,
                alpha,
                c.dataset,
                tuple((self.space.get((k, i)), c.inputs[i]) for i in ins),
                tuple((self.space.get((k, o)), c.targets[o]) for o in outs),
            )
            if key not in self._gains:
                self._gains[key] = self._context_gain(k, alpha, c, ins, outs)
            total += _float_scalar(c.probability) * self._gains[key]
        return total

    def _context_gain(
        self, k: int, alpha: int, c: Context, ins: Sequence[Hashable], outs: Sequence[Hashable]
    ) -> float:
        r"""$\tfrac12\sum_o s^\top d^{+}s$ of one context (its probability left out)."""
        d = np.array(
            [
                [
                    self.value(k, alpha, i, j, self.moment(c.dataset, c.inputs[i], c.inputs[j]))
                    for j in ins
                ]
                for i in ins
            ]
        )
        inverse = np.linalg.pinv(d, rcond=1e-12, hermitian=True)
        total = 0.0
        for o in outs:
            s = np.array(
                [
                    self.value(k, alpha, o, i, self.moment(c.dataset, c.targets[o], c.inputs[i]))
                    for i in ins
                ]
            )
            total += 0.5 * float(s @ inverse @ s)
        return total


def _float(matrix: Any) -> np.ndarray:
    """A moment as floats, its symbols (if any) at the generic values of the bases."""
    if isinstance(matrix, sp.MatrixBase) and matrix.free_symbols:
        matrix = matrix.xreplace(generic_values(matrix.free_symbols))
    if isinstance(matrix, sp.MatrixBase):
        return np.array(matrix.evalf(), dtype=float).reshape(matrix.shape)
    return np.asarray(matrix, dtype=float)


def _float_scalar(value: Any) -> float:
    """A probability as a float, its symbols (if any) at generic values."""
    if isinstance(value, sp.Basic) and value.free_symbols:
        value = value.xreplace(generic_values(value.free_symbols))
    return float(value)
