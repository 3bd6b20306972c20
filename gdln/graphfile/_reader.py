"""Graph files: architectures and their tasks, read into networkx.

A graph file (YAML) lists parameters, nodes with sizes $|v|$, directed edges, which nodes
and edges carry gates, datasets and a task. Ids, sizes and probabilities are expressions
in the parameters (see :mod:`gdln.graphfile`), and ``repeat``/``let`` expand one entry into
many, so the routing network of Sec. 4 with M=100 domains is a few lines::

    name: routing
    params: {M: 7, K: 4, hidden: 64}
    nodes:
      - {id: "x{i}", size: 4, repeat: {i: M}}
      - {id: h1, size: hidden}
      - {id: h2, size: hidden}
      - {id: "y{j}", size: 7, repeat: {j: M}}
    edges:
      - {source: "x{i}", target: h1, gated: true, repeat: {i: M}}
      - {source: h1, target: h2}
      - {source: h2, target: "y{j}", gated: true, repeat: {j: M}}

networkx node-link JSON (``.json``) and GraphML (``.graphml``) with a ``size`` node
attribute load too; their task comes from a separate task file.

Every problem raises :class:`~gdln.GraphSpecError` or :class:`~gdln.TaskSpecError`
naming the file, the key and the value.
"""

from __future__ import annotations

import itertools
import math
import zipfile
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import networkx as nx
import numpy as np
import sympy as sp

from .._edge import EDGE_SEPARATOR
from .._errors import GraphSpecError, TaskSpecError, shorten
from ..task._examples import ExampleSet
from ..task._task import Context, Dataset, Task, hierarchy_dataset, whitened_dataset
from ._expressions import ExpressionError, evaluate, render
from ._limits import Limits, count_entries, use_limits
from ._safe_read import parse_json, parse_yaml, read_bytes, read_text

__all__ = ["Problem", "load", "parse_params", "read_graph"]

MAX_COUNT = 10**6  # largest node size, repeat count and number of bindings of one entry
BUILTIN_DATASETS: dict[str, Callable[..., Dataset]] = {
    "hierarchy": hierarchy_dataset,
    "whitened": whitened_dataset,
}


@dataclass(frozen=True)
class Problem:
    r"""An architecture graph with its task, as read from a file.

    Attributes
    ----------
    graph
        ``networkx.DiGraph``; node attributes ``size`` (int) and ``gated`` (bool), edge
        attributes ``gated`` (bool) and, for an untrained edge $W_e = c\,I$, ``fixed``
        ($c$, exact); graph attribute ``name``.
    task
        The task, or ``None`` if the file has none.
    source
        The file it was read from.
    params
        The parameter values used (file defaults updated by overrides).
    settings
        Defaults for solving (``init``, ``t_max``, ``lr``) given in the file's ``solve:``.
    """

    graph: nx.DiGraph
    task: Task | None
    source: str = "<memory>"
    params: Mapping[str, Any] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        g = self.graph
        return (
            f"Problem({self.source!r}, nodes={g.number_of_nodes()}, "
            f"edges={g.number_of_edges()}, task={self.task!r})"
        )

    @property
    def name(self) -> str:
        return str(self.graph.graph.get("name", Path(self.source).stem))

    def require_task(self) -> Task:
        if self.task is None:
            raise TaskSpecError(
                "no task: add a 'task:' section or pass a task file", source=self.source
            )
        return self.task

    def examples(self) -> ExampleSet:
        """The task as raw examples (see :meth:`gdln.Task.examples`)."""
        try:
            return self.require_task().examples(self.graph)
        except TaskSpecError as err:
            if err.source is not None:
                raise
            raise TaskSpecError(str(err), source=self.source) from err


