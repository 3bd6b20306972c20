"""Edges of an architecture graph and how gdln names them, shared by every stage."""

from __future__ import annotations

from collections.abc import Hashable

Edge = tuple[Hashable, Hashable]
"""A directed edge ``(source, target)`` of an architecture graph."""

EDGE_SEPARATOR = "->"
"""Between the ends of an edge in its name, as graph files and series keys write it."""


def edge_name(edge: Edge) -> str:
    """The name of an edge: ``"source->target"``.

    >>> edge_name(("x", "h"))
    'x->h'
    """
    return f"{edge[0]}{EDGE_SEPARATOR}{edge[1]}"
