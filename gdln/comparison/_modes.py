r"""The reduced variables $b_e^\alpha$ of Eq. (9), read off a solved theory or off weights.

The theory writes every weight matrix as $W_e = \sum_\alpha b_e^\alpha\, l_\alpha
r_\alpha^\top$ in the mode vectors of the reduction (Eq. 9 of Saxe et al. 2022).
:func:`theory_edge_values` collects the $b_e^\alpha(t)$ of a solved reduction edge by edge;
:func:`initial_mode_strengths` estimates $b_e(0)$ from arbitrary (random) weights, so that
the theory can start where a random initialisation does.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np

from .._edge import Edge
from ..solution._trajectory import Trajectory

__all__ = ["edge_orbits", "initial_mode_strengths", "theory_edge_values"]

_EdgeBases = tuple[np.ndarray, np.ndarray, list[int]]
"""``Reduction.edge_bases``: left and right mode vectors and the modes they belong to."""


def theory_edge_values(reduction: Any, trajectory: Trajectory) -> dict[Edge, np.ndarray]:
    r"""The reduced variable of every mode at every edge, from a solved reduction.

    Parameters
    ----------
    reduction
        From :func:`gdln.reduce`; its systems name the variables of ``trajectory``.
    trajectory
        From :func:`gdln.solve` on ``reduction`` (series named after the reduced
        variables, with ``@k`` suffixes when there are several systems).

    Returns
    -------
    dict
        Edge -> ``(T, k)``, column ``a`` being mode ``reduction.edge_bases(edge)[2][a]``,
        i.e. $b_e^\alpha(t)$ with $W_e = \sum_\alpha b_e^\alpha\, l_\alpha r_\alpha^\top$
        (Eq. 9). Edges carrying no mode are absent.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (9): the decoupled weights in the modes' bases.
    """
    per_edge: dict[Edge, dict[int, np.ndarray]] = {}
    for k, system in enumerate(reduction.systems):
        for variable, edges in system.edges.items():
            if not trajectory.has_variable(str(variable), system=k):
                continue
            values = np.asarray(trajectory.variable(str(variable), system=k), dtype=float)
            for edge in edges:
                cols = per_edge.setdefault(tuple(edge), {})
                for a, mode in enumerate(system.modes):
                    cols[int(mode)] = values[:, a]
    out = {}
    for edge, cols in per_edge.items():
        slots = reduction.edge_bases(edge)[2]
        if all(s in cols for s in slots) and slots:
            out[edge] = np.column_stack([cols[s] for s in slots])
    return out


def edge_orbits(reduction: Any, edges: Sequence[Edge]) -> list[tuple[Edge, ...]]:
    """Group ``edges`` by the reduced variables they share (a lumped variable's orbit).

    Two edges fall together when they carry the same variable in every system of the
    reduction, so their theory curves are one; an edge that carries none stands alone.
    Groups and their edges keep the order of ``edges``.
    """
    key_of: dict[Edge, list[tuple[int, str]]] = {}
    for k, system in enumerate(reduction.systems):
        for variable, members in system.edges.items():
            for e in members:
                key_of.setdefault(tuple(e), []).append((k, str(variable)))
    groups: dict[Any, list[Edge]] = {}
    for u, v in edges:
        e = (u, v)
        key = tuple(sorted(key_of.get(e, []))) or ("alone", e)
        groups.setdefault(key, []).append(e)
    return [tuple(group) for group in groups.values()]


def initial_mode_strengths(
    reduction: Any, weights: Mapping[Edge, np.ndarray], *, seed: int = 0
) -> dict[Edge, float]:
    r"""Initial values $b_e(0)$ of the reduced variables, read off (random) weights.

    The theory of Eq. (9) writes $W_e = \sum_\alpha b_e^\alpha\, d_{t(e)}^\alpha
    (d_{s(e)}^\alpha)^\top$, with $d_v^\alpha$ the data's mode vectors at input and output
    nodes and free directions at hidden nodes. For arbitrary weights this reads
    $b_e^\alpha = (d_{t(e)}^\alpha)^\top W_e\, d_{s(e)}^\alpha$ once a direction is chosen
    at every hidden node $v$: the normalised sum of what the weights already carry to
    $v$ for mode $\alpha$, i.e. $W_e d_{s(e)}^\alpha$ over in-edges from inputs and
    hidden nodes earlier in topological order, plus $W_e^\top d_{t(e)}^\alpha$ over
    out-edges into outputs (the reduction's own hidden basis where nothing arrives).

    For a two-layer pathway $x\to h\to y$ this is exact for the early, linear phase of
    learning from small weights: $w_1 = W_1 r$ and $w_2 = W_2^\top l$ grow along
    $w_1 + w_2$ at the rate of the reduced theory, and the rule gives the same growing
    part, $b_1 + b_2 = \lVert w_1 + w_2\rVert$, and the same conserved quantity,
    $b_1^2 - b_2^2 = \lVert w_1\rVert^2 - \lVert w_2\rVert^2$, which gradient flow
    conserves in both. For deeper, shared pathways it is an estimate
    (misaligned random directions learn more slowly than aligned ones); README "Theory
    vs simulation" gives the measured agreement.

    Parameters
    ----------
    reduction
        From :func:`gdln.reduce` (only its mode vectors are used).
    weights
        Edge -> ``(|t|, |s|)`` or ``(S, |t|, |s|)`` (e.g. :func:`gdln.simulation.initial_weights`).
    seed
        Seed of the reduction's hidden bases, used only where no weight reaches a node.

    Returns
    -------
    dict
        Edge -> $b_e(0)$, the mean of $b_e^\alpha$ over the edge's modes and the seeds
        (one number per edge, as :func:`gdln.reduce` takes). Edges carrying no mode are
        absent.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (9) (the decoupled form of the weights) and
    Sec. 3 (the conserved quantities of gradient flow).
    """
    graph = reduction.problem.graph
    arrays = {(e[0], e[1]): np.asarray(w, dtype=float) for e, w in weights.items()}
    stacks: dict[Edge, np.ndarray] = {e: w[None] if w.ndim == 2 else w for e, w in arrays.items()}
    n_seeds = next(iter(stacks.values())).shape[0]
    bases: dict[Edge, _EdgeBases] = {
        e: reduction.edge_bases(e, seed=seed) for e in map(tuple, graph.edges)
    }
    values: dict[Edge, list[float]] = {}
    for r in range(n_seeds):
        W = {e: w[r] for e, w in stacks.items()}
        direction = _hidden_directions(graph, W, bases)
        for e in graph.edges:
            left, right, slots = bases[e]
            if not slots:
                continue
            strengths = [
                direction.get((e[1], a), left[:, k]) @ W[e] @ direction.get((e[0], a), right[:, k])
                for k, a in enumerate(slots)
            ]
            values.setdefault(e, []).append(float(np.mean(strengths)))
    return {e: float(np.mean(v)) for e, v in values.items()}


def _hidden_directions(
    graph: nx.DiGraph, W: Mapping[Edge, np.ndarray], bases: Mapping[Edge, _EdgeBases]
) -> dict[tuple[Hashable, int], np.ndarray]:
    r"""(hidden node $v$, mode $\alpha$) -> the unit direction the weights carry to $v$.

    The normalised sum of $W_e d_{s(e)}^\alpha$ over in-edges from inputs and from hidden
    nodes already visited (topological order) and of $W_e^\top d_{t(e)}^\alpha$ over
    out-edges into outputs; absent where nothing arrives.
    """
    inputs = {v for v in graph if graph.in_degree(v) == 0}
    outputs = {v for v in graph if graph.out_degree(v) == 0}
    direction: dict[tuple[Hashable, int], np.ndarray] = {}
    for v in nx.topological_sort(graph):
        if v in inputs or v in outputs:
            continue
        arriving: dict[int, np.ndarray] = {}
        for e in [*graph.in_edges(v), *graph.out_edges(v)]:
            left, right, slots = bases[e]
            for k, a in enumerate(slots):
                if e[1] == v and e[0] in inputs:
                    image = W[e] @ right[:, k]
                elif e[1] == v and (e[0], a) in direction:
                    image = W[e] @ direction[(e[0], a)]
                elif e[0] == v and e[1] in outputs:
                    image = W[e].T @ left[:, k]
                else:
                    continue
                arriving[a] = arriving.get(a, 0.0) + image
        for a, total in arriving.items():
            norm = float(np.linalg.norm(total))
            if norm > 0:
                direction[(v, a)] = total / norm
    return direction
