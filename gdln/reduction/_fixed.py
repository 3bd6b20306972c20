r"""Fixed edges: untrained weights $W_e = c\,I$ and the bases they tie together.

A fixed edge enters every mode's 1-D network as the constant $b_e = c$ only if its two
ends share one basis (Eq. 9 of Saxe et al. 2022 with $R_{t(e)} = R_{s(e)}$). Nodes joined
by fixed edges form a class; when a class holds data nodes (inputs, outputs), their data
bases must coincide, which is asked of the joint diagonalisation as an identity block
between their spaces.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np
import sympy as sp

from .._edge import Edge, edge_name
from .._errors import NotDiagonalizableError
from ._bases import Block, Modes, joint_modes

__all__: list[str] = []  # package-internal: fixed edges, for the bases of both routes


def fixed_value(graph: nx.DiGraph, edge: Edge) -> Any:
    r"""$c$ of a fixed edge $W_e = c\,I$, or ``None`` for a trained edge."""
    return graph.edges[edge].get("fixed")


def fixed_classes(graph: nx.DiGraph) -> list[tuple[Hashable, ...]]:
    r"""Nodes joined by fixed edges ($W_e = c\,I$): they must share one basis.

    Classes of two or more nodes, each in topological order, in order of first node.
    """
    fixed = [(u, v) for u, v, c in graph.edges(data="fixed") if c is not None]
    if not fixed:
        return []
    joined = nx.Graph(fixed)
    order = {v: i for i, v in enumerate(nx.topological_sort(graph))}
    classes = [sorted(c, key=order.__getitem__) for c in nx.connected_components(joined)]
    return [tuple(c) for c in sorted(classes, key=lambda c: order[c[0]])]


def fixed_pairs(
    graph: nx.DiGraph, k: int, space: Mapping[tuple[int, Hashable], Hashable]
) -> list[tuple[Hashable, Hashable, str]]:
    r"""Data spaces of component ``k`` that fixed edges tie to one basis: ``(a, b, tag)``.

    A fixed edge $W_e = c\,I$ keeps $b_e = c$ in every mode only if its two ends share a
    basis; when a class of such nodes holds data nodes (inputs, outputs), their data bases
    must coincide. ``a`` is the class's first input-side space.
    """
    out = []
    for members in fixed_classes(graph):
        labels = list(dict.fromkeys(space[(k, v)] for v in members if (k, v) in space))
        if len(labels) < 2:
            continue
        labels.sort(key=lambda label: str(label[0]) != "in")  # type: ignore[index]
        edges = [
            edge_name((u, v))
            for u, v, c in graph.edges(data="fixed")
            if c is not None and u in members
        ]
        shown = ", ".join(edges[:3]) + (f" and {len(edges) - 3} more" if len(edges) > 3 else "")
        tag = f"fixed edges {shown}"
        out += [(labels[0], other, tag) for other in labels[1:]]
    return out


def identity_block(a: Hashable, b: Hashable, size: int, tag: str) -> Block:
    """The block $I$ between two spaces that fixed edges tie to one basis."""
    return Block(row=a, col=b, value=np.eye(size), exact=sp.ImmutableMatrix(sp.eye(size)), tag=tag)


def with_fixed_blocks(
    graph: nx.DiGraph,
    k: int,
    space: Mapping[tuple[int, Hashable], Hashable],
    spaces: Mapping[Hashable, int],
    blocks: Sequence[Block],
) -> tuple[list[Block], list[tuple[Hashable, Hashable, str]]]:
    """``blocks`` plus the identity blocks of component ``k``'s fixed pairs, and the pairs."""
    pairs = fixed_pairs(graph, k, space)
    return [*blocks, *(identity_block(a, b, spaces[a], tag) for a, b, tag in pairs)], pairs


def joint_modes_fixed(
    spaces: Mapping[Hashable, int],
    blocks: Sequence[Block],
    outputs: frozenset[Hashable],
    exact: bool,
    pairs: Sequence[tuple[Hashable, Hashable, str]],
    *,
    symbols: Mapping[Any, Any] | None = None,
) -> Modes:
    """:func:`joint_modes`, then the same vector in every space a fixed class ties together.

    The identity blocks make each mode's vectors in tied spaces parallel; their signs are
    then made equal (flipping a vector flips the sign of that mode's $s$, nothing else).
    """
    try:
        modes = joint_modes(spaces, blocks, outputs=outputs, exact=exact, symbols=symbols)
    except NotDiagonalizableError as err:
        if not pairs:
            raise
        tags = sorted({tag for _, _, tag in pairs})
        raise NotDiagonalizableError(
            f"{'; '.join(tags)} hold W = c I, so the spaces they join must share one basis, "
            f"and no common bases exist: {err}",
            paths=err.paths,
            residual=err.residual,
        ) from err
    if not pairs:
        return modes
    return _align_tied_spaces(modes, pairs)


def _align_tied_spaces(modes: Modes, pairs: Sequence[tuple[Hashable, Hashable, str]]) -> Modes:
    """Check that each mode's vectors in tied spaces are parallel, and give them one sign."""
    vectors = [dict(m) for m in modes.vectors]
    exact_vectors = [dict(m) for m in modes.exact_vectors] if modes.exact_vectors else None
    for a, b, tag in pairs:
        for alpha, mode in enumerate(vectors):
            if (a in mode) != (b in mode) or (
                a in mode and abs(abs(float(mode[a] @ mode[b])) - 1) > 1e-7
            ):
                raise NotDiagonalizableError(
                    f"{tag} hold W = c I, so the spaces {a} and {b} must share one basis, but "
                    f"mode {alpha} of the statistics differs between them",
                    paths=(tag,),
                    residual=1.0,
                )
            if a in mode and float(mode[a] @ mode[b]) < 0:
                mode[b] = -mode[b]
                if exact_vectors is not None:
                    exact_vectors[alpha][b] = -exact_vectors[alpha][b]
    return Modes(
        spaces=modes.spaces,
        vectors=tuple(vectors),
        exact_vectors=tuple(exact_vectors) if exact_vectors is not None else None,
        complement=modes.complement,
    )