def parse_params(pairs: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Parse command-line overrides such as ``["M=5", "K=3"]``."""
    params: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip().isidentifier():
            raise GraphSpecError(f"--param {pair!r}: expected NAME=VALUE, e.g. M=5")
        params[name.strip()] = value.strip()
    return params


def load(
    path: str | Path,
    *,
    params: Mapping[str, Any] | None = None,
    task: str | Path | None = None,
    limits: Limits | None = None,
) -> Problem:
    """Read a graph file (and optionally a separate task file) into a :class:`Problem`.

    Parameters
    ----------
    path
        ``.yaml``/``.yml`` graph file, networkx node-link ``.json``, or ``.graphml``.
    params
        Overrides of the file's parameters (values may be expressions).
    task
        A task file (YAML with ``datasets:`` and ``task:``), replacing the file's own.
    limits
        Bounds on file size, nesting, YAML alias expansion and expressions (default:
        :class:`~gdln.graphfile.Limits` from the ``GDLN_MAX_*`` environment variables).
    """
    with use_limits(limits):
        return _load(Path(path), params=params, task=task)


def _load(path: Path, *, params: Mapping[str, Any] | None, task: str | Path | None) -> Problem:
    source = str(path)
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        doc = _read_yaml(path)
        reader = _Reader(source, path.parent)
        names = reader.parameters(doc, params or {})
        graph = reader.graph(doc, names)
        settings = reader.settings(doc, names)
    elif suffix in (".json", ".graphml"):
        graph = _read_networkx(path)
        doc, names, settings = {}, dict(params or {}), {}
        reader = _Reader(source, path.parent)
    else:
        raise GraphSpecError(
            f"unknown file type {path.suffix!r}; expected .yaml, .json or .graphml",
            source=source,
        )
    _validate_graph(graph, source)
    parsed_task = reader.task(doc, names, graph) if "task" in doc else None
    if task is not None:
        task_path = Path(task)
        task_doc = _read_yaml(task_path, cls=TaskSpecError, what="task file")
        task_reader = _Reader(str(task_path), task_path.parent)
        task_names = task_reader.parameters(task_doc, params or {}, base=names)
        parsed_task = task_reader.task(task_doc, task_names, graph)
    return Problem(graph=graph, task=parsed_task, source=source, params=names, settings=settings)


def read_graph(path: str | Path, *, params: Mapping[str, Any] | None = None) -> nx.DiGraph:
    """Read only the architecture graph of a file (see :func:`load`)."""
    return load(path, params=params).graph


def _read_yaml(
    path: Path, *, cls: type[GraphSpecError] = GraphSpecError, what: str = "file"
) -> dict[str, Any]:
    doc = parse_yaml(read_text(path, cls=cls, what=what), source=str(path), cls=cls)
    if not isinstance(doc, dict):
        raise GraphSpecError(
            f"expected a mapping at the top level, got {type(doc).__name__}", source=str(path)
        )
    return doc


def _read_networkx(path: Path) -> nx.DiGraph:
    source = str(path)
    try:
        if path.suffix.lower() == ".json":
            data = parse_json(read_text(path), source=source)
            raw = nx.node_link_graph(
                data, directed=True, edges="links" if "links" in data else "edges"
            )
        else:
            raw = nx.parse_graphml(read_bytes(path))
    except GraphSpecError:
        raise
    except (
        LookupError,  # this and the next two: a malformed node-link document
        AttributeError,
        TypeError,
        ValueError,
        nx.NetworkXError,
        ElementTree.ParseError,  # malformed XML, entity bombs, external entities
    ) as err:
        raise GraphSpecError(f"cannot read graph: {err}", source=source) from err
    if raw.is_multigraph():
        raise GraphSpecError("parallel edges are not supported; use a hidden node", source=source)
    meta = raw.graph if isinstance(raw.graph, dict) else {}  # node-link "graph": null
    graph = nx.DiGraph(name=meta.get("name", path.stem))
    for node, attrs in raw.nodes(data=True):
        key = f"nodes[{node!r}].size"
        if "size" not in attrs:
            raise GraphSpecError("missing node attribute 'size'", source=source, key=key)
        try:
            size = int(attrs["size"])
        except (TypeError, ValueError) as err:
            raise GraphSpecError(
                f"size {attrs['size']!r} is not an integer", source=source, key=key
            ) from err
        graph.add_node(str(node), size=size, gated=_flag(attrs.get("gated", False)))
    for u, v, attrs in raw.edges(data=True):
        graph.add_edge(str(u), str(v), gated=_flag(attrs.get("gated", False)))
        if "fixed" in attrs:
            graph.edges[str(u), str(v)]["fixed"] = _fixed_attribute(
                graph, str(u), str(v), attrs, source
            )
    return graph


def _fixed_attribute(
    graph: nx.DiGraph, u: str, v: str, attrs: Mapping[str, Any], source: str
) -> Any:
    r"""The ``fixed`` edge attribute of a networkx file: $c$ of $W_e = c\,I$ (a number or an
    expression without names, e.g. ``"1/sqrt(4)"``)."""
    key = f"edges[{u!r}, {v!r}].fixed"
    try:
        value = evaluate(attrs["fixed"], {})
    except ExpressionError as err:
        raise GraphSpecError(str(err), source=source, key=key) from err
    if isinstance(value, (bool, str)) or not isinstance(value, (int, float, sp.Expr)):
        raise GraphSpecError(
            f"fixed: expected a number, got {attrs['fixed']!r}", source=source, key=key
        )
    su, sv = graph.nodes[u]["size"], graph.nodes[v]["size"]
    if su != sv:
        raise GraphSpecError(
            f"fixed edge {u}->{v} holds {value} times the identity, which needs equal "
            f"sizes, got |{u}| = {su} and |{v}| = {sv}",
            source=source,
            key=key,
        )
    return value


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def _validate_graph(graph: nx.DiGraph, source: str) -> None:
    if graph.number_of_nodes() == 0:
        raise GraphSpecError("the graph has no nodes", source=source, key="nodes")
    for node, size in graph.nodes(data="size"):
        if not isinstance(size, int) or size <= 0 or size > MAX_COUNT:
            raise GraphSpecError(
                f"size must be a positive integer of at most {MAX_COUNT}, got {size!r}",
                source=source,
                key=f"node {node!r}",
            )
    if not nx.is_directed_acyclic_graph(graph):
        cycle = " -> ".join(str(u) for u, _ in nx.find_cycle(graph))
        raise GraphSpecError(f"the graph has a cycle: {cycle}", source=source, key="edges")
    for node in graph.nodes:
        if graph.in_degree(node) == 0 and graph.nodes[node].get("gated"):
            raise GraphSpecError(
                "an input node cannot carry a gate (inputs are fixed to data); gate its edges",
                source=source,
                key=f"node {node!r}",
            )
    isolated = [n for n in graph.nodes if graph.degree(n) == 0]
    if isolated:
        raise GraphSpecError(
            f"node {isolated[0]!r} has no edges", source=source, key=f"node {isolated[0]!r}"
        )


class _Reader:
    """Reads one YAML document, remembering where it is for error messages."""

    def __init__(self, source: str, folder: Path):
        self.source = source
        self.folder = folder
        self.context_keys: list[str] = []  # per context of the task: where it was written
        self.entries = 0  # nodes, edges, contexts, ... after repeat: bounded by Limits.entries

    def fail(
        self, message: str, key: str, cls: type[GraphSpecError] = GraphSpecError
    ) -> GraphSpecError:
        return cls(message, source=self.source, key=key)

    def eval(
        self,
        text: Any,
        names: Mapping[str, Any],
        key: str,
        cls: type[GraphSpecError] = GraphSpecError,
    ) -> Any:
        try:
            return evaluate(text, names)
        except ExpressionError as err:
            raise self.fail(str(err), key, cls) from err

    def render(
        self,
        text: Any,
        names: Mapping[str, Any],
        key: str,
        cls: type[GraphSpecError] = GraphSpecError,
    ) -> str:
        try:
            return render(text, names)
        except ExpressionError as err:
            raise self.fail(str(err), key, cls) from err

    # -- parameters --------------------------------------------------------------
    def parameters(
        self,
        doc: Mapping[str, Any],
        overrides: Mapping[str, Any],
        base: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        declared = self.mapping(doc.get("params", {}), "params")
        names: dict[str, Any] = dict(base or {})
        for index, symbol in enumerate(self.sequence(doc.get("symbols", []), "symbols")):
            name = str(symbol)
            if not name.isidentifier():
                raise self.fail(f"symbol {name!r} is not a name", f"symbols[{index}]")
            if name in overrides:  # --param NAME=VALUE binds a declared symbol to a value
                names[name] = self.eval(overrides[name], names, f"symbols[{index}] ({name})")
            else:
                names[name] = sp.Symbol(name, positive=True)
        unknown = set(overrides) - set(declared) - set(names)
        if unknown:
            known = ", ".join(sorted(declared)) or "none"
            raise self.fail(
                f"unknown parameter {sorted(unknown)[0]!r} (declared: {known})", "params"
            )
        for name, value in declared.items():
            text = overrides.get(name, value)
            names[name] = self.eval(text, names, f"params.{name}")
        for name, text in self.mapping(doc.get("derived", {}), "derived").items():
            names[name] = self.eval(text, names, f"derived.{name}")
        for index, check in enumerate(self.sequence(doc.get("checks", []), "checks")):
            text, message = (
                (check.get("expr"), check.get("message"))
                if isinstance(check, dict)
                else (check, None)
            )
            if not self.eval(text, names, f"checks[{index}]"):
                shown = ", ".join(
                    f"{k}={v}" for k, v in names.items() if not isinstance(v, sp.Symbol)
                )
                raise self.fail(
                    f"{message or 'check failed'}: {text} is false for {shown}", f"checks[{index}]"
                )
        return names

    def settings(self, doc: Mapping[str, Any], names: Mapping[str, Any]) -> dict[str, Any]:
        raw = self.mapping(doc.get("solve", {}), "solve")
        allowed = {"init", "t_max", "lr", "lump"}
        out: dict[str, Any] = {}
        for key, value in raw.items():
            if key not in allowed:
                raise self.fail(
                    f"unknown setting {key!r}; expected one of {sorted(allowed)}", "solve"
                )
            out[key] = value if key == "lump" else self.eval(value, names, f"solve.{key}")
        return out

    # -- structure helpers -----------------------------------------------------------
    def mapping(
        self, value: Any, key: str, cls: type[GraphSpecError] = GraphSpecError
    ) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(
                f"expected a mapping, got {type(value).__name__} {shorten(value)}", key, cls
            )
        return value

    def sequence(
        self, value: Any, key: str, cls: type[GraphSpecError] = GraphSpecError
    ) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(
                f"expected a list, got {type(value).__name__} {shorten(value)}", key, cls
            )
        return value

    def expand(
        self,
        entry: Mapping[str, Any],
        names: Mapping[str, Any],
        key: str,
        cls: type[GraphSpecError] = GraphSpecError,
    ) -> Iterator[dict[str, Any]]:
        """Iterate over the bindings of an entry's ``repeat`` and ``let``."""
        repeat = self.mapping(entry.get("repeat", {}), f"{key}.repeat", cls)
        ranges: list[tuple[str, list[Any]]] = []
        for var, spec in repeat.items():
            if isinstance(spec, list):
                values = [self.eval(v, names, f"{key}.repeat.{var}", cls) for v in spec]
            else:
                count = (
                    spec
                    if isinstance(spec, bool)
                    else self.eval(spec, names, f"{key}.repeat.{var}", cls)
                )
                if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                    raise self.fail(
                        f"repeat count must be a non-negative integer, got {count!r}",
                        f"{key}.repeat.{var}",
                        cls,
                    )
                if count > MAX_COUNT:
                    raise self.fail(
                        f"repeat count {shorten(count)} is above the limit of {MAX_COUNT}",
                        f"{key}.repeat.{var}",
                        cls,
                    )
                values = list(range(count))
            ranges.append((str(var), values))
        if math.prod(len(values) for _, values in ranges) > MAX_COUNT:
            counts = " x ".join(str(len(values)) for _, values in ranges)
            raise self.fail(
                f"{counts} repetitions are above the limit of {MAX_COUNT}", f"{key}.repeat", cls
            )
        self.entries += math.prod(len(values) for _, values in ranges)
        count_entries(self.entries, source=self.source, key=f"{key}.repeat", cls=cls)
        lets = self.mapping(entry.get("let", {}), f"{key}.let", cls)
        for combo in itertools.product(*(values for _, values in ranges)):
            local = dict(names)
            local.update({var: value for (var, _), value in zip(ranges, combo, strict=True)})
            for var, text in lets.items():
                local[str(var)] = self.eval(text, local, f"{key}.let.{var}", cls)
            yield local

    # -- graph -------------------------------------------------------------------------
    def graph(self, doc: Mapping[str, Any], names: Mapping[str, Any]) -> nx.DiGraph:
        allowed = {
            "name",
            "description",
            "params",
            "derived",
            "symbols",
            "checks",
            "nodes",
            "edges",
            "datasets",
            "task",
            "solve",
        }
        for key in doc:
            if key not in allowed:
                raise self.fail(f"unknown key {key!r}; expected one of {sorted(allowed)}", str(key))
        graph = nx.DiGraph(name=str(doc.get("name", Path(self.source).stem)))
        if "nodes" not in doc:
            raise self.fail("missing key 'nodes'", "nodes")
        for index, entry in enumerate(self.sequence(doc["nodes"], "nodes")):
            key = f"nodes[{index}]"
            entry = self.mapping(entry, key)
            self.only(entry, {"id", "size", "gated", "repeat", "let"}, key)
            for field_name in ("id", "size"):
                if field_name not in entry:
                    raise self.fail(f"missing '{field_name}'", key)
            for local in self.expand(entry, names, key):
                node = self.render(entry["id"], local, f"{key}.id")
                if EDGE_SEPARATOR in node:
                    raise self.fail(f"node id {node!r} must not contain '->'", f"{key}.id")
                if node in graph:
                    raise self.fail(f"duplicate node id {node!r}", f"{key}.id")
                size = entry["size"]  # YAML's true is no size, though eval makes it 1
                size = size if isinstance(size, bool) else self.eval(size, local, f"{key}.size")
                if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
                    raise self.fail(
                        f"size must be a positive integer, got {shorten(size)}", f"{key}.size"
                    )
                if size > MAX_COUNT:
                    raise self.fail(
                        f"size {shorten(size)} is above the limit of {MAX_COUNT}", f"{key}.size"
                    )
                graph.add_node(node, size=size, gated=bool(entry.get("gated", False)))
        if "edges" not in doc:
            raise self.fail("missing key 'edges'", "edges")
        for index, entry in enumerate(self.sequence(doc["edges"], "edges")):
            key = f"edges[{index}]"
            entry = self.mapping(entry, key)
            self.only(entry, {"source", "target", "gated", "fixed", "repeat", "let"}, key)
            for field_name in ("source", "target"):
                if field_name not in entry:
                    raise self.fail(f"missing '{field_name}'", key)
            for local in self.expand(entry, names, key):
                u = self.render(entry["source"], local, f"{key}.source")
                v = self.render(entry["target"], local, f"{key}.target")
                for end, node in (("source", u), ("target", v)):
                    if node not in graph:
                        raise self.fail(f"unknown node {node!r}", f"{key}.{end}")
                if graph.has_edge(u, v):
                    raise self.fail(
                        f"duplicate edge {u}->{v} (parallel edges need a hidden node)", key
                    )
                graph.add_edge(u, v, gated=bool(entry.get("gated", False)))
                if "fixed" in entry:
                    graph.edges[u, v]["fixed"] = self.fixed(entry["fixed"], local, graph, u, v, key)
        return graph

    def fixed(
        self, text: Any, local: Mapping[str, Any], graph: nx.DiGraph, u: str, v: str, key: str
    ) -> Any:
        r"""The value c of an untrained edge with $W_e = c\,I$ (e.g. a ResNet's skip)."""
        value = self.eval(text, local, f"{key}.fixed")
        if isinstance(value, bool) or not isinstance(value, (int, float, sp.Expr)):
            raise self.fail(f"fixed: expected a number, got {value!r}", f"{key}.fixed")
        su, sv = graph.nodes[u]["size"], graph.nodes[v]["size"]
        if su != sv:
            raise self.fail(
                f"fixed edge {u}->{v} holds {value} times the identity, which needs equal "
                f"sizes, got |{u}| = {su} and |{v}| = {sv}",
                f"{key}.fixed",
            )
        return value

    def only(
        self,
        entry: Mapping[str, Any],
        allowed: set[str],
        key: str,
        cls: type[GraphSpecError] = GraphSpecError,
    ) -> None:
        for name in entry:
            if name not in allowed:
                raise self.fail(
                    f"unknown key {name!r}; expected one of {sorted(allowed)}", key, cls
                )

    # -- datasets and task ---------------------------------------------------------------
    def task(self, doc: Mapping[str, Any], names: Mapping[str, Any], graph: nx.DiGraph) -> Task:
        T = TaskSpecError
        self.context_keys = []
        datasets: dict[str, Dataset] = {}
        for name, spec in self.mapping(doc.get("datasets", {}), "datasets", T).items():
            datasets[str(name)] = self.dataset(str(name), spec, names, f"datasets.{name}")
        spec = self.mapping(doc.get("task"), "task", T)
        forms = [k for k in ("contexts", "examples", "npz") if k in spec]
        if len(forms) != 1:
            raise self.fail("give exactly one of 'contexts', 'examples' or 'npz'", "task", T)
        self._random = self.random_gates(spec.get("random_gates"), names, graph)
        if forms[0] == "contexts":
            contexts = self.contexts(spec["contexts"], names, graph, datasets)
        else:
            if forms[0] == "examples":
                rows = self.example_rows(spec["examples"], names, graph)
            else:
                rows = self.npz_rows(spec["npz"], graph)
            contexts, extra = self.group_examples(rows, graph)
            datasets.update(extra)
        task = Task(contexts=tuple(contexts), datasets=datasets, random_gates=self._random)
        self.check_probabilities(task)
        return task

    def random_gates(
        self, raw: Any, names: Mapping[str, Any], graph: nx.DiGraph
    ) -> dict[Hashable, Any]:
        """``task.random_gates``: items with independent Bernoulli(p) gates."""
        T = TaskSpecError
        items = self.gated_items(graph)
        out: dict[Hashable, Any] = {}
        for index, entry in enumerate(self.sequence(raw, "task.random_gates", T)):
            key = f"task.random_gates[{index}]"
            entry = self.mapping(entry, key, T)
            self.only(entry, {"item", "p", "repeat", "let"}, key, T)
            for field_name in ("item", "p"):
                if field_name not in entry:
                    raise self.fail(f"missing '{field_name}'", key, T)
            for local in self.expand(entry, names, key, T):
                name = self.render(entry["item"], local, f"{key}.item", T)
                item = self.gated_item(name, items, graph, f"{key}.item")
                p = self.eval(entry["p"], local, f"{key}.p", T)
                symbolic = isinstance(p, sp.Basic) and bool(p.free_symbols)
                if isinstance(p, bool) or not isinstance(p, (int, float, sp.Expr)):
                    raise self.fail(f"p of {name!r}: expected a number, got {p!r}", f"{key}.p", T)
                if not symbolic and not 0 <= float(p) <= 1:
                    raise self.fail(
                        f"survival probability p = {p} of {name!r} is outside [0, 1]",
                        f"{key}.p",
                        T,
                    )
                if item in out:
                    raise self.fail(f"{name!r} is listed twice", f"{key}.item", T)
                out[item] = p
        return out

    def dataset(self, name: str, spec: Any, names: Mapping[str, Any], key: str) -> Dataset:
        T = TaskSpecError
        spec = self.mapping(spec, key, T)
        forms = [k for k in ("builtin", "examples", "moments", "npz") if k in spec]
        if len(forms) > 1:
            raise self.fail(
                f"give one of 'builtin', 'examples', 'moments' or 'npz', not {forms}", key, T
            )
        if "builtin" in spec:
            which = spec["builtin"]
            if not isinstance(which, str) or which not in BUILTIN_DATASETS:
                raise self.fail(
                    f"unknown builtin dataset {which!r}; expected one of {sorted(BUILTIN_DATASETS)}",
                    f"{key}.builtin",
                    T,
                )
            settings = {
                str(k): self.eval(v, names, f"{key}.{k}", T)
                for k, v in spec.items()
                if k != "builtin"
            }
            try:
                return BUILTIN_DATASETS[which](name, **settings)
            except (TypeError, ValueError) as err:
                raise self.fail(f"builtin {which!r}: {err}", key, T) from err
        if "examples" in spec:
            fields_raw = self.mapping(spec["examples"], f"{key}.examples", T)
            examples = {
                f: self.matrix(v, names, f"{key}.examples.{f}") for f, v in fields_raw.items()
            }
            sizes = {m.rows for m in examples.values()}
            if not sizes:
                raise self.fail("no fields", f"{key}.examples", T)
            if len(sizes) != 1:
                raise self.fail(
                    f"fields have different numbers of examples: {sorted(sizes)}",
                    f"{key}.examples",
                    T,
                )
            weights = None
            if "weights" in spec:
                weights = self.matrix([spec["weights"]], names, f"{key}.weights").T
                if any(w.is_negative for w in weights) or weights.rows != sizes.pop():
                    raise self.fail(
                        "weights must be non-negative, one per example", f"{key}.weights", T
                    )
            return Dataset(
                name=name,
                fields={f: m.cols for f, m in examples.items()},
                examples=examples,
                weights=weights,
            )
        if "moments" in spec:
            table = self.mapping(spec["moments"], f"{key}.moments", T)
            moments: dict[tuple[str, str], Any] = {}
            fields: dict[str, int] = {}
            for a, row in table.items():
                for b, value in self.mapping(row, f"{key}.moments.{a}", T).items():
                    m = self.matrix(value, names, f"{key}.moments.{a}.{b}")
                    moments[(str(a), str(b))] = m
                    for f, dim in ((str(a), m.rows), (str(b), m.cols)):
                        if fields.setdefault(f, dim) != dim:
                            raise self.fail(
                                f"field {f!r} has dimension {dim} here but {fields[f]} elsewhere",
                                f"{key}.moments.{a}.{b}",
                                T,
                            )
            for f in fields:
                if (f, f) not in moments:
                    raise self.fail(
                        f"missing moment {f}.{f} (the second moment of field {f!r})",
                        f"{key}.moments",
                        T,
                    )
            return Dataset(name=name, fields=fields, moments_given=moments)
        if "npz" in spec:
            arrays = self.load_npz(spec["npz"], f"{key}.npz")
            for f, array in arrays.items():
                if not 1 <= array.ndim <= 2:
                    raise self.fail(
                        f"array {f!r} has shape {array.shape}; expected (examples, dimension)",
                        f"{key}.npz",
                        T,
                    )
            examples = {
                f: np.atleast_2d(a.astype(float).T).T for f, a in arrays.items() if f != "weights"
            }
            return Dataset(
                name=name,
                fields={f: a.shape[1] for f, a in examples.items()},
                examples=examples,
                weights=arrays.get("weights"),
            )
        raise self.fail("expected one of 'builtin', 'examples', 'moments' or 'npz'", key, T)

    def matrix(self, value: Any, names: Mapping[str, Any], key: str) -> sp.ImmutableMatrix:
        T = TaskSpecError
        rows = value if isinstance(value, list) else [value]
        if rows and not isinstance(rows[0], list):
            rows = [rows]
        if (
            not rows
            or not all(isinstance(row, list) for row in rows)
            or len({len(row) for row in rows}) != 1
            or not rows[0]
        ):
            raise self.fail(
                f"expected a number, a list or a list of equally long lists, got {value!r}", key, T
            )
        try:
            out = sp.ImmutableMatrix([[self.eval(x, names, key, T) for x in row] for row in rows])
        except GraphSpecError:
            raise
        except (ValueError, TypeError) as err:
            raise self.fail(
                f"expected a number, a list or a list of lists, got {value!r}", key, T
            ) from err
        return out

    def load_npz(self, name: Any, key: str) -> dict[str, np.ndarray]:
        if not isinstance(name, str) or not name:
            raise self.fail(f"expected a file name, got {name!r}", key, TaskSpecError)
        path = (self.folder / name).resolve()
        try:
            exists = path.is_file()
        except OSError as err:  # e.g. a name too long for the file system
            raise self.fail(f"cannot use file {name!r}: {err}", key, TaskSpecError) from err
        if not exists:
            raise self.fail(f"no such file {str(path)!r}", key, TaskSpecError)
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: np.asarray(data[k]) for k in data.files}
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
            raise self.fail(f"cannot read {str(path)!r}: {err}", key, TaskSpecError) from err
        for name, array in arrays.items():
            where = f"{key}[{name!r}]"
            if array.dtype.kind not in "biuf":
                raise self.fail(
                    f"{path.name}: array {name!r} holds {array.dtype} values; expected numbers",
                    where,
                    TaskSpecError,
                )
            bad = np.argwhere(~np.isfinite(array))
            if len(bad):
                index = tuple(int(i) for i in bad[0])
                raise self.fail(
                    f"{path.name}: array {name!r} has the non-finite value {array[index]} at "
                    f"index {list(index)}; data must be finite numbers",
                    where,
                    TaskSpecError,
                )
        return arrays

    def gated_items(self, graph: nx.DiGraph) -> dict[str, Hashable]:
        cached = getattr(self, "_gated", None)
        if cached is not None and cached[0] is graph:
            return cached[1]
        items: dict[str, Hashable] = {str(v): v for v in graph.nodes if graph.nodes[v].get("gated")}
        items.update(
            {f"{u}{EDGE_SEPARATOR}{v}": (u, v) for u, v, g in graph.edges(data="gated") if g}
        )
        self._gated = (graph, items)
        return items

    def gates(
        self, entry: Mapping[str, Any], local: Mapping[str, Any], graph: nx.DiGraph, key: str
    ) -> dict[Hashable, Any]:
        T = TaskSpecError
        items = self.gated_items(graph)
        if "active" in entry and "gates" in entry:
            raise self.fail(
                "give either 'active' (a list) or 'gates' (a complete mapping), not both", key, T
            )
        values: dict[Hashable, Any] = {}
        if "active" in entry:
            for ref in self.sequence(entry["active"], f"{key}.active", T):
                name = self.render(ref, local, f"{key}.active", T)
                values[self.gated_item(name, items, graph, f"{key}.active")] = 1
            return values
        given = self.mapping(entry.get("gates", {}), f"{key}.gates", T)
        random = getattr(self, "_random", {})
        for ref, raw in given.items():
            name = self.render(ref, local, f"{key}.gates", T)
            item = self.gated_item(name, items, graph, f"{key}.gates")
            value = self.eval(raw, local, f"{key}.gates.{name}", T)
            if value != 0 or item in random:
                values[item] = value
        named = {self.render(ref, local, f"{key}.gates", T) for ref in given}
        missing = [name for name in items if name not in named and items[name] not in random]
        if missing:
            raise self.fail(
                f"missing gate value for {missing[0]!r} (gated items need a value in every context or example; "
                f"or list the ones that are on with 'active:')",
                f"{key}.gates",
                T,
            )
        return values

    def gated_item(
        self, name: str, items: Mapping[str, Hashable], graph: nx.DiGraph, key: str
    ) -> Hashable:
        if name in items:
            return items[name]
        u, sep, v = name.partition(EDGE_SEPARATOR)
        exists = graph.has_edge(u, v) if sep else name in graph
        what = "edge" if sep else "node"
        reason = "is not gated (mark it 'gated: true')" if exists else "does not exist"
        raise self.fail(f"{what} {name!r} {reason}", key, TaskSpecError)

    def contexts(
        self, raw: Any, names: Mapping[str, Any], graph: nx.DiGraph, datasets: Mapping[str, Dataset]
    ) -> list[Context]:
        T = TaskSpecError
        out: list[Context] = []
        inputs = {v for v in graph.nodes if graph.in_degree(v) == 0}
        outputs = {v for v in graph.nodes if graph.out_degree(v) == 0}
        for index, entry in enumerate(self.sequence(raw, "task.contexts", T)):
            key = f"task.contexts[{index}]"
            entry = self.mapping(entry, key, T)
            self.only(
                entry,
                {
                    "repeat",
                    "let",
                    "probability",
                    "label",
                    "active",
                    "gates",
                    "dataset",
                    "inputs",
                    "targets",
                },
                key,
                T,
            )
            for field_name in ("probability", "dataset"):
                if field_name not in entry:
                    raise self.fail(f"missing '{field_name}'", key, T)
            for local in self.expand(entry, names, key, T):
                dataset = self.render(entry["dataset"], local, f"{key}.dataset", T)
                if dataset not in datasets:
                    raise self.fail(
                        f"unknown dataset {dataset!r}; defined: {sorted(datasets)}",
                        f"{key}.dataset",
                        T,
                    )
                data = datasets[dataset]
                binding: dict[str, dict[Hashable, str]] = {}
                for part, allowed in (("inputs", inputs), ("targets", outputs)):
                    binding[part] = {}
                    for ref, fld in self.mapping(entry.get(part, {}), f"{key}.{part}", T).items():
                        node = self.render(ref, local, f"{key}.{part}", T)
                        if node not in allowed:
                            kind = "an input" if part == "inputs" else "an output"
                            raise self.fail(f"{node!r} is not {kind} node", f"{key}.{part}", T)
                        if str(fld) not in data.fields:
                            raise self.fail(
                                f"dataset {dataset!r} has no field {fld!r}; fields: {sorted(data.fields)}",
                                f"{key}.{part}.{node}",
                                T,
                            )
                        if data.fields[str(fld)] != graph.nodes[node]["size"]:
                            raise self.fail(
                                f"field {fld!r} has dimension {data.fields[str(fld)]} but node {node!r} has size {graph.nodes[node]['size']}",
                                f"{key}.{part}.{node}",
                                T,
                            )
                        binding[part][node] = str(fld)
                repeated = ", ".join(f"{var}={local[str(var)]}" for var in entry.get("repeat", {}))
                self.context_keys.append(f"{key} ({repeated})" if repeated else key)
                probability = self.eval(entry["probability"], local, f"{key}.probability", T)
                label = self.render(
                    entry.get("label", ""), local, f"{key}.label", T
                ) or _default_label(binding, len(out))
                out.append(
                    Context(
                        label=label,
                        probability=probability,
                        gates=self.gates(entry, local, graph, key),
                        dataset=dataset,
                        inputs=binding["inputs"],
                        targets=binding["targets"],
                    )
                )
        if not out:
            raise self.fail("no contexts", "task.contexts", T)
        return out

    def example_rows(
        self, raw: Any, names: Mapping[str, Any], graph: nx.DiGraph
    ) -> list[dict[str, Any]]:
        T = TaskSpecError
        rows: list[dict[str, Any]] = []
        for index, entry in enumerate(self.sequence(raw, "task.examples", T)):
            key = f"task.examples[{index}]"
            entry = self.mapping(entry, key, T)
            self.only(
                entry, {"repeat", "let", "inputs", "targets", "active", "gates", "weight"}, key, T
            )
            for local in self.expand(entry, names, key, T):
                row: dict[str, Any] = {"key": key}
                for part in ("inputs", "targets"):
                    row[part] = {
                        self.render(node, local, f"{key}.{part}", T): self.matrix(
                            value, local, f"{key}.{part}.{node}"
                        )
                        for node, value in self.mapping(
                            entry.get(part, {}), f"{key}.{part}", T
                        ).items()
                    }
                row["gates"] = self.gates(entry, local, graph, key)
                row["weight"] = self.eval(entry.get("weight", 1), local, f"{key}.weight", T)
                weight = row["weight"]
                if not isinstance(weight, (int, sp.Expr)) or sp.sympify(weight).is_negative:
                    raise self.fail(
                        f"weight must be a non-negative number, got {row['weight']!r}",
                        f"{key}.weight",
                        T,
                    )
                rows.append(row)
        return rows

    def npz_rows(self, name: Any, graph: nx.DiGraph) -> list[dict[str, Any]]:
        arrays = self.load_npz(name, "task.npz")
        items = self.gated_items(graph)
        n = None
        for k, a in arrays.items():
            if a.ndim == 0 or (a.ndim > 2 and k.startswith(("inputs/", "targets/"))):
                raise self.fail(
                    f"array {k!r} has shape {a.shape}; expected one row per example",
                    "task.npz",
                    TaskSpecError,
                )
            n = n if n is not None else len(a)
            if len(a) != n:
                raise self.fail(
                    f"array {k!r} has {len(a)} rows, expected {n}", "task.npz", TaskSpecError
                )
        if n is None:
            raise self.fail("the file holds no arrays", "task.npz", TaskSpecError)
        random = getattr(self, "_random", {})
        missing = [g for g in items if f"gates/{g}" not in arrays and items[g] not in random]
        if missing:
            raise self.fail(
                f"missing gate value for {missing[0]!r}: no array 'gates/{missing[0]}'",
                "task.npz",
                TaskSpecError,
            )
        rows = []
        weights = arrays.get("weights", np.ones(n))
        for mu in range(n):
            row: dict[str, Any] = {"key": f"task.npz[{mu}]", "weight": float(weights[mu])}
            for part in ("inputs", "targets"):
                row[part] = {
                    k.split("/", 1)[1]: np.atleast_1d(arrays[k][mu]).astype(float)[None, :]
                    for k in arrays
                    if k.startswith(part + "/")
                }
            row["gates"] = {
                items[g]: float(arrays[f"gates/{g}"][mu])
                for g in items
                if f"gates/{g}" in arrays
                and (float(arrays[f"gates/{g}"][mu]) != 0 or items[g] in random)
            }
            rows.append(row)
        return rows

    def group_examples(
        self, rows: list[dict[str, Any]], graph: nx.DiGraph
    ) -> tuple[list[Context], dict[str, Dataset]]:
        """Examples sharing a gate pattern become one context with its own dataset."""
        T = TaskSpecError
        inputs = [v for v in graph.nodes if graph.in_degree(v) == 0]
        outputs = [v for v in graph.nodes if graph.out_degree(v) == 0]
        groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for row in rows:
            for part, allowed in (("inputs", inputs), ("targets", outputs)):
                for node, value in row[part].items():
                    if node not in allowed:
                        kind = "an input" if part == "inputs" else "an output"
                        raise self.fail(f"{node!r} is not {kind} node", f"{row['key']}.{part}", T)
                    size = graph.nodes[node]["size"]
                    if np.size(value) != size:
                        raise self.fail(
                            f"value has {np.size(value)} entries but node {node!r} has size {size}",
                            f"{row['key']}.{part}.{node}",
                            T,
                        )
            pattern = tuple(sorted((str(k), str(v)) for k, v in row["gates"].items()))
            groups.setdefault(pattern, []).append(row)
        total = sum(
            sp.nsimplify(r["weight"]) if not isinstance(r["weight"], float) else r["weight"]
            for r in rows
        )
        if total == 0:
            raise self.fail("the example weights sum to 0", "task", T)
        contexts, datasets = [], {}
        for index, members in enumerate(groups.values()):
            name = f"examples{index}"
            fields: dict[str, Any] = {}
            exact = all(
                isinstance(v, sp.MatrixBase)
                for r in members
                for p in ("inputs", "targets")
                for v in r[p].values()
            )
            for part, nodes in (("inputs", inputs), ("targets", outputs)):
                for node in nodes:
                    if not any(node in r[part] for r in members):
                        continue
                    size = graph.nodes[node]["size"]
                    cells = [r[part].get(node) for r in members]
                    if exact:
                        fields[node] = sp.ImmutableMatrix(
                            [list(c) if c is not None else [0] * size for c in cells]
                        )
                    else:
                        fields[node] = np.vstack(
                            [
                                np.asarray(c, dtype=float).reshape(1, -1)
                                if c is not None
                                else np.zeros((1, size))
                                for c in cells
                            ]
                        )
            weights_list = [r["weight"] for r in members]
            share = sum(weights_list)
            weights = (
                sp.ImmutableMatrix(weights_list) if exact else np.asarray(weights_list, dtype=float)
            )
            if not fields:
                fields["__none__"] = (
                    sp.ImmutableMatrix([[0]] * len(members))
                    if exact
                    else np.zeros((len(members), 1))
                )
            datasets[name] = Dataset(
                name=name,
                fields={f: _ncols(v) for f, v in fields.items()},
                examples=fields,
                weights=weights,
            )
            binding_in = {v: v for v in inputs if v in fields}
            binding_out = {v: v for v in outputs if v in fields}
            probability = share / total if not isinstance(total, float) else float(share) / total
            label = "context" + str(index) if len(groups) > 1 else "all"
            self.context_keys.append(f"{members[0]['key'].split('[')[0]} ({label})")
            contexts.append(
                Context(
                    label=label,
                    probability=probability,
                    gates=members[0]["gates"],
                    dataset=name,
                    inputs=binding_in,
                    targets=binding_out,
                )
            )
        return contexts, datasets

    def check_probabilities(self, task: Task) -> None:
        T = TaskSpecError
        total: Any = 0
        for index, c in enumerate(task.contexts):
            p = c.probability
            if isinstance(p, sp.Basic) and p.free_symbols:
                total = None
                continue
            value = float(p)
            if not 0 <= value <= 1:
                raise self.fail(
                    f"probability {p} of context {c.label!r} is outside [0, 1]",
                    f"{self.context_keys[index]}.probability",
                    T,
                )
            if total is not None:
                total = total + p
        if total is not None and abs(float(total) - 1) > 1e-9:
            raise self.fail(f"context probabilities sum to {total}, expected 1", "task", T)


def _ncols(value: Any) -> int:
    return value.cols if isinstance(value, sp.MatrixBase) else value.shape[1]


def _default_label(binding: Mapping[str, Mapping[Hashable, str]], index: int) -> str:
    sources = ",".join(str(v) for v in binding["inputs"])
    targets = ",".join(str(v) for v in binding["targets"])
    return f"{sources}->{targets}" if sources or targets else f"context{index}"
