"""A gated network written as a graph file that :func:`gdln.load` reads back exactly.

This is the one place that writes graph-file text; it is swapped for
``gdln.graphfile.dump(problem)`` once that lands. Every float is written by ``repr``
(which reads back to the same float) with a decimal point before any exponent, so that
YAML reads it as a number; names are written as JSON strings (valid YAML), so that no
name can end a line or start a comment.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Example", "graph_text", "number"]


@dataclass(frozen=True)
class Example:
    """One example of the ``task: examples:`` form: its data, the gated nodes it switches
    on, and its weight (``None``: the default 1)."""

    inputs: Mapping[str, np.ndarray]
    targets: Mapping[str, np.ndarray]
    active: Sequence[str]
    weight: float | None = None


def number(value: float) -> str:
    """``value`` as YAML reads it back to the same float.

    >>> number(1e-05), number(0.1), number(3.0)
    ('1.0e-05', '0.1', '3.0')
    """
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not finite")
    text = repr(value)
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text


def _name(text: str) -> str:
    return json.dumps(str(text), ensure_ascii=False)


def _row(values: Any) -> str:
    return "[" + ", ".join(number(x) for x in np.asarray(values, float).ravel()) + "]"


def _data(table: Mapping[str, np.ndarray]) -> str:
    return "{" + ", ".join(f"{_name(k)}: {_row(v)}" for k, v in table.items()) + "}"


def graph_text(
    *,
    name: str,
    description: str,
    comments: Sequence[str],
    nodes: Sequence[tuple[str, int, bool]],
    edges: Sequence[tuple[str, str]],
    examples: Sequence[Example],
    solve: Mapping[str, float] | None = None,
) -> str:
    """The text of a graph file: ``nodes`` ``(id, size, gated)``, ``edges``, a task of
    ``examples`` (examples that share their gates form one context), and ``solve:``
    settings; ``comments`` go at the top, one ``#`` line each.

    Parameters
    ----------
    name, description
        The graph's ``name`` and ``description``.
    comments
        Lines written as comments before the document.
    nodes
        ``(id, size, gated)`` per node.
    edges
        ``(source, target)`` per edge.
    examples
        The task's examples.
    solve
        Numeric settings of the ``solve:`` section.

    Returns
    -------
    str
        The YAML document.
    """
    lines = [f"# {line}" for line in comments]
    lines += [f"name: {_name(name)}", f"description: {_name(description)}", "nodes:"]
    for node, size, gated in nodes:
        gate = ", gated: true" if gated else ""
        lines.append(f"  - {{id: {_name(node)}, size: {int(size)}{gate}}}")
    lines.append("edges:")
    lines += [f"  - {{source: {_name(u)}, target: {_name(v)}}}" for u, v in edges]
    gated = any(g for _, _, g in nodes)
    lines += ["task:", "  examples:"]
    for example in examples:
        parts = [f"inputs: {_data(example.inputs)}", f"targets: {_data(example.targets)}"]
        if gated:
            parts.append("active: [" + ", ".join(_name(a) for a in example.active) + "]")
        if example.weight is not None:
            parts.append(f"weight: {number(example.weight)}")
        lines.append("    - {" + ", ".join(parts) + "}")
    if solve:
        lines.append("solve: {" + ", ".join(f"{k}: {number(v)}" for k, v in solve.items()) + "}")
    return "\n".join(lines) + "\n"
