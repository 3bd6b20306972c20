"""A problem: an architecture graph with its task, the value every stage starts from.

It lives beside :class:`~gdln.task.Task`; :func:`gdln.load` reads one from a graph file.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from .._errors import GraphSpecError, TaskSpecError
from ..settings._declared import Settings
from ._examples import ExampleSet
from ._notebook import problem_html
from ._schedule import Schedule
from ._task import Task

__all__ = ["IndexFamily", "Problem", "require_linear"]


def require_linear(graph: nx.DiGraph, *, source: str | None = None) -> None:
    """Refuse a graph with a ReLU node (``activation: relu``) where the path theory is asked for.

    The theory of Saxe, Sodhani & Lewallen (2022), Eqs. (3)-(10), holds for gated *linear*
    networks; a ReLU network is one only while its patterns are frozen, and those come from
    a run (``gdln simulate --record-patterns``, then ``gdln extract``).

    Parameters
    ----------
    graph
        The architecture.
    source
        The file it was read from, named in the message.

    Raises
    ------
    GraphSpecError
        A node of ``graph`` has ``activation: relu``.
    """
    for node, activation in graph.nodes(data="activation"):
        if activation not in (None, "linear"):
            raise GraphSpecError(
                f"activation: {activation}: the path theory (Eqs. 3-10) is for gated linear "
                "networks; simulate this one (gdln simulate --record-patterns) and read its "
                "gated network off the run (gdln extract RUN.npz)",
                source=source,
                key=f"node {node!r}",
            )


@dataclass(frozen=True)
class IndexFamily:
    """The nodes (or edges) of one ``repeat:`` entry of the graph, in binding order.

    Attributes
    ----------
    kind
        ``"node"`` or ``"edge"``.
    key
        Where the entry is written, e.g. ``nodes[0]``.
    templates
        The id template (a node) or the source and target templates (an edge).
    variables, counts, written
        Each ``repeat:`` variable, its number of values (``range(count)``) and its count
        as written (an expression such as ``"M"``).
    members
        The node ids or edges, one per binding, the last variable running fastest.
    """

    kind: str
    key: str
    templates: tuple[str, ...]
    variables: tuple[str, ...]
    counts: tuple[int, ...]
    written: tuple[Any, ...]
    members: tuple[Hashable, ...]


@dataclass(frozen=True)
class Problem:
    r"""An architecture graph with its task, as read from a file.

    Parameters
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
        Every setting as the file presets it (its ``solve:`` and ``simulate:``
        sections) over the declared defaults (:class:`gdln.settings.Settings`); the
        public functions take each one as a keyword that overrides it.
    families
        The graph's ``repeat:`` entries (index sets and members), for the symmetry
        quotient of :func:`gdln.reduce`.
    document
        The YAML document as read (empty for node-link JSON and GraphML).
    reader
        How a task file is read for this problem (:func:`gdln.graphfile.with_task`, set
        by :func:`gdln.load`), for :meth:`with_task`; ``None`` for a problem made in
        memory.
    schedule
        The order in which the contexts are trained (the file's ``schedule:`` section,
        :class:`~gdln.task.Schedule`), or ``None``: every context at its probability
        all along.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Sec. 2: the gated deep linear network, its node and
    edge gates, and the task of gated datasets.
    """

    graph: nx.DiGraph
    task: Task | None
    source: str = "<memory>"
    params: Mapping[str, Any] = field(default_factory=dict)
    settings: Settings = field(default_factory=Settings)
    families: tuple[IndexFamily, ...] = field(default=(), repr=False)
    document: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    reader: Callable[[Problem, str | Path], Problem] | None = field(
        default=None, repr=False, compare=False
    )
    schedule: Schedule | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        g = self.graph
        return (
            f"Problem({self.source!r}, nodes={g.number_of_nodes()}, "
            f"edges={g.number_of_edges()}, task={self.task!r})"
        )

    def _repr_html_(self) -> str:
        """Nodes, edges and contexts as tables, for Jupyter (``task._notebook``)."""
        return problem_html(self)

    @property
    def name(self) -> str:
        """The graph's ``name``, else the file's name without its suffix."""
        return str(self.graph.graph.get("name", Path(self.source).stem))

    def with_task(self, task: str | Path) -> Problem:
        """This problem with the task of a task file instead of its own, read by the reader
        that read the problem (:func:`gdln.graphfile.with_task`).

        Parameters
        ----------
        task
            A task file, read against this graph with these parameter values.

        Returns
        -------
        Problem
            The same graph, parameters and settings with the file's task.

        Raises
        ------
        TaskSpecError
            The problem was not read from a file, or the task file is unreadable,
            malformed or does not fit the graph.
        """
        if self.reader is None:
            raise TaskSpecError(
                "a task file is read for a problem loaded from a graph file (gdln.load)",
                source=self.source,
            )
        return self.reader(self, task)

    def require_task(self) -> Task:
        """The task, refusing a problem that has none.

        Returns
        -------
        Task
            :attr:`task`.

        Raises
        ------
        TaskSpecError
            The file has no ``task:`` and no task file was given.
        """
        if self.task is None:
            raise TaskSpecError(
                "no task: add a 'task:' section or pass a task file", source=self.source
            )
        return self.task

    def require_schedule(self) -> Schedule:
        """The file's schedule, refusing a problem that has none.

        Returns
        -------
        Schedule
            :attr:`schedule`.

        Raises
        ------
        TaskSpecError
            The file has no ``schedule:`` section.
        """
        if self.schedule is None:
            raise TaskSpecError(
                "no schedule: add a 'schedule:' section or pass one "
                "(gdln.task.blocked, gdln.task.interleaved)",
                source=self.source,
            )
        return self.schedule

    def examples(self) -> ExampleSet:
        """The task as raw examples (see :meth:`gdln.Task.examples`).

        Returns
        -------
        ExampleSet
            Every example with its gates and weight, on the graph's nodes.

        Raises
        ------
        TaskSpecError
            The problem has no task, or a probability or gate is still symbolic (a
            parameter left unbound), naming the file.
        """
        try:
            return self.require_task().examples(self.graph)
        except TaskSpecError as err:
            if err.source is not None:
                raise
            raise TaskSpecError(str(err), source=self.source) from err
