r"""The architecture of a graph file: nodes with sizes, edges, gates and fixed edges.

A YAML file lists ``nodes:`` (``id``, ``size`` $|v|$, ``gated``, ``activation``) and ``edges:``
(``source``, ``target``, ``gated``, ``fixed``), each entry expanded by ``repeat:`` and
``let:``. Node-link JSON and GraphML carry the same attributes on a networkx graph.
Either way the result is a ``networkx.DiGraph`` with node attributes ``size`` and
``gated`` (and ``activation`` on a ReLU node: :data:`gdln.settings.ACTIVATIONS`; absent on
a linear one), edge attributes ``gated`` and, for an untrained edge $W_e = c\,I$,
``fixed``, checked by :func:`validate_graph`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import networkx as nx
import sympy as sp

from .._edge import EDGE_SEPARATOR
from .._errors import GraphSpecError, shorten
from ..settings._choices import ACTIVATIONS
from ..settings._declared import SECTIONS
from ..task._families import names_in
from ..task._problem import IndexFamily
from ._document import (
    MAX_COUNT,
    Scope,
    counted_repeat,
    describe,
    entry_of,
    expand,
    mapping,
    printable_name,
    sequence,
    simple_ids,
    text,
)

__all__ = ["DOCUMENT_KEYS", "graph_from_networkx", "read_architecture", "validate_graph"]

DOCUMENT_KEYS = frozenset(
    {
        "name",
        "description",
        "reproduces",
        "params",
        "derived",
        "symbols",
        "checks",
        "nodes",
        "edges",
        "datasets",
        "task",
        *SECTIONS,  # solve:, simulate:
        "schedule",
    }
)
"""The top-level keys of a YAML graph file."""

NODE_KEYS = {"id", "size", "gated", "activation", "repeat", "let"}
EDGE_KEYS = {"source", "target", "gated", "fixed", "repeat", "let"}
TRUE_WORDS, FALSE_WORDS = ("true", "yes", "1"), ("false", "no", "0")  # text flags in GraphML


def read_architecture(
    doc: Mapping[Any, Any], scope: Scope, families: list[IndexFamily] | None = None
) -> nx.DiGraph:
    """The graph of a YAML document's ``nodes:`` and ``edges:``.

    ``scope.names`` holds the document's parameters. Each ``repeat:`` entry is added
    to ``families`` (as an :class:`IndexFamily`) when that is given.
    """
    for key in doc:
        if key not in DOCUMENT_KEYS:
            raise scope.at(str(key)).fail(
                f"unknown key {key!r}; expected one of {sorted(DOCUMENT_KEYS)}"
            )
    name = (
        printable_name(text(doc["name"], scope.at("name")), scope.at("name"), what="name")
        if "name" in doc
        else Path(scope.source).stem
    )
    graph = nx.DiGraph(name=name)
    found = families if families is not None else []
    for part, add in (("nodes", _add_nodes), ("edges", _add_edges)):
        if part not in doc:
            raise scope.at(part).fail(f"missing key {part!r}")
        for index, entry in enumerate(sequence(doc[part], scope.at(part))):
            add(graph, entry, scope.at(part, index), found)
    return graph


def _add_nodes(graph: nx.DiGraph, entry: Any, scope: Scope, families: list[IndexFamily]) -> None:
    """One ``nodes:`` entry: a node per binding of its ``repeat:`` (a family if it has one)."""
    entry = entry_of(entry, scope, allowed=NODE_KEYS, required=("id", "size"))
    gated = _flag(entry.get("gated", False), scope.at("gated"))
    activation = _activation(entry.get("activation", "linear"), scope.at("activation"))
    members: list[Any] = []
    repeat = {str(v) for v in mapping(entry.get("repeat"), scope.at("repeat"))}
    # fast path: ids like "x{i}" and a size that does not depend on the binding
    ids = None if names_in(entry["size"]) & repeat else simple_ids(entry, scope, ("id",))
    if ids is not None:
        size = _node_size(scope, entry["size"])
        for (node,) in ids:
            members.append(_add_node(graph, node, size, gated, scope, activation))
    for here in () if ids is not None else expand(entry, scope):
        node = here.render_at("id", entry["id"], integer_ok=True)
        size = _node_size(here, entry["size"])
        members.append(_add_node(graph, node, size, gated, here, activation))
    _record_family(families, "node", entry, scope, (str(entry["id"]),), members)


def _node_size(here: Scope, expression: Any) -> int:
    """A node's ``size:``: a positive integer up to :data:`MAX_COUNT`."""
    size = here.number_at("size", expression)
    if not isinstance(size, int) or size <= 0:
        raise here.at("size").fail(f"size must be a positive integer, got {shorten(size)}")
    if size > MAX_COUNT:
        raise here.at("size").fail(f"size {shorten(size)} is above the limit of {MAX_COUNT}")
    return size


