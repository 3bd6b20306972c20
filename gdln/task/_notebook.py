"""A problem as HTML for notebooks: its nodes, edges and contexts (``Problem._repr_html_``).

Long lists are cut at :data:`SHOWN` rows, with the count of the rest; a family of
contexts is never expanded past them.
"""

from __future__ import annotations

import html
import itertools
from typing import Any

from .._edge import edge_name
from .._html import html_table

__all__ = ["SHOWN", "problem_html"]

SHOWN = 40
"""Rows shown per table."""


def _more(count: int, what: str) -> list[list[str]]:
    return [[f"... {count - SHOWN} more {what}"]] if count > SHOWN else []


def _gates(gates: Any) -> str:
    """The gates a context does not close, as ``x0->h1`` or ``a=1/2``; the first 8."""
    shown = []
    for item, value in itertools.islice(gates.items(), 8):
        name = edge_name(item) if isinstance(item, tuple) else str(item)
        if value != 0:
            shown.append(name if value == 1 else f"{name}={value}")
    return ", ".join(shown) + (", ..." if len(gates) > 8 else "")


def problem_html(problem: Any) -> str:
    """Tables of the nodes (size, gated), the edges (gated, fixed) and the contexts
    (label, probability, dataset, gates that are not 0) of a :class:`gdln.Problem`."""
    graph = problem.graph
    params = ", ".join(f"{k}={v}" for k, v in problem.params.items())
    title = f"{problem.name} ({problem.source})" + (f"; {params}" if params else "")
    parts = [f"<p>{html.escape(title)}</p>"]
    nodes = [
        [n, d.get("size"), "yes" if d.get("gated") else ""]
        for n, d in itertools.islice(graph.nodes(data=True), SHOWN)
    ]
    parts.append(
        html_table(
            ["node", "size", "gated"],
            nodes + _more(graph.number_of_nodes(), "nodes"),
            caption=f"{graph.number_of_nodes()} nodes",
        )
    )
    edges = [
        [
            edge_name((s, t)),
            "yes" if d.get("gated") else "",
            "" if d.get("fixed") is None else d["fixed"],
        ]
        for s, t, d in itertools.islice(graph.edges(data=True), SHOWN)
    ]
    parts.append(
        html_table(
            ["edge", "gated", "fixed (untrained c I)"],
            edges + _more(graph.number_of_edges(), "edges"),
            caption=f"{graph.number_of_edges()} edges",
        )
    )
    task = problem.task
    if task is None:
        parts.append("<p>no task</p>")
    else:
        count = len(task.contexts)
        rows = [
            [c.label, c.probability, c.dataset, _gates(c.gates)]
            for c in itertools.islice(task.contexts, SHOWN)
        ]
        parts.append(
            html_table(
                ["context", "probability", "dataset", "gates on"],
                rows + _more(count, "contexts"),
                caption=f"{count} contexts",
            )
        )
    return "<div>" + "".join(parts) + "</div>"
