"""The names of the series a trajectory records, built here and only here.

The ``*_key`` functions spell the names of :class:`gdln.Trajectory`'s series and
:func:`edge_in_key` and :func:`variable_in_key` read them back, so no other module
spells or parses them; :class:`gdln.Trajectory` lists them and reads them through its
accessors.
"""

from __future__ import annotations

from collections.abc import Hashable

from .._edge import Edge, edge_name

__all__ = [
    "CONTEXT_LOSS",
    "EVAL_EXAMPLE_LOSS",
    "EVAL_LOSS",
    "KERNEL_DISTANCE",
    "VARIABLE_EDGES",
    "context_key",
    "edge_in_key",
    "edge_key",
    "matrix_key",
    "node_key",
    "pathway_key",
    "variable_in_key",
    "variable_key",
]

CONTEXT_LOSS = "context_loss"
"""The per-context loss of a solve, ``(T, contexts)``."""
EVAL_LOSS = "eval/loss"
"""A simulation's loss on its evaluation examples, ``(T, seeds)``."""
EVAL_EXAMPLE_LOSS = "eval/example_loss"
"""A simulation's loss on each evaluation example, ``(T, seeds, n)``."""
KERNEL_DISTANCE = "kernel_distance"
"""The tangent-kernel distance $S(t)$ from the first time, ``(T,)`` (``gdln solve --kernel``)."""
VARIABLE_EDGES = "variable_edges"
"""The key of ``meta`` that maps each reduced variable to its edges' names (a solve's)."""

_EDGE_QUANTITIES = ("W", "sv", "proj")
_NODE_PREFIXES = {"rsm": "rsm/", "output": "eval/output/", "pattern": "pattern/"}


def variable_key(name: str, system: int, systems: int) -> str:
    """The series name of reduced variable ``name`` of system ``system`` of ``systems``.

    >>> variable_key("B1", 0, 1), variable_key("B1", 2, 3)
    ('B1', 'B1@2')
    """
    return name if systems == 1 else f"{name}@{system}"


def variable_in_key(key: str) -> tuple[str, int]:
    """The variable name and system number of a series name (see :func:`variable_key`).

    Parameters
    ----------
    key
        A series name.

    Returns
    -------
    tuple
        ``(name, system)``; a name without ``@k`` belongs to system 0.

    Examples
    --------
    >>> variable_in_key("B1"), variable_in_key("B1@2")
    (('B1', 0), ('B1', 2))
    """
    name, at, system = key.rpartition("@")
    return (name, int(system)) if at and system.isdigit() else (key, 0)


def edge_key(quantity: str, edge: Edge | str) -> str:
    """The series name of ``quantity`` (``"W"``, ``"sv"`` or ``"proj"``) of a simulated edge.

    >>> edge_key("sv", ("x", "h"))
    'sv/x->h'
    """
    if quantity not in _EDGE_QUANTITIES:
        raise ValueError(f"quantity {quantity!r}: expected one of {_EDGE_QUANTITIES}")
    return f"{quantity}/{_edge(edge)}"


def matrix_key(quantity: str, edge: Edge | str) -> str:
    """The series name of ``quantity`` (``"W"``, ``"sv"``, or the representations
    ``"WTW"`` and ``"WWT"``) of an edge in the full-matrix flow.

    >>> matrix_key("W", ("x", "h"))
    'W[x->h]'
    """
    if quantity not in ("W", "sv", "WTW", "WWT"):
        raise ValueError(f"quantity {quantity!r}: expected 'W', 'sv', 'WTW' or 'WWT'")
    return f"{quantity}[{_edge(edge)}]"


def node_key(quantity: str, node: Hashable) -> str:
    """The series name of ``quantity`` (``"rsm"``, ``"output"`` on the evaluation
    examples, or a ReLU node's ``"pattern"``) at a node of a simulated network.

    >>> node_key("rsm", "h1"), node_key("output", "y")
    ('rsm/h1', 'eval/output/y')
    """
    if quantity not in _NODE_PREFIXES:
        raise ValueError(f"quantity {quantity!r}: expected one of {tuple(_NODE_PREFIXES)}")
    return f"{_NODE_PREFIXES[quantity]}{node}"


def pathway_key(quantity: str, pathway: str) -> str:
    """The series name of ``quantity`` of a two-layer pathway (:func:`gdln.solve_balanced`).

    >>> pathway_key("W2W1", "x->h0->y")
    'W2W1/x->h0->y'
    """
    return f"{quantity}/{pathway}"


def context_key(label: str, *, evaluation: bool = False) -> str:
    """The series name of a simulation's loss within the context ``label``.

    >>> context_key("x0->y1"), context_key("x0->y1", evaluation=True)
    ('loss/x0->y1', 'eval/loss/x0->y1')
    """
    return f"{'eval/' if evaluation else ''}loss/{label}"


def edge_in_key(quantity: str, key: str) -> str | None:
    """The edge name in ``key`` when it names ``quantity`` of an edge (see :func:`edge_key`).

    >>> edge_in_key("W", "W/x->h"), edge_in_key("W", "x->h")
    ('x->h', None)
    """
    prefix = edge_key(quantity, "")
    return key[len(prefix) :] if key.startswith(prefix) else None


def _edge(edge: Edge | str) -> str:
    return edge if isinstance(edge, str) else edge_name(edge)
