r"""A figure for any result file, and writing it (``gdln plot``).

What is drawn, by what the file holds:

* a trajectory (``gdln solve -o x.json|x.csv``, ``gdln simulate -o x.npz|x.json``,
  ``gdln compare``'s runs): one panel per kind it has (:func:`gdln.report` plots via
  :meth:`gdln.Trajectory.plot`): the loss and the loss per context; the reduced
  variables per mode with their edges, or each edge's singular values; the
  tangent-kernel distance $S(t)$ (``gdln solve --kernel``);
* the stages of ``gdln timescales --format json``: plateau losses at the stage times
  (:meth:`gdln.Timescales.plot`);
* a sweep table (CSV of :func:`gdln.run_sweep`): each result column against the first
  column, the mean over rows with the same value and every row as a dot;
* ``kernel.json`` of ``gdln kernel``: the kernel's eigenvalues, largest first;
* with ``gated``, a ReLU run recorded with ``record_patterns``: its loss against the
  full-matrix dynamics of its extracted gated network and the pattern flips
  (:func:`plot_relu_theory`).

The figure is made without pyplot (no display, no global state); matplotlib is imported
when a figure is drawn.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._errors import GdlnError
from ..outputs import atomic_file
from ..report._plots import axes_for, place_legend, trajectory_kinds
from ..solution._read import read_trajectory
from ..solution._trajectory import Trajectory
from ..stages._result import Timescales
from ..sweep._table import read_table
from ._relu import plot_relu_theory

if TYPE_CHECKING:
    from ..gating import ReluTheory

__all__ = ["PLOT_FORMATS", "PlotError", "plot_result", "plot_spectrum", "plot_table", "save_plot"]

PLOT_FORMATS = ("png", "svg", "pdf")
"""The formats :func:`save_plot` writes, chosen by the output file's suffix."""


class PlotError(GdlnError, ValueError):
    """A result cannot be drawn (not a file gdln wrote, or nothing to draw); the message
    names the file."""


def _figure(rows: int, width: float = 9.0, height: float = 3.6) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height * rows), layout="constrained")


def plot_result(
    result: str | Path | Trajectory | Timescales | ReluTheory,
    *,
    x: str | None = None,
    y: Sequence[str] | None = None,
    gated: bool = False,
    step: int | None = None,
) -> Any:
    """Draw a result, or the result file gdln wrote, as one figure.

    Parameters
    ----------
    result
        A :class:`gdln.Trajectory` or :class:`gdln.Timescales` (or a
        :class:`gdln.gating.ReluTheory`), or a file: a trajectory (``.npz``, ``.json``,
        ``.csv``), the stages of ``gdln timescales`` (``.json``), a sweep table (``.csv``)
        or ``kernel.json`` of ``gdln kernel``.
    x, y
        A sweep table's column on the x axis (default: its first) and the columns to
        draw (default: every column with a non-integer number).
    gated
        Draw a ReLU run (recorded with ``record_patterns``) against the gated network of
        its patterns (:func:`gdln.gating.relu_theory`, :func:`plot_relu_theory`).
    step
        With ``gated``: the recorded step the theory starts from (default: the step from
        which the patterns are frozen, or the first record when they never freeze).

    Returns
    -------
    matplotlib.figure.Figure
        One panel per kind of content (a trajectory's loss, variables and kernel
        distance), made without pyplot.

    Raises
    ------
    PlotError
        The file is none of these, or holds nothing to draw.
    """
    from ..gating import ReluTheory as Theory
    from ..gating import relu_theory

    if isinstance(result, Theory):
        return plot_relu_theory(result)
    if step is not None and not gated:
        raise PlotError(f"step {step}: only with gated (a ReLU run against its gated network)")
    if gated:
        if isinstance(result, Timescales):
            raise PlotError("gated: a ReLU run recorded with record_patterns, not timescales")
        return plot_relu_theory(relu_theory(result, step=step))
    if isinstance(result, Trajectory):
        return _trajectory_figure(result)
    if isinstance(result, Timescales):
        fig = _figure(1)
        result.plot(ax=fig.add_subplot())
        return fig
    path = Path(result)
    if path.is_dir():
        raise PlotError(f"{path}: a folder; give one of the result files in it")
    suffix = path.suffix.lower()
    if suffix == ".json":
        payload = _json(path)
        if isinstance(payload, Mapping) and "stages" in payload and "u0" in payload:
            return plot_result(Timescales.from_dict(payload))
        if isinstance(payload, Mapping) and "eigenvalues" in payload:
            fig = _figure(1)
            plot_spectrum(
                payload["eigenvalues"], ax=fig.add_subplot(), title=str(payload.get("kind", ""))
            )
            return fig
    if suffix == ".csv" and not _trajectory_header(path):
        fig = _figure(1)
        plot_table(read_table(path), x=x, y=y, ax=fig.add_subplot(), title=path.name)
        return fig
    try:
        trajectory = read_trajectory(path)
    except GdlnError as err:
        raise PlotError(
            f"{path}: not a result gdln draws (a trajectory, timescales JSON, a sweep table "
            "or kernel.json)"
        ) from err
    return _trajectory_figure(trajectory)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise PlotError(f"{path}: not JSON ({err})") from err


