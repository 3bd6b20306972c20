"""networkx node-link JSON and GraphML, read so that nothing in them is said twice.

networkx reads both formats last-wins: node-link JSON that lists a node twice, or a link
twice, merges their attributes; GraphML with two ``<node id="x">``, two ``<data>`` for
one attribute of an element (two elements with one key, or two keys with one name), two
declarations of one key or two ``<default>`` values keeps the last; a second ``<graph>``
is dropped. Node-link ids ``1`` and ``"1"`` are two networkx nodes but one gdln id (ids
are text). Each of these is refused here, before networkx builds the graph, with a message
naming the file and what is repeated.

JSON is parsed by :func:`~gdln._bounded._read.parse_json` (a key given twice in an
object is refused there); GraphML by :mod:`xml.etree.ElementTree` (expat: no external
entities, entity-expansion bombs refused), once to check it and once in networkx.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import networkx as nx

from .._bounded._read import parse_json, read_bytes, read_text
from .._errors import GraphSpecError, shorten, shorten_text

__all__ = ["parse_networkx", "read_networkx"]

_GRAPHML = "{http://graphml.graphdrawing.org/xmlns}"  # the namespace networkx reads


class _Repeated(Exception):
    """What a networkx file says twice."""


def read_networkx(path: Path, suffix: str) -> nx.Graph:
    """The graph of a node-link ``.json`` or a ``.graphml`` file, as networkx reads it.

    Parameters
    ----------
    path
        The file.
    suffix
        ``".json"`` or ``".graphml"`` (lower case).

    Returns
    -------
    networkx.Graph
        The graph, its nodes and edges each given once in the file.

    Raises
    ------
    GraphSpecError
        The file is unreadable, beyond a limit, malformed or says something twice.
    """
    data = read_text(path) if suffix == ".json" else read_bytes(path)
    return parse_networkx(data, suffix[1:], source=str(path))


def parse_networkx(data: str | bytes, fmt: str, *, source: str) -> nx.Graph:
    """The graph of node-link JSON text (``fmt`` ``"json"``) or a GraphML document
    (``"graphml"``), as networkx reads it; see :func:`read_networkx`."""
    try:
        if fmt == "json":
            text = data if isinstance(data, str) else data.decode("utf-8-sig")
            links = parse_json(text, source=source)
            return _node_link_graph(links)
        raw = data.encode("utf-8") if isinstance(data, str) else data
        _check_graphml(ElementTree.fromstring(raw))
        with warnings.catch_warnings():  # "No key type for id ...": read as text
            warnings.simplefilter("ignore")
            return nx.parse_graphml(raw)
    except GraphSpecError:
        raise
    except _Repeated as err:
        raise GraphSpecError(str(err), source=source) from None
    except (
        LookupError,  # this and the next two: a malformed node-link document
        AttributeError,
        TypeError,
        ValueError,
        nx.NetworkXError,
        ElementTree.ParseError,  # malformed XML, entity bombs, external entities
    ) as err:
        raise GraphSpecError(
            f"cannot read graph: {shorten_text(str(err), 160)}", source=source
        ) from err


def _node_link_graph(links: Any) -> nx.Graph:
    """networkx's graph of a node-link document, each node and link given once."""
    if isinstance(links, Mapping) and "links" in links and "edges" in links:
        raise _Repeated("holds both 'links' and 'edges'; a node-link file lists its edges once")
    edges = "links" if isinstance(links, Mapping) and "links" in links else "edges"
    if isinstance(links, Mapping):
        ids = [n.get("id") for n in links.get("nodes", ()) if isinstance(n, Mapping)]
        _once(ids, "node", _id_text)
        ends = [
            (e.get("source"), e.get("target"))
            for e in links.get(edges, ())
            if isinstance(e, Mapping) and "key" not in e  # keys: a multigraph, refused later
        ]
        _once(ends, "link", lambda e: f"{_id_text(e[0])}->{_id_text(e[1])}")
    return nx.node_link_graph(links, directed=True, edges=edges)


def _id_text(node: Any) -> str:
    """A node-link id as gdln reads it: text, an integer as its decimal text; anything
    else (refused later) as its ``repr``."""
    if isinstance(node, int) and not isinstance(node, bool):
        return str(node)
    return node if isinstance(node, str) else repr(node)


def _once(items: list[Any], what: str, text: Any) -> None:
    """Refuse two of ``items`` that read the same as text (``1`` and ``"1"``) or that
    networkx takes for one (``1`` and ``1.0``, equal values)."""
    by_text: dict[str, Any] = {}
    by_value: dict[Any, Any] = {}
    for item in items:
        key = text(item)
        first = by_text.get(key)
        if first is None:
            with contextlib.suppress(TypeError):  # an unhashable id: networkx refuses it
                first = by_value.get(item)
        if first is not None:
            spelled = (
                ""
                if repr(first) == repr(item)
                else (f" (written {shorten(first)} and {shorten(item)})")
            )
            raise _Repeated(
                f"the {what} {shorten(key)} is listed twice{spelled}; a node-link file "
                f"lists each {what} once"
            )
        by_text[key] = item
        with contextlib.suppress(TypeError):
            by_value[item] = item


def _check_graphml(root: ElementTree.Element) -> None:
    """Refuse a GraphML document that says one thing twice (module docstring)."""
    graphs = root.findall(f"{_GRAPHML}graph")
    if len(graphs) > 1:
        raise _Repeated(f"holds {len(graphs)} graphs; gdln reads a file of one <graph>")
    names: dict[str, str] = {}
    for key in root.findall(f"{_GRAPHML}key"):
        key_id = str(key.get("id"))
        if key_id in names:
            raise _Repeated(f'declares the key id="{shorten_text(key_id, 40)}" twice')
        names[key_id] = str(key.get("attr.name"))
        if len(key.findall(f"{_GRAPHML}default")) > 1:
            raise _Repeated(f'gives the key id="{shorten_text(key_id, 40)}" two defaults')
    nodes: set[Hashable] = set()
    for node in root.iter(f"{_GRAPHML}node"):
        node_id = node.get("id")
        if node_id in nodes:
            raise _Repeated(
                f"declares <node id={shorten(node_id)}> twice; a GraphML file declares "
                "each node once"
            )
        nodes.add(node_id)
    edges: set[tuple[Any, Any]] = set()
    for edge in root.iter(f"{_GRAPHML}edge"):
        ends = (edge.get("source"), edge.get("target"))
        if ends in edges:
            raise _Repeated(
                f"declares the edge {shorten_text(f'{ends[0]}->{ends[1]}', 80)} twice; "
                "parallel edges need a hidden node"
            )
        edges.add(ends)
    for element in root.iter():
        _check_data(element, names)


def _check_data(element: ElementTree.Element, names: Mapping[str, str]) -> None:
    """One ``<data>`` per attribute of ``element``: by key, and by the key's name."""
    seen: dict[str, str] = {}
    for data in element.findall(f"{_GRAPHML}data"):
        key = str(data.get("key"))
        name = names.get(key, key)
        if name in seen:
            owner = element.tag.removeprefix(_GRAPHML)
            which = element.get("id") or "/".join(
                str(element.get(end)) for end in ("source", "target") if element.get(end)
            )
            twice = (
                f'key="{shorten_text(key, 30)}"'
                if seen[name] == key
                else f'keys "{shorten_text(seen[name], 30)}" and "{shorten_text(key, 30)}"'
            )
            raise _Repeated(
                f"<{owner} {shorten_text(which, 60)}> gives {shorten(name, 40)} twice "
                f"({twice}); give each attribute once"
            )
        seen[name] = key
