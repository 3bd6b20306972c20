"""Trajectories: what a solve or a simulation records over time.

One value for theory and simulation alike, so that comparisons and plots read both the
same way. Time is in units of $\\tau$ (see :mod:`gdln.solution` for the convention
$t/\\tau = \\mathrm{lr}\\times\\mathrm{step}$).

The names of the recorded series are built in :mod:`gdln.solution._series` and read
through :class:`Trajectory`'s accessors; :class:`Trajectory` lists them.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .._edge import Edge
from ..outputs import atomic_file, save_npz
from ._errors import AmbiguousVariableError
from ._series import (
    CONTEXT_LOSS,
    EVAL_EXAMPLE_LOSS,
    EVAL_LOSS,
    KERNEL_DISTANCE,
    VARIABLE_EDGES,
    context_key,
    edge_in_key,
    edge_key,
    matrix_key,
    node_key,
    pathway_key,
    variable_in_key,
    variable_key,
)

__all__ = [
    "CONTEXT_LOSS",
    "EVAL_EXAMPLE_LOSS",
    "EVAL_LOSS",
    "KERNEL_DISTANCE",
    "VARIABLE_EDGES",
    "Trajectory",
    "context_columns",
    "context_key",
    "edge_in_key",
    "edge_key",
    "matrix_key",
    "node_key",
    "pathway_key",
    "variable_in_key",
    "variable_key",
]


@dataclass(frozen=True)
class Trajectory:
    r"""Recorded quantities at a sequence of times.

    Read the series through the accessors (:meth:`variable`, :meth:`context_losses`,
    :meth:`singular_values`, :meth:`weights`, :meth:`projections`, :meth:`rsm`,
    :meth:`kernel_distance`, :meth:`evaluation_loss`, :meth:`example_losses`, :meth:`outputs`,
    :meth:`pathway`, :attr:`patterns`); the names in ``series`` are the keys of saved files
    (see Notes).

    Parameters
    ----------
    t
        ``(T,)`` times, in units of $\tau$.
    loss
        ``(T,)`` or ``(T, seeds)``: the loss of Eq. (1) of Saxe et al. 2022.
    series
        Name -> array whose axis 0 is time (the names are listed in Notes).
    meta
        JSON-serialisable description: source file, parameters, method, seeds, ...

    Raises
    ------
    ValueError
        ``t`` is not one-dimensional, or ``loss`` or a series has a row count other
        than the number of times.

    Notes
    -----
    The series each source records, by name (``T`` times, ``S`` seeds):

    ==============================  ===================================================
    name                            series
    ==============================  ===================================================
    ``B1``, ``B1@k``                a reduced variable, ``(T, modes)`` (:func:`gdln.solve`;
                                    ``@k`` for system ``k`` when there are several;
                                    its edges in :attr:`variable_edges`)
    ``context_loss``                ``(T, contexts)``, labels in ``meta["context_labels"]``
                                    (:func:`gdln.solve`, :func:`gdln.solve_full`)
    ``loss/<label>``                a context's loss, ``(T, S)`` (:func:`gdln.simulate`)
    ``sv/<edge>``                   singular values of an edge's weights, ``(T, S, k)``
    ``W/<edge>``                    the weights, ``(T, S, |target|, |source|)``
    ``proj/<edge>``                 the weights in given mode bases, ``(T, S, k)``
    ``rsm/<node>``                  $h_vh_v^\top$ at a hidden node, ``(T, S, n, n)``;
                                    ``(T, n, n)`` from the theory
                                    (:meth:`gdln.TrajectoryKernels.added_to`)
    ``kernel_distance``             the tangent-kernel distance $S(t)$, ``(T,)``
                                    (:meth:`gdln.TrajectoryKernels.added_to`)
    ``eval/loss``                   the loss on the evaluation examples, ``(T, S)``
    ``eval/loss/<label>``           that loss within one context, ``(T, S)``
    ``eval/example_loss``           that loss per example, ``(T, S, n)``
    ``eval/output/<node>``          the output there, ``(T, S, n, |v|)``
    ``pattern/<node>``              a ReLU node's units on, $1[z > 0]$, ``(T, S, n, |v|)``
    ``W[<edge>]``, ``sv[<edge>]``   the full-matrix flow's weights ``(T, |t|, |s|)`` and
                                    singular values ``(T, k)`` (:func:`gdln.solve_full`)
    ``W2W1/<pathway>``, ...         a two-layer pathway's $W_2W_1$, $W_1^\top W_1$,
                                    $W_2W_2^\top$ (:func:`gdln.solve_balanced`)
    ==============================  ===================================================
    """

    t: np.ndarray
    loss: np.ndarray
    series: Mapping[str, np.ndarray] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        t = np.asarray(self.t, dtype=float)
        object.__setattr__(self, "t", t)
        object.__setattr__(self, "loss", np.asarray(self.loss, dtype=float))
        if t.ndim != 1:
            raise ValueError(f"t must be one-dimensional, got shape {t.shape}")
        if len(self.loss) != len(t):
            raise ValueError(f"loss has {len(self.loss)} rows for {len(t)} times")
        series = {name: np.asarray(value) for name, value in self.series.items()}
        for name, value in series.items():
            if len(value) != len(t):
                raise ValueError(f"series {name!r} has {len(value)} rows for {len(t)} times")
        object.__setattr__(self, "series", series)

    def __repr__(self) -> str:
        names = ", ".join(sorted(self.series))
        return f"Trajectory(t=<{len(self.t)} times to {self.t[-1]:.4g}>, series=[{names}])"

    def _repr_html_(self) -> str:
        """A table and a loss plot, for Jupyter (``report._notebook.trajectory_html``)."""
        from ..report._notebook import trajectory_html  # where the reprs are, found on use

        return trajectory_html(self)

    def plot(self, kind: str = "loss", *, ax: Any = None) -> Any:
        r"""Plot against time $t/\tau$ and return the matplotlib ``Axes``.

        Parameters
        ----------
        kind, ax
            What to draw, ``"loss"``, ``"variables"`` or ``"kernel"`` (as
            ``report._plots.plot_trajectory`` says), and the axes to draw into (default: new).

        Returns
        -------
        matplotlib.axes.Axes
        """
        from ..report._plots import plot_trajectory  # beside the other plots, found on use

        return plot_trajectory(self, kind, ax=ax)

    # -- the series, by what they are -------------------------------------------------
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
            :func:`gdln.solve_full`.

        Raises
        ------
        KeyError
            The trajectory records no weights of this edge.
        """
        return self._edge_series("sv", edge)

    def weights(self, edge: Edge | str) -> np.ndarray:
        """An edge's weight matrix $W_e$ over time.

        Recorded by :func:`gdln.simulate` with ``record_weights`` and always by
        :func:`gdln.solve_full`.

        Parameters
        ----------
        edge
            ``(source, target)`` or its name ``"source->target"``.

        Returns
        -------
        numpy.ndarray
            ``(T, seeds, |target|, |source|)`` from :func:`gdln.simulate`,
            ``(T, |target|, |source|)`` from :func:`gdln.solve_full`.

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
            The simulation did not record it (``SimulationSettings(rsm=True)``), or the
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

    def without_weights(self) -> Trajectory:
        """This trajectory without its weight matrices (the series of :meth:`weights`).

        Returns
        -------
        Trajectory
            The same times, losses, metadata and other series.
        """
        edge_prefix, matrix_prefix = edge_key("W", ""), matrix_key("W", "")[:-1]
        kept = {
            key: value
            for key, value in self.series.items()
            if not key.startswith((edge_prefix, matrix_prefix))
        }
        return replace(self, series=kept)

    # -- files -------------------------------------------------------------------------
    def save(self, path: str | Path, *, force: bool = False) -> Path:
        """Write to ``.npz`` or ``.json`` (by suffix); refuse to overwrite unless ``force``.

        The file appears whole or not at all, and an existing one is never replaced
        without ``force``, even by a concurrent writer (:func:`gdln.outputs.atomic_file`).
        Every series is saved under its name (see Notes of :class:`Trajectory`).

        Parameters
        ----------
        path
            The file to write; its suffix, ``.npz`` or ``.json``, picks the format.
        force
            Replace an existing file.

        Returns
        -------
        pathlib.Path
            ``path``.

        Raises
        ------
        ValueError
            The suffix is neither ``.npz`` nor ``.json``.
        FileExistsError
            The file exists and ``force`` is not given.
        gdln.outputs.OutputError
            A series name that an ``.npz`` cannot hold as written (a NUL character cuts a
            zip member's name short); nothing is written.
        """
        path = Path(path)
        if path.suffix not in (".json", ".npz"):
            raise ValueError(f"{path}: suffix must be .npz or .json, got {path.suffix!r}")
        with atomic_file(path, force=force) as temporary:
            if path.suffix == ".json":
                payload = {
                    "t": self.t.tolist(),
                    "loss": self.loss.tolist(),
                    "series": {
                        k: np.asarray(v, dtype=float).tolist() for k, v in self.series.items()
                    },
                    "meta": dict(self.meta),
                }
                temporary.write_text(json.dumps(payload))
            else:
                meta = np.array(json.dumps(dict(self.meta)))
                arrays = {f"series/{k}": v for k, v in self.series.items()}
                save_npz(
                    temporary, {"t": self.t, "loss": self.loss, "meta": meta, **arrays}, output=path
                )
        return path

    @classmethod
    def load(cls, path: str | Path) -> Trajectory:
        """Read a file written by :meth:`save`.

        Parameters
        ----------
        path
            A ``.json`` or ``.npz`` file written by :meth:`save`.

        Returns
        -------
        Trajectory
            The trajectory as saved, its series under the same names.

        Raises
        ------
        GraphSpecError
            The file is missing, beyond :class:`gdln.graphfile.Limits`, or malformed.
        """
        from ._saved import read_trajectory  # gdln.graphfile's bounded readers

        return cls(**read_trajectory(Path(path)))


def context_columns(trajectory: Trajectory) -> dict[str, np.ndarray]:
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
