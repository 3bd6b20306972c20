r"""The series a trajectory records: their names, and reading them by what they are.

A :class:`~gdln.Trajectory` keeps every recorded quantity in ``series``, one array per
name, axis 0 being time. The names are built here and only here (the ``*_key``
functions; ``tests/test_trajectory_keys.py`` scans the package for any other module
spelling one), and read through the accessors of :class:`SeriesAccessors`, which
:class:`~gdln.Trajectory` inherits: :meth:`~SeriesAccessors.variable`,
:meth:`~SeriesAccessors.context_losses`, :meth:`~SeriesAccessors.singular_values`, ...
So no other module spells or parses a name, and the names in saved files stay what they
always were.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from .._edge import Edge, edge_name
from ._errors import AmbiguousVariableError

__all__ = [
    "CONTEXT_LOSS",
    "EVAL_EXAMPLE_LOSS",
    "EVAL_LOSS",
    "KERNEL_DISTANCE",
    "VARIABLE_EDGES",
    "SeriesAccessors",
    "context_columns",
    "context_key",
    "edge_in_key",
    "edge_key",
    "matrix_key",
    "node_key",
    "pathway_key",
    "variable_in_key",
    "variable_key",
    "weight_prefixes",
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


def weight_prefixes() -> tuple[str, ...]:
    """The beginnings of the names of weight matrices (:func:`edge_key` ``"W"`` and
    :func:`matrix_key` ``"W"``), for leaving them out.

    >>> weight_prefixes()
    ('W/', 'W[')
    """
    return edge_key("W", ""), matrix_key("W", "")[:-1]


class SeriesAccessors:
    """The accessors of :class:`~gdln.Trajectory`: each series read by what it is.

    A base of :class:`~gdln.Trajectory` (which holds ``t``, ``series`` and ``meta``), so
    that the names of the series and the reading of them live in one module.
    """

    t: np.ndarray
    series: Mapping[str, np.ndarray]
    meta: Mapping[str, Any]

    def _get(self, key: str) -> np.ndarray:
        if key not in self.series:
            names = ", ".join(sorted(self.series)) or "none"
            raise KeyError(f"this trajectory has no series {key!r} (it has: {names})")
        return np.asarray(self.series[key])

    def variable(self, name: str, *, system: int | None = None) -> np.ndarray:
        r"""A reduced variable of :func:`gdln.solve` over time (Eq. 10), ``(T, modes)``.

        Parameters
        ----------
        name
            The variable's name, e.g. ``"B1"`` (``str`` of a symbol of
            :attr:`gdln.ReducedSystem.variables`); it stands for the same edges in every
            system (:attr:`variable_edges`).
        system
            Which of the reduction's systems (:attr:`gdln.Reduction.systems`) to read;
            needed only when several record ``name``.

        Returns
        -------
        numpy.ndarray
            Column ``a`` is the variable in mode ``system.modes[a]``.

        Raises
        ------
        KeyError
            The trajectory records no such variable (in that system).
        AmbiguousVariableError
            ``system`` is not given and several systems record ``name``.
        """
        found = {k: key for key in self.series for n, k in [variable_in_key(key)] if n == name}
        if system is None and len(found) > 1:
            raise AmbiguousVariableError.between(name, sorted(found), self.meta.get("modes"))
        system = min(found, default=0) if system is None else system
        if system not in found:
            where = f"; it is in system {min(found)}" if found else ""
            raise KeyError(
                f"this trajectory records no variable {name!r} in system {system}{where}"
            )
        return np.asarray(self.series[found[system]])

    def has_variable(self, name: str, *, system: int | None = None) -> bool:
        """Whether :meth:`variable` finds ``name`` of ``system`` (of any system if ``None``).

        Parameters
        ----------
        name
            The variable's name.
        system
            Which of the reduction's systems it belongs to.

        Returns
        -------
        bool
            ``True`` when the trajectory records it.
        """
        return any(n == name and system in (None, k) for n, k in map(variable_in_key, self.series))

    @property
    def variable_edges(self) -> dict[str, tuple[str, ...]]:
        """Reduced variable -> the names of the edges it stands for (``meta["variable_edges"]``).

        One name stands for one edge set in every system of a solve and in every output of
        it; empty when the trajectory has no reduced variables.
        """
        saved = self.meta.get(VARIABLE_EDGES) or {}
        return {str(k): tuple(str(e) for e in v) for k, v in saved.items()}

    def context_losses(self, *, evaluation: bool = False) -> dict[str, np.ndarray]:
        """The loss of Eq. (1) within each context, by the context's label.

        Their average weighted by the context probabilities is :attr:`loss`. A repeated
        label is told apart by ``#`` and its position.

        Parameters
        ----------
        evaluation
            A simulation's losses on its evaluation examples instead of its training
            examples.

        Returns
        -------
        dict
            Label -> ``(T,)`` (a solve) or ``(T, seeds)`` (a simulation); empty when
            nothing was recorded per context.
        """
        if not evaluation and CONTEXT_LOSS in self.series:
            return context_columns(self)
        prefix = context_key("", evaluation=evaluation)
        return {
            key[len(prefix) :]: np.asarray(value)
            for key, value in self.series.items()
            if key.startswith(prefix)
        }

    def singular_values(self, edge: Edge | str) -> np.ndarray:
        """The singular values of an edge's weights, descending, over time.

        Parameters
        ----------
        edge
            ``(source, target)`` or its name ``"source->target"``.

        Returns
        -------
        numpy.ndarray
            ``(T, seeds, k)`` from :func:`gdln.simulate`, ``(T, k)`` from
            :func:`gdln.solve` on the matrix route.

        Raises
        ------
        KeyError
            The trajectory records no weights of this edge.
        """
        return self._edge_series("sv", edge)

    def weights(self, edge: Edge | str) -> np.ndarray:
        """An edge's weight matrix $W_e$ over time.

        Recorded by :func:`gdln.simulate` with ``record_weights`` and always by
        :func:`gdln.solve` on the matrix route.

        Parameters
        ----------
        edge
            ``(source, target)`` or its name ``"source->target"``.

        Returns
        -------
        numpy.ndarray
            ``(T, seeds, |target|, |source|)`` from :func:`gdln.simulate`,
            ``(T, |target|, |source|)`` from :func:`gdln.solve` on the matrix route.

        Raises
        ------
        KeyError
            The trajectory records no weights of this edge.
        """
        return self._edge_series("W", edge)

    def _edge_series(self, quantity: str, edge: Edge | str) -> np.ndarray:
        key = edge_key(quantity, edge)
        if key not in self.series and matrix_key(quantity, edge) in self.series:
            key = matrix_key(quantity, edge)
        return self._get(key)

    def projections(self, edge: Edge | str) -> np.ndarray:
        r"""An edge's weights in given mode bases, $l_\alpha^\top W_e r_\alpha$ (Eq. 9).

        Recorded by :func:`gdln.simulate` for the edges of its ``bases``.

        Parameters
        ----------
        edge
            ``(source, target)`` or its name ``"source->target"``.

        Returns
        -------
        numpy.ndarray
            ``(T, seeds, k)``, column ``a`` for the bases' column ``a``.

        Raises
        ------
        KeyError
            The edge had no bases.
        """
        return self._get(edge_key("proj", edge))

    def rsm(self, node: Hashable) -> np.ndarray:
        r"""The representational similarity $h_vh_v^\top$ at a hidden node (Fig. 4g).

        Parameters
        ----------
        node
            A hidden node.

        Returns
        -------
        numpy.ndarray
            ``(T, seeds, n, n)`` over the evaluation (else the training) examples of a
            simulation; ``(T, n, n)`` over the task's examples from the theory
            (:meth:`gdln.TrajectoryKernels.added_to`).

        Raises
        ------
        KeyError
            The simulation did not record it (``simulate(rsm=True)``), or the
            solve was not given the kernels.
        """
        return self._get(node_key("rsm", node))

    def kernel_distance(self) -> np.ndarray:
        r"""The tangent-kernel distance $S(t)$ from the first recorded time, ``(T,)``.

        $S(t) = 1 - \langle K_0,K_t\rangle_F/(\lVert K_0\rVert_F\lVert K_t\rVert_F)$ of
        :attr:`gdln.TrajectoryKernels.distance`.

        Returns
        -------
        numpy.ndarray
            ``(T,)``.

        Raises
        ------
        KeyError
            The trajectory was not given the kernels
            (:meth:`gdln.TrajectoryKernels.added_to`, ``gdln solve --kernel``).
        """
        return self._get(KERNEL_DISTANCE)

    def pathway(self, quantity: str, pathway: str) -> np.ndarray:
        r"""A pathway's network function or representation from :func:`gdln.solve_balanced`.

        Parameters
        ----------
        quantity
            ``"W2W1"`` ($W_2W_1$, ``(T, |y|, |x|)``), ``"W1TW1"`` ($W_1^\top W_1$,
            ``(T, |x|, |x|)``) or ``"W2W2T"`` ($W_2W_2^\top$, ``(T, |y|, |y|)``).
        pathway
            The pathway's name, ``"x->h->y"``.

        Returns
        -------
        numpy.ndarray
            The quantity over time.

        Raises
        ------
        KeyError
            The trajectory records no such series.
        """
        return self._get(pathway_key(quantity, pathway))

    def evaluation_loss(self) -> np.ndarray:
        """A simulation's loss of Eq. (1) on its evaluation examples.

        Returns
        -------
        numpy.ndarray
            ``(T, seeds)``.

        Raises
        ------
        KeyError
            The simulation had no evaluation examples.
        """
        return self._get(EVAL_LOSS)

    def example_losses(self) -> np.ndarray:
        """A simulation's loss on each evaluation example.

        Returns
        -------
        numpy.ndarray
            ``(T, seeds, n)``.

        Raises
        ------
        KeyError
            The simulation had no evaluation examples.
        """
        return self._get(EVAL_EXAMPLE_LOSS)

    def outputs(self, node: Hashable) -> np.ndarray:
        """A simulated network's output at ``node`` on the evaluation examples.

        Parameters
        ----------
        node
            An output node.

        Returns
        -------
        numpy.ndarray
            ``(T, seeds, n, |node|)``.

        Raises
        ------
        KeyError
            The simulation had no evaluation examples, or ``node`` is no output.
        """
        return self._get(node_key("output", node))

    @property
    def patterns(self) -> dict[str, np.ndarray]:
        r"""Each ReLU node's activation patterns $1[z_v > 0]$ on the training examples.

        Returns
        -------
        dict
            Node -> bool ``(T, seeds, n, |node|)``, recorded with ``record_patterns``.
        """
        start = len(prefix := node_key("pattern", ""))
        return {k[start:]: v > 0.5 for k, v in self.series.items() if k.startswith(prefix)}


def context_columns(trajectory: SeriesAccessors) -> dict[str, np.ndarray]:
    """``series["context_loss"]`` ``(T, contexts)`` as label -> ``(T,)``."""
    if CONTEXT_LOSS not in trajectory.series:
        return {}
    values = np.asarray(trajectory.series[CONTEXT_LOSS]).reshape(len(trajectory.t), -1)
    labels = [str(x) for x in trajectory.meta.get("context_labels", [])]
    if len(labels) != values.shape[1]:
        labels = [f"context{c}" for c in range(values.shape[1])]
    out: dict[str, np.ndarray] = {}
    for c, label in enumerate(labels):
        out[label if label not in out else f"{label}#{c}"] = values[:, c]  # labels may repeat
    return out