def _trajectory_header(path: Path) -> bool:
    """Whether a CSV is ``gdln solve``'s: its header ``t,loss,...``, after the line of the
    variable -> edges map where it has one."""
    with path.open(encoding="utf-8", errors="replace") as file:
        first = file.readline(1 << 20)
        if first.startswith("# "):
            first = file.readline(1 << 20)
        return first.startswith("t,loss")


def _trajectory_figure(trajectory: Trajectory) -> Any:
    kinds = trajectory_kinds(trajectory)
    fig = _figure(len(kinds))
    for k, kind in enumerate(kinds, start=1):
        trajectory.plot(kind, ax=fig.add_subplot(len(kinds), 1, k))
    return fig


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def plot_table(
    rows: Sequence[Mapping[str, Any]],
    *,
    x: str | None = None,
    y: Sequence[str] | None = None,
    ax: Any = None,
    title: str = "",
) -> Any:
    """Draw a sweep table: each result column against one parameter column.

    Parameters
    ----------
    rows
        The table (:func:`gdln.read_table`).
    x
        The column on the x axis; default: the first.
    y
        The columns drawn; default: every numeric column, other than ``x``, that holds a
        number that is not an integer (a result; integer columns such as ``seed`` are
        parameters).
    ax
        Draw into these axes; default: a new figure (pyplot).
    title
        The axes' title.

    Returns
    -------
    matplotlib.axes.Axes
        A line through the mean of each column over the rows with the same ``x`` (the
        ``gid`` is the column's name), and every row as a dot.

    Raises
    ------
    PlotError
        The table has no rows, ``x`` or a ``y`` is not a numeric column, or there is no
        column to draw.
    """
    if not rows:
        raise PlotError(f"{title or 'the table'}: no rows to draw")
    columns = list(rows[0])
    x = columns[0] if x is None else x
    numeric = [c for c in columns if all(_number(r.get(c)) for r in rows)]
    if x not in numeric:
        raise PlotError(
            f"{title or 'the table'}: column {x!r} is not numeric; choose x from {numeric}"
        )
    if y is None:
        y = [
            c
            for c in numeric
            if c != x and any(float(r[c]) != int(r[c]) for r in rows if np.isfinite(r[c]))
        ]
    missing = [c for c in y if c not in numeric]
    if missing or not y:
        raise PlotError(
            f"{title or 'the table'}: nothing to draw as y ({missing or 'no result column'}); numeric columns: {numeric}"
        )
    ax = axes_for(ax)
    xs = np.array([float(r[x]) for r in rows])
    order = np.unique(xs)
    for column in y:
        values = np.array([float(r[column]) for r in rows])
        means = [float(np.nanmean(values[xs == v])) for v in order]
        (line,) = ax.plot(order, means, "-", lw=1.6, label=f"{column} (mean)", gid=column)
        ax.plot(xs, values, "o", ms=3, alpha=0.5, color=line.get_color())
    ax.set_xlabel(x)
    ax.set_title(title, fontsize=9)
    place_legend(ax)
    return ax


def plot_spectrum(eigenvalues: Sequence[float], *, ax: Any = None, title: str = "") -> Any:
    """Draw a kernel's eigenvalues, largest first, on a log scale.

    Parameters
    ----------
    eigenvalues
        The eigenvalues (``kernel.json``'s ``eigenvalues``).
    ax
        Draw into these axes; default: a new figure (pyplot).
    title
        The kernel's kind, for the title.

    Returns
    -------
    matplotlib.axes.Axes
        One line (``gid`` ``"eigenvalues"``) through the eigenvalues in descending order.
    """
    ax = axes_for(ax)
    values = np.sort(np.asarray(eigenvalues, dtype=float))[::-1]
    ax.plot(np.arange(1, len(values) + 1), values, ".-", label="eigenvalues", gid="eigenvalues")
    if np.all(values > 0):
        ax.set_yscale("log")
    ax.set_xlabel("rank")
    ax.set_ylabel("eigenvalue")
    ax.set_title(f"{title} kernel spectrum".strip(), fontsize=9)
    return ax


def save_plot(
    result: str | Path | Trajectory | Timescales | ReluTheory,
    out: str | Path,
    *,
    force: bool = False,
    x: str | None = None,
    y: Sequence[str] | None = None,
    dpi: int = 150,
    gated: bool = False,
    step: int | None = None,
) -> Path:
    """Draw a result (:func:`plot_result`) and write the figure, whole or not at all.

    Parameters
    ----------
    result
        As for :func:`plot_result`.
    out
        The figure file; its suffix (``.png``, ``.svg`` or ``.pdf``) picks the format.
    force
        Replace an existing file.
    x, y
        As for :func:`plot_result` (sweep tables).
    dpi
        Resolution of a PNG.
    gated, step
        As for :func:`plot_result` (a ReLU run against its extracted gated network).

    Returns
    -------
    pathlib.Path
        ``out``.

    Raises
    ------
    PlotError
        The suffix is not one of :data:`PLOT_FORMATS`, or the result cannot be drawn.
    gdln.outputs.OutputExistsError
        ``out`` exists and ``force`` is false.
    """
    out = Path(out)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in PLOT_FORMATS:
        raise PlotError(f"{out}: expected a file ending in .png, .svg or .pdf")
    fig = plot_result(result, x=x, y=y, gated=gated, step=step)
    with atomic_file(out, force=force) as temporary:
        fig.savefig(temporary, format=fmt, dpi=dpi)
    return out
