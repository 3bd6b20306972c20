"""HTML for notebooks: trajectories and comparisons as a compact table with their plot.

Jupyter shows an object's ``_repr_html_``. :func:`trajectory_html` and
:func:`comparison_html` build a small table of the numbers a reader checks first and an
inline PNG (base64 ``data:`` URI) of the loss of Eq. (1) of Saxe et al. 2022 against time
in units of $\\tau$. Figures are drawn on a ``matplotlib.figure.Figure`` without pyplot, so
showing a repr changes no global plotting state.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

__all__ = ["comparison_html", "png_data_uri", "trajectory_html"]

_RUNS = (
    ("ode", "reduced ODE"),
    ("gd_map", "reduced GD map"),
    ("decoupled", "full network, decoupled init"),
    ("random", "full network, random init"),
)
_GAPS = (
    ("decoupled_vs_map", "decoupled vs GD map"),
    ("decoupled_vs_ode", "decoupled vs ODE"),
    ("map_vs_ode", "GD map vs ODE"),
    ("random_mean_vs_ode", "random (seed mean) vs ODE"),
)


class Trajectory(Protocol):
    """What :func:`trajectory_html` reads: a :class:`gdln.Trajectory`."""

    @property
    def t(self) -> np.ndarray: ...
    @property
    def loss(self) -> np.ndarray: ...
    @property
    def series(self) -> Mapping[str, np.ndarray]: ...
    @property
    def meta(self) -> Mapping[str, Any]: ...


class Comparison(Protocol):
    """What :func:`comparison_html` reads: a :class:`gdln.CompareResult`."""

    @property
    def metrics(self) -> Mapping[str, Any]: ...
    @property
    def ode(self) -> Trajectory: ...
    @property
    def gd_map(self) -> Trajectory: ...
    @property
    def decoupled(self) -> Trajectory | None: ...
    @property
    def random(self) -> Trajectory: ...
    @property
    def files(self) -> tuple[Path, ...]: ...


def _number(x: Any) -> str:
    """A number to 6 significant digits; anything else as its text."""
    if isinstance(x, (int, float, np.floating, np.integer)) and not isinstance(x, bool):
        return f"{float(x):.6g}" if math.isfinite(float(x)) else str(float(x))
    return "never" if x is None else str(x)


def _table(rows: Sequence[tuple[str, str]], *, caption: str) -> str:
    """A two-column HTML table (name, value), every cell escaped."""
    body = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
        f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
        for k, v in rows
    )
    return f"<table><caption>{html.escape(caption)}</caption>{body}</table>"


def png_data_uri(png: bytes) -> str:
    """PNG bytes as a ``data:image/png;base64,...`` URI for an ``<img src=...>``."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _image(png: bytes, alt: str) -> str:
    return f"<img src='{png_data_uri(png)}' alt='{html.escape(alt)}'/>"


def _loss_png(curves: Sequence[tuple[str, np.ndarray, np.ndarray]], *, title: str) -> bytes:
    """A small plot of loss against $t/\\tau$, one line per ``(label, t, loss)``.

    A two-dimensional loss ``(T, seeds)`` is drawn as its mean over seeds with a band of
    one standard deviation.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.5, 2.8), dpi=90, layout="constrained")
    ax = fig.add_subplot()
    for label, t, loss in curves:
        if loss.ndim == 2:
            mean, std = loss.mean(1), loss.std(1)
            line = ax.plot(t, mean, label=f"{label} (mean of {loss.shape[1]})")[0]
            ax.fill_between(t, mean - std, mean + std, color=line.get_color(), alpha=0.25)
        else:
            ax.plot(t, loss, label=label)
    ax.set_xlabel("t / tau")
    ax.set_ylabel("loss")
    ax.set_title(title, fontsize="medium")
    if len(curves) > 1 or curves[0][2].ndim == 2:
        ax.legend(fontsize="small")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def trajectory_rows(trajectory: Trajectory) -> list[tuple[str, str]]:
    """The table of :func:`trajectory_html`: time span, records, loss, series, method."""
    t, loss = trajectory.t, trajectory.loss
    final = loss[-1]
    rows = [
        ("time span (t / tau)", f"{_number(t[0])} to {_number(t[-1])}"),
        ("records", str(len(t))),
        ("initial loss", _number(float(np.mean(loss[0])))),
        ("final loss", _number(float(np.mean(final)))),
    ]
    if loss.ndim == 2:
        rows.append(("seeds", str(loss.shape[1])))
        rows.append(("final loss per seed", ", ".join(_number(x) for x in final)))
    rows.append(("series", ", ".join(sorted(trajectory.series)) or "none"))
    for key in ("method", "lr", "lump", "source"):
        if trajectory.meta.get(key) is not None:
            rows.append((key, _number(trajectory.meta[key])))
    return rows


def trajectory_html(trajectory: Trajectory) -> str:
    """A trajectory as an HTML table (see :func:`trajectory_rows`) and a plot of its loss.

    With several seeds the loss of each row is the mean over seeds.
    """
    method = str(trajectory.meta.get("method", "trajectory"))
    png = _loss_png([(method, trajectory.t, trajectory.loss)], title="loss (Eq. 1)")
    table = _table(trajectory_rows(trajectory), caption="Trajectory")
    return f"<div>{table}{_image(png, 'loss against time')}</div>"


def comparison_rows(result: Comparison) -> list[tuple[str, str]]:
    """The table of :func:`comparison_html`: the problem, the gaps to theory, $t_{1/2}$."""
    m = result.metrics
    rows = [
        ("graph", str(m.get("graph", ""))),
        (
            "lr, t_max, steps",
            f"{_number(m.get('lr'))}, {_number(m.get('t_max'))}, {m.get('steps')}",
        ),
        ("initial loss", _number(m.get("initial_loss"))),
    ]
    rows += [(f"{label} (max |gap| / L(0))", _number(m[key])) for key, label in _GAPS if key in m]
    spread = m.get("random_vs_ode")
    if isinstance(spread, Mapping):
        rows.append(
            (
                f"random vs ODE over {spread.get('seeds')} seeds (median [q1, q3])",
                f"{_number(spread.get('median'))} "
                f"[{_number(spread.get('q1'))}, {_number(spread.get('q3'))}]",
            )
        )
    half = m.get("time_to_half_loss", {})
    for key, label in _RUNS[:3]:
        value = half.get(key)
        if isinstance(value, Mapping):  # a summary over seeds (the matrix route)
            rows.append((f"t at L(0)/2, {label} (median)", _number(value.get("median"))))
        elif key in half:
            rows.append((f"t at L(0)/2, {label}", _number(value)))
    random = half.get("random")
    if isinstance(random, Mapping):
        rows.append((f"t at L(0)/2, {_RUNS[3][1]} (median)", _number(random.get("median"))))
    return rows


def comparison_html(result: Comparison) -> str:
    """A comparison as a metrics table (:func:`comparison_rows`) and its loss figure.

    The figure is the ``loss.png`` that :func:`gdln.compare` wrote when it is still there,
    else a small plot of the four runs' losses drawn from the trajectories.
    """
    written = [Path(f) for f in result.files if Path(f).name == "loss.png"]
    if written and written[0].is_file():
        png = written[0].read_bytes()
    else:
        runs = [(label, getattr(result, key)) for key, label in _RUNS]
        curves = [(label, run.t, run.loss) for label, run in runs if run is not None]
        png = _loss_png(curves, title="loss (Eq. 1): theory and simulation")
    table = _table(comparison_rows(result), caption="Theory against simulation")
    return f"<div>{table}{_image(png, 'loss of theory and simulation')}</div>"