def _add_node(
    graph: nx.DiGraph, node: str, size: int, gated: bool, here: Scope, activation: str
) -> str:
    """One new node, refusing an id with the edge separator, one already used, or one
    that is not printable text; ``activation`` is kept as an attribute unless linear."""
    printable_name(node, here.at("id"), what="node id")
    if EDGE_SEPARATOR in node:
        raise here.at("id").fail(f"node id {node!r} must not contain '{EDGE_SEPARATOR}'")
    if node in graph:
        raise here.at("id").fail(f"duplicate node id {node!r}")
    graph.add_node(node, size=size, gated=gated)
    if activation != "linear":
        graph.nodes[node]["activation"] = activation
    return node


def _activation(value: Any, scope: Scope) -> str:
    """``activation:`` of a node: a name of :data:`~gdln.settings.ACTIVATIONS`."""
    if not isinstance(value, str) or value not in ACTIVATIONS:
        raise scope.fail(f"expected one of {', '.join(ACTIVATIONS)}, got {describe(value)}")
    return value


def _add_edges(graph: nx.DiGraph, entry: Any, scope: Scope, families: list[IndexFamily]) -> None:
    """One ``edges:`` entry: an edge per binding of its ``repeat:`` (a family if it has one)."""
    entry = entry_of(entry, scope, allowed=EDGE_KEYS, required=("source", "target"))
    gated = _flag(entry.get("gated", False), scope.at("gated"))
    members: list[Any] = []
    ids = None if "fixed" in entry else simple_ids(entry, scope, ("source", "target"))
    for u, v in ids or ():
        _add_edge(graph, u, v, gated, scope)
        members.append((u, v))
    for here in () if ids is not None else expand(entry, scope):
        u = here.render_at("source", entry["source"], integer_ok=True)
        v = here.render_at("target", entry["target"], integer_ok=True)
        _add_edge(graph, u, v, gated, here)
        if "fixed" in entry:
            value = here.at("fixed").number(entry["fixed"])
            graph.edges[u, v]["fixed"] = _fixed(value, graph, u, v, here.at("fixed"))
        members.append((u, v))
    templates = (str(entry["source"]), str(entry["target"]))
    _record_family(families, "edge", entry, scope, templates, members)


def _add_edge(graph: nx.DiGraph, u: str, v: str, gated: bool, here: Scope) -> None:
    """One edge between existing nodes, refusing a parallel edge."""
    for end, node in (("source", u), ("target", v)):
        if node not in graph:
            raise here.at(end).fail(f"unknown node {node!r}")
    if graph.has_edge(u, v):
        raise here.fail(f"duplicate edge {u}->{v} (parallel edges need a hidden node)")
    graph.add_edge(u, v, gated=gated)


def _record_family(
    families: list[IndexFamily],
    kind: str,
    entry: Mapping[str, Any],
    scope: Scope,
    templates: tuple[str, ...],
    members: list[Any],
) -> None:
    """Keep a ``repeat:`` entry (every range a count, no ``let:``) as an :class:`IndexFamily`."""
    if not counted_repeat(entry) or "let" in entry:
        return
    repeat = entry["repeat"]
    counts = tuple(scope.number(v) for v in repeat.values())
    written = tuple(repeat.values())
    family = IndexFamily(
        kind, scope.key, templates, tuple(map(str, repeat)), counts, written, tuple(members)
    )
    families.append(family)


def _flag(value: Any, scope: Scope) -> bool:
    """``gated:`` of a YAML entry: ``true`` or ``false``, nothing else."""
    if not isinstance(value, bool):
        raise scope.fail(f"expected true or false, got {describe(value)}")
    return value


