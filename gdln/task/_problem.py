"""A problem: an architecture graph with its task, the value every stage starts from.

It lives beside :class:`~gdln.task.Task`; :func:`gdln.load` reads one from a graph file.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from .._errors import TaskSpecError
from ..settings._declared import Settings
from ._examples import ExampleSet
from ._notebook import problem_html
from ._schedule import Schedule
from ._task import Task

__all__ = ["IndexFamily", "Problem"]


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
