r"""Writing a :class:`~gdln.Problem` as a graph file that reads back to an equal problem.

:func:`dump` is the other half of :func:`~gdln.graphfile.parse` (networkx's ``readwrite``
pattern): ``parse(dump(problem))`` has the same graph (nodes with their sizes, gates and
activations, edges with their gates and fixed values, in the same order), the same task (contexts
with their labels, probabilities, gates, datasets and bindings; the datasets' examples,
weights or moments; random gates), the same parameter values and the same settings.

The file is written expanded: one entry per node, edge and context, never a ``repeat:``.
A problem read from a file with families therefore reads back without them, so the
symmetry quotient (``route: quotient``, ``--symbolic``) does not apply to the dumped file;
every other route gives the same dynamics. Exact values are written as expressions
(``1/3``, ``sqrt(185)/4``, ``q`` for a declared symbol), each checked to read back to the
value it writes; floats as the shortest decimal that reads back to the same float64
(which the reader then holds exactly). The parameters are written with their values
(``symbols:`` for symbols, ``derived:`` for the names the file derived); the settings a
file wrote, and any that differ from the declared default, in ``solve:`` and
``simulate:`` (settings without a file key, such as ``dtype``, are not written).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import networkx as nx
import numpy as np
import sympy as sp
import yaml
from sympy.printing.str import StrPrinter

from .._bounded._expressions import ExpressionError, as_sympy, evaluate
from .._edge import EDGE_SEPARATOR, edge_name
from .._errors import GraphSpecError, shorten
from ..settings._declared import Settings, declarations
from ..task._problem import Problem
from ..task._task import Context, Dataset, Task

__all__ = ["dump"]

DUMP_FORMATS = ("yaml",)
"""The formats :func:`dump` writes."""


def dump(problem: Problem, *, format: str = "yaml") -> str:
    """The text of a graph file that :func:`parse` reads back to an equal problem.

    Parameters
    ----------
    problem
        The problem to write: a graph with node sizes, gates and fixed edges, its task
        (or none), parameters and settings, and its ``schedule:`` section as the file
        wrote it.
    format
        ``"yaml"``, the graph-file format.

    Returns
    -------
    str
        The graph file, expanded (one entry per node, edge and context; see the module
        docstring for what it keeps).

    Raises
    ------
    GraphSpecError
        ``format`` is not ``"yaml"``, or the problem holds what a graph file cannot say:
        a node id that is not text or that holds a brace or ``->``, a value that is not a
        number or an expression of the file's grammar, a schedule not read from the
        problem's own file.

    Examples
    --------
    >>> from gdln.graphfile import parse
    >>> problem = parse("nodes: [{id: x, size: 2}, {id: y, size: 1}]\\n"
    ...                 "edges: [{source: x, target: y}]\\n", source="tiny.yaml")
    >>> print(dump(problem), end="")
    name: tiny
    nodes:
      - {id: x, size: 2}
      - {id: y, size: 1}
    edges:
      - {source: x, target: y}
    >>> dict(parse(dump(problem)).graph.nodes(data="size"))
    {'x': 2, 'y': 1}
    """
    if format not in DUMP_FORMATS:
        raise GraphSpecError(
            f"format {shorten(format)}: dump writes one of {', '.join(DUMP_FORMATS)}",
            source=problem.source,
        )
    writer = _Writer(problem)
    return yaml.dump(
        writer.document(),
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=None,
        allow_unicode=True,
        width=100,
    )


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, its lists indented under their key as the shipped files are."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> Any:
        return super().increase_indent(flow, False)


class _Printer(StrPrinter):
    """sympy values as expressions of the graph-file grammar (``abs``, ``min``, ``max``)."""

    def _print_Abs(self, expr: Any) -> str:
        return f"abs({self._print(expr.args[0])})"

    def _print_Min(self, expr: Any) -> str:
        return f"min({', '.join(self._print(a) for a in expr.args)})"

    def _print_Max(self, expr: Any) -> str:
        return f"max({', '.join(self._print(a) for a in expr.args)})"


class _Writer:
    """The document of one problem: :meth:`document`."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        params = dict(problem.params)
        self.symbols = {  # a declared symbol is the name bound to itself
            k: v for k, v in params.items() if isinstance(v, sp.Symbol) and v.name == k
        }
        extra = {
            s.name: s
            for s in _free_symbols(problem)
            if s.name not in self.symbols and s.name not in params
        }
        self.symbols.update(extra)
        self.names: dict[str, Any] = dict(self.symbols)

    def fail(self, key: str, message: str) -> GraphSpecError:
        return GraphSpecError(message, source=self.problem.source, key=key)

    # -- the document, top to bottom ---------------------------------------------------
    def document(self) -> dict[str, Any]:
        problem = self.problem
        written = problem.document or {}
        doc: dict[str, Any] = {"name": self.text(problem.name, "name")}
        for key in ("description", "reproduces"):
            if isinstance(written.get(key), str):
                doc[key] = written[key]
        derived_names = set(written.get("derived") or ()) if isinstance(written, Mapping) else set()
        params: dict[str, Any] = {}
        derived: dict[str, Any] = {}
        for name, value in problem.params.items():
            if name in self.symbols:
                continue
            where = derived if name in derived_names else params
            where[name] = self.value(value, f"params.{name}")
        if params:
            doc["params"] = params
        if self.symbols:
            doc["symbols"] = list(self.symbols)
        if derived:
            doc["derived"] = derived
        doc["nodes"] = self.nodes(problem.graph)
        doc["edges"] = self.edges(problem.graph)
        if problem.task is not None:
            doc["datasets"] = {
                self.text(name, f"datasets.{name}"): self.dataset(d, f"datasets.{name}")
                for name, d in problem.task.datasets.items()
            }
            doc["task"] = self.task(problem.task, problem.graph)
        doc.update(self.settings(problem.settings))
        if problem.schedule is not None:
            doc["schedule"] = self.schedule(problem, written)
        return doc

    def schedule(self, problem: Problem, written: Mapping[str, Any]) -> Any:
        """The ``schedule:`` section as the problem's own file wrote it (contexts named by
        label, durations in tau); a schedule made in Python or read elsewhere is refused."""
        section = written.get("schedule") if isinstance(written, Mapping) else None
        assert problem.schedule is not None
        if section is None or problem.schedule.source != problem.source:
            raise GraphSpecError(
                "schedule: dump writes a schedule: section only as a file wrote it; "
                "write a schedule made in Python with gdln.task.blocked/interleaved into "
                "the file by hand",
                source=problem.source,
            )
        return section

    def nodes(self, graph: nx.DiGraph) -> list[dict[str, Any]]:
        out = []
        for v, attrs in graph.nodes(data=True):
            entry: dict[str, Any] = {"id": self.node(v, "nodes"), "size": int(attrs["size"])}
            if attrs.get("gated"):
                entry["gated"] = True
            if attrs.get("activation", "linear") != "linear":  # a ReLU node
                entry["activation"] = self.text(attrs["activation"], "nodes")
            out.append(entry)
        return out

    def edges(self, graph: nx.DiGraph) -> list[dict[str, Any]]:
        out = []
        for u, v, attrs in graph.edges(data=True):
            entry: dict[str, Any] = {
                "source": self.node(u, "edges"),
                "target": self.node(v, "edges"),
            }
            if attrs.get("gated"):
                entry["gated"] = True
            if attrs.get("fixed") is not None:
                entry["fixed"] = self.value(attrs["fixed"], f"edges[{edge_name((u, v))}].fixed")
            out.append(entry)
        return out

    def dataset(self, dataset: Dataset, key: str) -> dict[str, Any]:
        if dataset.examples is not None:
            out: dict[str, Any] = {
                "examples": {
                    self.text(f, f"{key}.examples"): self.matrix(m, f"{key}.examples.{f}")
                    for f, m in dataset.examples.items()
                }
            }
            if dataset.weights is not None:
                weights = self.matrix(dataset.weights, f"{key}.weights")
                out["weights"] = [w for row in weights for w in row]
            return out
        assert dataset.moments_given is not None
        moments: dict[str, dict[str, Any]] = {}
        for (a, b), m in dataset.moments_given.items():
            moments.setdefault(a, {})[b] = self.matrix(m, f"{key}.moments.{a}.{b}")
        return {"moments": moments}

    def task(self, task: Task, graph: nx.DiGraph) -> dict[str, Any]:
        gated: list[Hashable] = [v for v, g in graph.nodes(data="gated") if g]
        gated += [(u, v) for u, v, g in graph.edges(data="gated") if g]
        contexts = [
            self.context(c, k, gated, task.random_gates) for k, c in enumerate(task.contexts)
        ]
        out: dict[str, Any] = {"contexts": contexts}
        if task.random_gates:
            out["random_gates"] = [
                {
                    "item": self.item(item),
                    "p": self.value(p, f"task.random_gates.{self.item(item)}"),
                }
                for item, p in task.random_gates.items()
            ]
        return out

    def context(
        self, c: Context, k: int, gated: Sequence[Hashable], random: Mapping[Hashable, Any]
    ) -> dict[str, Any]:
        key = f"task.contexts[{k}]"
        entry: dict[str, Any] = {
            "label": self.text(c.label, f"{key}.label"),
            "probability": self.value(c.probability, f"{key}.probability"),
            "dataset": self.text(c.dataset, f"{key}.dataset"),
        }
        values = {item: c.gates.get(item, 0) for item in gated}
        random_off = any(item in random and values[item] == 0 for item in gated)
        if gated and all(v in (0, 1) for v in values.values()) and not random_off:
            entry["active"] = [self.item(item) for item in gated if values[item] == 1]
        elif gated:
            entry["gates"] = {
                self.item(item): self.value(value, f"{key}.gates") for item, value in values.items()
            }
        if c.inputs:
            entry["inputs"] = {self.node(v, key): self.text(f, key) for v, f in c.inputs.items()}
        if c.targets:
            entry["targets"] = {self.node(v, key): self.text(f, key) for v, f in c.targets.items()}
        return entry

    def settings(self, settings: Settings) -> dict[str, dict[str, Any]]:
        default = Settings()
        sections: dict[str, dict[str, Any]] = {}
        for name, declaration in declarations().items():
            if declaration.file_key is None:
                continue
            value = getattr(settings, name)
            if name not in settings.written and value == getattr(default, name):
                continue
            section, key = declaration.file_key.split(".", 1)
            sections.setdefault(section, {})[key] = self.setting(value, declaration.file_key)
        return sections

    # -- values --------------------------------------------------------------------------
    def setting(self, value: Any, key: str) -> Any:
        if value is None or isinstance(value, str | bool):
            return value
        if isinstance(value, Mapping):  # b0 per edge
            return {
                (edge_name(k) if isinstance(k, tuple) else self.text(k, key)): self.value(v, key)
                for k, v in value.items()
            }
        return self.value(value, key)

    def value(self, value: Any, key: str) -> Any:
        """A number as the file writes it: an int, a float, or an expression's text."""
        if isinstance(value, bool | np.bool_):
            return bool(value)
        if isinstance(value, int | np.integer):
            return int(value)
        if isinstance(value, float | np.floating | sp.Float):
            number = float(value)
            if not math.isfinite(number):
                raise self.fail(key, f"{number!r} is not a finite number")
            whole = number.is_integer() and abs(number) < 2**53
            return int(number) if whole else number  # 40.0 as 40: the file reads one value
        if isinstance(value, Fraction):
            value = sp.Rational(value.numerator, value.denominator)
        if isinstance(value, str):
            return repr(value)  # a text, as the text expression that reads back to it
        if isinstance(value, sp.Integer):
            return int(value)
        if isinstance(value, sp.Rational):
            return f"{value.p}/{value.q}"
        if isinstance(value, sp.Basic):
            text = _Printer().doprint(value)
            try:
                back = evaluate(text, self.names)
            except (ExpressionError, GraphSpecError) as err:
                raise self.fail(
                    key, f"cannot write {shorten(value)} as an expression: {err}"
                ) from None
            if back != value and sp.simplify(as_sympy(back) - value) != 0:
                raise self.fail(key, f"{shorten(value)} reads back as {shorten(back)}")
            return text
        raise self.fail(key, f"expected a number, got {type(value).__name__} {shorten(value)}")

    def matrix(self, matrix: Any, key: str) -> list[list[Any]]:
        if isinstance(matrix, sp.MatrixBase):
            return [[self.value(x, key) for x in matrix.row(i)] for i in range(matrix.rows)]
        array = np.asarray(matrix, dtype=float)
        array = array.reshape(len(array), -1)
        return [[self.value(float(x), key) for x in row] for row in array]

    def text(self, value: Any, key: str) -> str:
        """A name a file writes as a template (an id, a label, a dataset or field name)."""
        if not isinstance(value, str):
            raise self.fail(
                key, f"expected a text name, got {type(value).__name__} {shorten(value)}"
            )
        if "{" in value or "}" in value:
            raise self.fail(
                key, f"{shorten(value)} holds a brace, which a graph file reads as a template"
            )
        return value

    def node(self, v: Hashable, key: str) -> str:
        text = self.text(v, key)
        if EDGE_SEPARATOR in text:
            raise self.fail(key, f"node id {shorten(text)} holds {EDGE_SEPARATOR!r}")
        return text

    def item(self, item: Hashable) -> str:
        """A gated node's id or an edge's name ``u->v``."""
        if isinstance(item, tuple):
            return edge_name((self.node(item[0], "task"), self.node(item[1], "task")))
        return self.node(item, "task")


def _free_symbols(problem: Problem) -> set[sp.Symbol]:
    """The symbols the problem's values hold (data, probabilities, gates, fixed values)."""
    found: set[sp.Symbol] = set()

    def add(value: Any) -> None:
        if isinstance(value, sp.Basic):
            found.update(s for s in value.free_symbols if isinstance(s, sp.Symbol))

    for _, _, fixed in problem.graph.edges(data="fixed"):
        add(fixed)
    task = problem.task
    if task is not None:
        for c in task.contexts:
            add(c.probability)
            for g in c.gates.values():
                add(g)
        for p in task.random_gates.values():
            add(p)
        for d in task.datasets.values():
            for m in (d.examples or {}).values():
                add(m if isinstance(m, sp.Basic) else None)
            for m in (d.moments_given or {}).values():
                add(m if isinstance(m, sp.Basic) else None)
            add(d.weights if isinstance(d.weights, sp.Basic) else None)
    return found