def _fixed(value: Any, graph: nx.DiGraph, u: str, v: str, scope: Scope) -> Any:
    r"""The value $c$ of an untrained edge $W_e = c\,I$ (e.g. a ResNet's skip)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, sp.Expr)):
        raise scope.fail(f"fixed: expected a number, got {value!r}")
    su, sv = graph.nodes[u]["size"], graph.nodes[v]["size"]
    if su != sv:
        raise scope.fail(
            f"fixed edge {u}->{v} holds {value} times the identity, which needs equal "
            f"sizes, got |{u}| = {su} and |{v}| = {sv}"
        )
    return value


def graph_from_networkx(raw: nx.Graph, source: str) -> nx.DiGraph:
    """The architecture of a node-link JSON or GraphML file, as networkx read it.

    Nodes need a ``size``; ``gated`` (nodes, edges) and ``fixed`` (edges: a number or an
    expression without names such as ``"1/sqrt(4)"``) are optional.
    """
    scope = Scope(source, Path(source).parent)
    if raw.is_multigraph():
        raise scope.fail("parallel edges are not supported; use a hidden node")
    if not raw.is_directed():
        raise scope.fail("the graph is undirected; write it as a directed graph")
    meta = raw.graph if isinstance(raw.graph, dict) else {}  # node-link "graph": null
    name = meta.get("name", Path(source).stem)
    if isinstance(name, str):
        printable_name(name, scope.at("graph.name"), what="name")
    graph = nx.DiGraph(name=name)
    for node, attrs in raw.nodes(data=True):
        here = scope.at(f"nodes[{shorten(node)}]")
        node_id = text(node, here, integer_ok=True, what="a node id (text or an integer)")
        printable_name(node_id, here, what="node id")
        if node_id in graph:  # ids 1 and "1" (node-link): one id as text
            raise here.fail(f"node id {shorten(node_id)} is given twice (1 and '1' are one id)")
        size = _networkx_size(attrs, here.at("size"))
        graph.add_node(node_id, size=size, gated=_networkx_flag(attrs, here.at("gated")))
        activation = _activation(attrs.get("activation", "linear"), here.at("activation"))
        if activation != "linear":
            graph.nodes[node_id]["activation"] = activation
    for u, v, attrs in raw.edges(data=True):
        here = scope.at(f"edges[{str(u)!r}, {str(v)!r}]")
        u, v = str(u), str(v)
        graph.add_edge(u, v, gated=_networkx_flag(attrs, here.at("gated")))
        if "fixed" in attrs:
            value = here.at("fixed").number(attrs["fixed"])
            graph.edges[u, v]["fixed"] = _fixed(value, graph, u, v, here.at("fixed"))
    return graph


def _networkx_size(attrs: Mapping[str, Any], scope: Scope) -> int:
    if "size" not in attrs:
        raise scope.fail("missing node attribute 'size'")
    value = attrs["size"]
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise scope.fail(f"size {value!r} is not an integer")
    try:
        return int(value)
    except (TypeError, ValueError) as err:
        raise scope.fail(f"size {value!r} is not an integer") from err


def _networkx_flag(attrs: Mapping[str, Any], scope: Scope) -> bool:
    """``gated`` of a networkx node or edge: a boolean, 0 or 1, or such a word."""
    value = attrs.get("gated", False)
    if isinstance(value, str) and value.strip().lower() in TRUE_WORDS + FALSE_WORDS:
        return value.strip().lower() in TRUE_WORDS
    if isinstance(value, (bool, int, float)) and value in (0, 1):
        return bool(value)
    raise scope.fail(f"expected true or false, got {describe(value)}")


def validate_graph(graph: nx.DiGraph, source: str) -> None:
    """Refuse an empty or cyclic graph, bad sizes, gated inputs, ReLU inputs or outputs and
    isolated nodes."""
    if graph.number_of_nodes() == 0:
        raise GraphSpecError("the graph has no nodes", source=source, key="nodes")
    for node, size in graph.nodes(data="size"):
        if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= MAX_COUNT:
            raise GraphSpecError(
                f"size must be a positive integer of at most {MAX_COUNT}, got {shorten(size)}",
                source=source,
                key=f"node {node!r}",
            )
    if not nx.is_directed_acyclic_graph(graph):
        cycle = " -> ".join(str(u) for u, _ in nx.find_cycle(graph))
        raise GraphSpecError(f"the graph has a cycle: {cycle}", source=source, key="edges")
    pred, succ = graph._pred, graph._succ
    for node, data in graph.nodes(data=True):
        if not pred[node] and data.get("gated"):
            raise GraphSpecError(
                "an input node cannot carry a gate (inputs are fixed to data); gate its edges",
                source=source,
                key=f"node {node!r}",
            )
        if data.get("activation", "linear") != "linear" and not (pred[node] and succ[node]):
            end = "an input" if not pred[node] else "an output"
            raise GraphSpecError(
                f"activation: {data['activation']} is for hidden nodes, and this is {end} "
                "node (inputs hold the data, outputs are linear in Eq. 1)",
                source=source,
                key=f"node {node!r}",
            )
    isolated = [n for n in graph.nodes if not pred[n] and not succ[n]]
    if isolated:
        raise GraphSpecError(
            f"node {isolated[0]!r} has no edges", source=source, key=f"node {isolated[0]!r}"
        )
