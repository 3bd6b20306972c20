"""Trajectories: what a solve or a simulation records over time.

One value for theory and simulation alike, so that comparisons and plots read both the
same way. Time is in units of $\\tau$ (see :mod:`gdln.solution` for the convention
$t/\\tau = \\mathrm{lr}\\times\\mathrm{step}$).

The value is here; the names of its series and their accessors are in
:mod:`gdln.solution._series` (its base :class:`~gdln.solution._series.SeriesAccessors`),
how it ended in :mod:`gdln.solution._status`, what it recorded in
:mod:`gdln.solution._recording`, and its files in :mod:`gdln.solution._saved`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ._recording import Recording
from ._series import SeriesAccessors, weight_prefixes
from ._status import Status

__all__ = ["Trajectory"]


@dataclass(frozen=True)
class Trajectory(SeriesAccessors):
    r"""Recorded quantities at a sequence of times.

    Read the series through the accessors (:meth:`variable`, :meth:`context_losses`,
    :meth:`singular_values`, :meth:`weights`, :meth:`projections`, :meth:`rsm`,
    :meth:`kernel_distance`, :meth:`evaluation_loss`, :meth:`example_losses`,
    :meth:`outputs`, :meth:`pathway`, :attr:`patterns`); the names in ``series`` are the keys of saved files
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
    status
        How the run ended (:class:`~gdln.solution.Status`, diffrax's
        ``Solution.result``): completed, and the steppers that stopped on the way.
    recording
        What the run recorded and at which times
        (:class:`~gdln.solution.Recording`, diffrax's ``SaveAt``); ``None``
        where it is not known (a trajectory made by hand, or saved before gdln kept it).

    Raises
    ------
    ValueError
        ``t`` is not one-dimensional, ``loss`` or a series has a row count other than the
        number of times, or ``status`` or ``recording`` is not of its type.

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
                                    (:func:`gdln.solve`, its matrix route)
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
                                    singular values ``(T, k)`` (the matrix route)
    ``W2W1/<pathway>``, ...         a two-layer pathway's $W_2W_1$, $W_1^\top W_1$,
                                    $W_2W_2^\top$ (:func:`gdln.solve_balanced`)
    ==============================  ===================================================
    """

    t: np.ndarray
    loss: np.ndarray
    series: Mapping[str, np.ndarray] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)
    status: Status = field(default_factory=Status, kw_only=True)
    recording: Recording | None = field(default=None, kw_only=True)

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
        if not isinstance(self.status, Status):
            raise ValueError(f"status must be a Status, got {type(self.status).__name__}")
        if self.recording is not None and not isinstance(self.recording, Recording):
            raise ValueError(
                f"recording must be a Recording or None, got {type(self.recording).__name__}"
            )

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

    def without_weights(self) -> Trajectory:
        """This trajectory without its weight matrices (the series of :meth:`weights`).

        Returns
        -------
        Trajectory
            The same times, losses, metadata and other series; its :attr:`recording`
            says that no weights were kept.
        """
        prefixes = weight_prefixes()
        kept = {k: v for k, v in self.series.items() if not k.startswith(prefixes)}
        recording = self.recording and replace(self.recording, weights=False)
        return replace(self, series=kept, recording=recording)

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
        from ._saved import save_trajectory  # the file format, both ways

        return save_trajectory(self, Path(path), force=force)

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
