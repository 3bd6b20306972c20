r"""The ends of the graph against the task: every input fed, every output given a target.

A node with no edges in is an input $x$ and a node with no edges out an output $y$ (Sec. 2
of Saxe et al. 2022). A context binds inputs to data fields and outputs to targets; an
unbound input holds 0 and an unbound output has target 0. An input that no context
feeds, or an output that no context gives a target, is almost always a mistake, such as
an edge written the wrong way round (``h2 -> h1`` in routing makes ``h2`` an input and
``h1`` an output): the network is still well defined, and gdln's reduction of it exact,
but it is not the network meant. Such a node is refused when signal can flow through it
in some context. An end that every context gates off (random routing leaves some outputs
untrained) takes no part in the dynamics and is allowed.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Sequence

import networkx as nx
import sympy as sp

from .._errors import TaskSpecError, shorten
from ..task._families import ContextFamily, LazyContexts
from ..task._task import Context, Task

__all__ = ["check_ends"]

_SAMPLES = 9  # contexts of an unexpanded family that are looked at


def check_ends(graph: nx.DiGraph, task: Task, *, source: str) -> None:
    r"""Refuse an input that no context feeds, or an output that none gives a target.

    Only where it matters: the input reaches an output, or the output is reached from an
    input that holds data, through gates that are on (node and edge gates of Eq. 1 of
    Saxe et al. 2022), in some context.

    Parameters
    ----------
    graph
        The architecture.
    task
        Its task.
    source
        The file the task was read from, for the message.

    Raises
    ------
    TaskSpecError
        Naming the file, the node and what it lacks.
    """
    contexts, patterns = _contexts(task.contexts)
    for part, lacks in (("inputs", "data"), ("targets", "a target")):
        ends = [
            v
            for v in graph.nodes
            if (graph.in_degree if part == "inputs" else graph.out_degree)(v) == 0
        ]
        bound = {v for c in contexts for v in getattr(c, part)}
        for v in ends:
            if v in bound or any(p.fullmatch(str(v)) for p in patterns[part]):
                continue
            live = next((c for c in contexts if _signal(graph, c, v, part)), None)
            if live is None:
                continue
            kind, edges = ("an input", "in") if part == "inputs" else ("an output", "out")
            flows = "its signal reaches an output" if part == "inputs" else "signal reaches it"
            raise TaskSpecError(
                f"node {str(v)!r} is {kind} (no edges {edges}) that no context gives {lacks} "
                f"('{part}:'), yet {flows} in context {shorten(live.label, 30)}; bind it, or "
                "check the direction of its edges",
                source=source,
                key="task",
            )


def _contexts(
    contexts: Sequence[Context],
) -> tuple[list[Context], dict[str, list[re.Pattern[str]]]]:
    """The contexts to look at, and the id patterns of unexpanded families' bindings.

    An unexpanded family (:class:`LazyContexts`) is looked at through a few of its
    contexts; any node its ``inputs:``/``targets:`` templates could name counts as bound.
    """
    patterns: dict[str, list[re.Pattern[str]]] = {"inputs": [], "targets": []}
    if not isinstance(contexts, LazyContexts) or contexts.expanded:
        return list(contexts), patterns
    out: list[Context] = []
    for part in contexts.parts:
        if not isinstance(part, ContextFamily):
            out.append(part)
            continue
        n = len(part)
        out += [part.context(part.values(k * (n - 1) // (_SAMPLES - 1))) for k in range(_SAMPLES)]
        for name in patterns:
            patterns[name] += [_pattern(str(t)) for t in (part.entry.get(name) or {})]
    return out, patterns


def _pattern(template: str) -> re.Pattern[str]:
    """The ids a ``{...}`` template can render to, as a pattern (``x{i}`` -> ``x.*``)."""
    return re.compile(".*".join(re.escape(piece) for piece in re.split(r"\{[^{}]*\}", template)))


def _on(graph: nx.DiGraph, context: Context, item: Hashable, gated: bool) -> bool:
    """Whether a node or edge gate lets signal through in ``context`` (a symbol does)."""
    value = context.gate(item, gated)
    return not (isinstance(value, (int, float, sp.Basic)) and value == 0)


def _signal(graph: nx.DiGraph, context: Context, node: Hashable, part: str) -> bool:
    """Whether signal flows in ``context`` from the input ``node`` to an output
    (``part == "inputs"``), or into the output ``node`` from an input with data."""
    forward = part == "inputs"
    starts: Iterable[Hashable] = [node] if forward else context.inputs
    seen = {v for v in starts if _on(graph, context, v, bool(graph.nodes[v].get("gated")))}
    stack = list(seen)
    while stack:
        u = stack.pop()
        for v in graph.successors(u):
            if v in seen or not _on(graph, context, (u, v), bool(graph.edges[u, v].get("gated"))):
                continue
            if _on(graph, context, v, bool(graph.nodes[v].get("gated"))):
                seen.add(v)
                stack.append(v)
    if forward:
        return any(graph.out_degree(v) == 0 for v in seen if v != node)
    return node in seen
