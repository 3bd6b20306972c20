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

Reading is split by what is read: the file and its parameters (``_document``), the
architecture (``_graph``), the datasets (``_datasets``), the gates (``_gates``) and the
task (``_tasks``); this module puts them together into a :class:`~gdln.Problem` (which
lives beside the task, in :mod:`gdln.task`).

Every problem raises :class:`~gdln.GraphSpecError` or :class:`~gdln.TaskSpecError`
naming the file, the key and the value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import networkx as nx

from .._bounded._limits import Limits, use_limits
from .._errors import GraphSpecError, TaskSpecError
from ..settings._declared import Settings
from ..task._problem import IndexFamily, Problem
from ..task._task import Task
from ._document import Scope, parse_document, read_file, read_parameters, read_settings
from ._ends import check_ends
from ._graph import graph_from_networkx, read_architecture, validate_graph
from ._schedule import read_schedule
from ._shipped import find_graph
from ._tasks import read_task

__all__ = [
    "Problem",
    "load",
    "parse",
    "parse_params",
    "read_graph",
    "with_task",
]  # Problem: gdln.task's


def parse_params(pairs: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Parse command-line overrides such as ``["M=5", "K=3"]``.

    Parameters
    ----------
    pairs
        ``NAME=VALUE`` strings; the value stays text (an expression :func:`load`
        evaluates).

    Returns
    -------
    dict
        Name -> value text, for the ``params`` of :func:`load`; a later pair wins.

    Raises
    ------
    GraphSpecError
        A pair has no ``=`` or its name is not an identifier.
    """
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
    """Read a graph file (and optionally a separate task file) into a :class:`~gdln.Problem`.

    Parameters
    ----------
    path
        ``.yaml``/``.yml`` graph file, networkx node-link ``.json``, or ``.graphml``; or
        the name of a graph shipped with gdln (``"routing"``,
        :func:`~gdln.graphfile.shipped_graphs`). A file that exists wins over a name.
    params
        Overrides of the file's parameters (values may be expressions).
    task
        A task file (YAML with ``datasets:`` and ``task:``), replacing the file's own.
    limits
        Bounds on file size, nesting, YAML alias expansion, expressions and entries
        (default: :class:`~gdln.graphfile.Limits` from the ``GDLN_MAX_*`` environment
        variables).

    Returns
    -------
    Problem
        The graph (node sizes, gates, fixed edges), its task (or ``None``), the
        parameter values used and the file's settings.

    Raises
    ------
    GraphSpecError
        The graph file is unreadable, too large or malformed; the message names the
        file, the key and the value.
    TaskSpecError
        The task (in the graph file or in ``task``) is malformed.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Sec. 2: the gated network (nodes, edges, node and
    edge gates) and the task (contexts, datasets and their gating) a file describes.
    """
    with use_limits(limits):
        path = find_graph(path)
        return _problem(read_file(path), str(path), path.parent, params=params, task=task)


def parse(
    text: str | bytes,
    *,
    format: str = "yaml",
    source: str = "<text>",
    params: Mapping[str, Any] | None = None,
    task: str | Path | None = None,
    limits: Limits | None = None,
) -> Problem:
    """Read the text of a graph file into a :class:`~gdln.Problem` (:func:`load` of a text).

    :func:`load` is :func:`parse` of a file's text, read bounded; :func:`dump` writes the
    text that this reads back to an equal problem (networkx's ``readwrite`` pattern).

    Parameters
    ----------
    text
        The graph file's text (or bytes, UTF-8).
    format
        ``"yaml"`` (a graph file), ``"json"`` (networkx node-link) or ``"graphml"``.
    source
        What to call the text in messages (and ``Problem.source``); files it names
        (``npz:`` data) are found in this path's folder.
    params, task, limits
        As for :func:`load`.

    Returns
    -------
    Problem
        The graph, its task, the parameter values used and the settings, as :func:`load`
        returns them for a file holding ``text``.

    Raises
    ------
    GraphSpecError
        The text is beyond the limits (``file_bytes`` and the rest), malformed, or not in
        ``format``; the message names ``source``, the key and the value.
    TaskSpecError
        The task is malformed.

    Examples
    --------
    >>> problem = parse("nodes: [{id: x, size: 2}, {id: y, size: 1}]\\n"
    ...                 "edges: [{source: x, target: y}]\\n", source="tiny.yaml")
    >>> problem.name, dict(problem.graph.nodes(data="size"))
    ('tiny', {'x': 2, 'y': 1})
    """
    with use_limits(limits):
        document = parse_document(text, format, source=source)
        return _problem(document, source, Path(source).parent, params=params, task=task)


def _problem(
    document: Any,
    source: str,
    folder: Path,
    *,
    params: Mapping[str, Any] | None,
    task: str | Path | None,
) -> Problem:
    """The problem a parsed document describes (a YAML mapping, or a networkx graph)."""
    scope = Scope(source, folder)
    families: list[IndexFamily] = []
    if isinstance(document, nx.Graph):
        graph = graph_from_networkx(document, source)
        document, settings = {}, Settings()
        names = {  # for a task file: values, like a YAML file's parameters
            str(key): scope.at("params", str(key)).evaluate(value)
            for key, value in (params or {}).items()
        }
    else:
        names = read_parameters(document, params or {}, scope)
        scope = scope.bind(names)
        graph = read_architecture(document, scope, families)
        settings = read_settings(document, scope)
    validate_graph(graph, source)
    problem_task = None
    if "task" in document:
        problem_task = read_task(document, graph, _task_scope(scope))
        task_source = source
    if task is not None:
        problem_task = _read_task_file(Path(task), graph, params or {}, names)
        task_source = str(task)
    if problem_task is not None:
        check_ends(graph, problem_task, source=task_source)

    def phase_task(file: Path) -> Task:
        own = _read_task_file(file, graph, params or {}, names)
        check_ends(graph, own, source=str(file))
        return own

    schedule = read_schedule(document, scope, problem_task, phase_task)
    return Problem(
        graph=graph,
        task=problem_task,
        source=source,
        params=names,
        settings=settings,
        families=tuple(families),
        document=document,
        reader=with_task,
        schedule=schedule,
    )


def _task_scope(scope: Scope) -> Scope:
    return Scope(scope.source, scope.folder, scope.names, scope.key, TaskSpecError)


def _read_task_file(
    path: Path, graph: nx.DiGraph, overrides: Mapping[str, Any], names: Mapping[str, Any]
) -> Task:
    """A separate task file: its own parameters on top of the graph file's, and its task."""
    document = read_file(path, as_yaml=True, error=TaskSpecError)
    scope = Scope(str(path), path.parent, names)
    scope = scope.bind(read_parameters(document, overrides, scope))
    return read_task(document, graph, _task_scope(scope))


def with_task(problem: Problem, task: str | Path, *, limits: Limits | None = None) -> Problem:
    """``problem`` with the task of a task file instead of its own (same graph, parameters
    and settings), e.g. untrained routes to evaluate a run on (Fig. 4h).

    Parameters
    ----------
    problem
        A loaded problem.
    task
        A task file (YAML with ``datasets:`` and ``task:``), read against the problem's
        graph with the problem's parameter values.
    limits
        As for :func:`load`.

    Returns
    -------
    Problem
        A new problem: ``problem``'s graph, parameters and settings with the file's task.

    Raises
    ------
    TaskSpecError
        The task file is unreadable, malformed or does not fit the graph.
    """
    with use_limits(limits):
        new_task = _read_task_file(Path(task), problem.graph, {}, dict(problem.params))
        check_ends(problem.graph, new_task, source=str(task))
    return dataclasses.replace(problem, task=new_task)


def read_graph(path: str | Path, *, params: Mapping[str, Any] | None = None) -> nx.DiGraph:
    """Read only the architecture graph of a file (see :func:`load`).

    Parameters
    ----------
    path
        ``.yaml``/``.yml`` graph file, networkx node-link ``.json``, or ``.graphml``; or
        the name of a shipped graph, as for :func:`load`.
    params
        Overrides of the file's parameters (values may be expressions).

    Returns
    -------
    networkx.DiGraph
        ``load(path, params=params).graph``.

    Raises
    ------
    GraphSpecError
        As :func:`load`.
    """
    return load(path, params=params).graph
