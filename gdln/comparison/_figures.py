r"""The figures of :func:`gdln.compare` (Fig. 4e-f of Saxe et al. 2022), and saving figures.

Every figure gdln or its examples make is saved the same way, by :func:`save_figure`.
matplotlib is imported when a figure is made, not with this module.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from .._edge import Edge, edge_name
from ..report._plots import equal_groups, mark_stages, place_legend, seed_band
from ._metrics import Runs
from ._modes import edge_orbits, theory_edge_values

__all__ = [
    "Panel",
    "loss_figure",
    "matrix_singular_value_figure",
    "plot_loss",
    "plot_singular_values",
    "prepare_drawing",
    "save_figure",
    "singular_value_figure",
    "trained_edges",
]


def save_figure(
    fig: Any,
    out: str | Path,
    stem: str,
    *,
    dpi: int = 150,
    formats: tuple[str, ...] = ("png", "svg"),
    tight: bool = False,
) -> list[Path]:
    """Write a matplotlib figure as ``out/stem.png`` and ``out/stem.svg``, then close it.

    Parameters
    ----------
    fig
        A ``matplotlib.figure.Figure``.
    out
        The folder; it must exist.
    stem
        File name without extension.
    dpi
        Resolution of the raster formats.
    formats
        Extensions to write, each a format matplotlib knows.
    tight
        Call ``fig.tight_layout()`` first (not for figures made with a constrained layout).

    Returns
    -------
    list of Path
        The files written, in the order of ``formats``.
    """
    import matplotlib.pyplot as plt

    if tight:
        fig.tight_layout()
    paths = [Path(out) / f"{stem}.{ext}" for ext in formats]
    for path in paths:
        fig.savefig(path, dpi=dpi)
        fig.set_layout_engine("none")  # laid out once: the other formats keep its positions
    plt.close(fig)
    return paths


def prepare_drawing() -> None:
    """Import matplotlib and draw a small figure to memory, while there is time to spare
    (:func:`gdln.compare` does it while the simulations run): the first figure a process
    draws also loads the fonts and builds the math-text parser, about 0.1 s, which the
    figures drawn afterwards (and the processes forked to draw them,
    :func:`gdln._runtime._fork.side_by_side`) then find done."""
    fig = _figure((2.0, 1.5))
    ax = fig.add_subplot()
    ax.plot([0.0, 1.0], [0.0, 1.0], "o", label=r"$b_e^\alpha$")
    ax.set_xlabel(r"$t/\tau$")
    ax.set_title("a", fontsize=8)
    ax.legend(fontsize=7)
    fig.canvas.draw()
    fig.clear()
    import matplotlib.pyplot as plt

    plt.close(fig)


def plot_loss(out: Path, metrics: Mapping[str, Any], runs: Runs) -> list[Path]:
    """``loss.png``/``.svg``: the loss of Eq. (1) of every run against time (Fig. 4e)."""
    return save_figure(loss_figure(metrics, runs), out, "loss")


def loss_figure(metrics: Mapping[str, Any], runs: Runs) -> Any:
    r"""The figure of ``loss.png``: the loss of Eq. (1) of every run against time.

    The theory's reduced ODE and map, the simulation from decoupled and from random
    initial weights (Fig. 4e of Saxe et al. 2022), and a dotted vertical line at each
    stage time within the horizon that :func:`gdln.timescales` predicts
    (``metrics["stages"]``, leading order in $u_0$), labelled by its number.

    Parameters
    ----------
    metrics
        The metrics of :func:`gdln.compare` (``CompareResult.metrics``).
    runs
        The four trajectories.

    Returns
    -------
    matplotlib.figure.Figure
        The figure (the stage lines carry the ``gid`` ``"stage N"``).
    """
    ode, gd_map, decoupled, random = runs.ode, runs.gd_map, runs.decoupled, runs.random
    starts = metrics.get("starts") or {}

    def start(curve: str) -> str:
        return f" from {starts[curve]}" if curve in starts else ""

    fig = _figure((10.0, 4.8))  # the legend beside the axes
    ax = fig.add_subplot()
    n = random.loss.shape[1]
    mean, low, high = seed_band(random.loss)  # mean +- sd within the seeds' own range
    for s in range(n):
        ax.plot(random.t, random.loss[:, s], color="tab:red", lw=0.5, alpha=0.35)
    ax.fill_between(random.t, low, high, color="tab:red", alpha=0.2, lw=0, gid="seed band")
    ax.plot(
        random.t,
        mean,
        color="tab:red",
        lw=1.5,
        label=f"simulation, {n} seeds (mean ± sd), random init: {starts.get('random', '')}"
        if "random" in starts
        else f"simulation, random init ({n} seeds, mean ± sd)",
    )
    if decoupled is None:  # the matrix route: the flow and map from each seed's weights
        for s in range(n):
            ax.plot(ode.t, ode.loss[:, s], color="tab:blue", lw=0.8, alpha=0.6)
        ax.plot(
            ode.t,
            ode.loss.mean(1),
            color="tab:blue",
            lw=2,
            label=f"theory, full-matrix flow (Eqs. 3-4){start('ode')}, mean",
        )
        ax.plot(
            gd_map.t,
            gd_map.loss.mean(1),
            "--",
            color="navy",
            lw=1,
            label="theory, full-matrix GD map, mean of seeds",
        )
    else:
        step = max(1, len(decoupled.t) // 25)
        ax.plot(
            decoupled.t[::step],
            decoupled.loss[::step, 0],
            "o",
            color="tab:green",
            ms=4,
            label="simulation, decoupled init (Eq. 9), at the theory's b(0)",
        )
        ax.plot(
            ode.t,
            ode.loss,
            color="tab:blue",
            lw=2,
            label=f"theory, reduced ODE (Eq. 10){start('ode')}",
        )
        ax.plot(gd_map.t, gd_map.loss, "--", color="navy", lw=1, label="theory, reduced GD map")
    ax.set_xlabel(r"time $t$ (units of $\tau$; $t/\tau$ = lr $\times$ step)")
    ax.set_ylabel(r"training loss $\mathcal{L}$ (Eq. 1)")
    ax.set_title(_title(metrics), fontsize=9)
    ax.set_ylim(bottom=0)
    predicted = metrics.get("stages") or {}
    shown = [s["time"] for s in predicted.get("stages", ()) if s["within_t_max"]]
    if shown:  # close stages share one label ("2,3"), never written over each other
        label = f"stage times, gdln.timescales (u0 = {predicted['u0']:.2g})"
        mark_stages(ax, shown, label=label)
    place_legend(ax, fontsize=8)  # beside the axes, not over the curves
    return fig


@dataclass(frozen=True)
class Panel:
    """One panel of ``singular_values.png``.

    Attributes
    ----------
    edges
        The trained edges it draws: one edge, or a lumped variable's orbit (edges with one
        theory curve).
    modes
        The reduction's numbers of the modes those edges carry (as in
        ``Reduction.edge_bases``, the text report and ``metrics.json``'s ``modes``); empty
        where the reduction has no variable for the edges.
    """

    edges: tuple[Edge, ...]
    modes: tuple[int, ...]


def plot_singular_values(
    out: Path, metrics: Mapping[str, Any], reduction: Any, runs: Runs
) -> list[Path]:
    """``singular_values.png``/``.svg``: the modes' strengths against time (Fig. 4f); on
    the matrix route (``reduction`` ``None``) each edge's singular values by rank."""
    if reduction is None:
        return save_figure(matrix_singular_value_figure(metrics, runs), out, "singular_values")
    fig, _ = singular_value_figure(metrics, reduction, runs)
    return save_figure(fig, out, "singular_values")


def trained_edges(graph: nx.DiGraph) -> list[Edge]:
    r"""The graph's edges that learn (all but the fixed ones, $W_e = c\,I$)."""
    return [tuple(e) for e in graph.edges if graph.edges[e].get("fixed") is None]


def singular_value_figure(
    metrics: Mapping[str, Any], reduction: Any, runs: Runs
) -> tuple[Any, list[Panel]]:
    r"""The figure of ``singular_values.png`` and the panels it drew, one per orbit.

    Every trained edge is drawn: one panel per edge or per orbit of a lumped variable, in
    a grid. Each mode keeps its identity over time: the theory's $b_e^\alpha(t)$ (Eq. 9)
    and the decoupled run's projection on the same mode vectors are drawn mode by mode,
    never sorted by value, so curves that cross stay continuous; the random runs' singular
    values (which have no mode identity) are drawn in rank order, median and quartiles
    over the seeds and the orbit's edges.
    """
    theory = theory_edge_values(reduction, runs.ode)
    panels = [
        Panel(group, tuple(reduction.edge_bases(group[0])[2]) if group[0] in theory else ())
        for group in edge_orbits(reduction, trained_edges(reduction.problem.graph))
    ]
    ncols = min(4, len(panels))
    nrows = -(-len(panels) // ncols)
    fig = _figure((3.4 * max(ncols, 2), 3.0 * nrows + 1.2))
    axes = fig.subplots(nrows, ncols, sharey=True, squeeze=False).ravel()
    for ax, panel in zip(axes, panels, strict=False):
        _draw_panel(ax, panel, theory, runs)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    axes[0].set_ylabel("mode strength $b_e^\\alpha$ / singular values")
    entries: dict[str, Any] = {}  # every panel's entries once, beside the panels
    for ax in axes[: len(panels)]:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    fig.legend(
        list(entries.values()), list(entries), loc="outside lower center", ncol=3, fontsize=7
    )
    fig.suptitle(_title(metrics), fontsize=9)
    return fig, panels


def matrix_singular_value_figure(metrics: Mapping[str, Any], runs: Runs) -> Any:
    """The figure of ``singular_values.png`` on the matrix route: per trained edge, the
    singular values by rank of the full-matrix flow from each seed's weights (median over
    the seeds) and of the simulations (median and quartiles)."""
    edges = list(metrics["singular_values_at_end"])  # the trained edges, by name
    ncols = min(4, len(edges))
    nrows = -(-len(edges) // ncols)
    fig = _figure((3.4 * max(ncols, 2), 3.0 * nrows + 1.2))
    axes = fig.subplots(nrows, ncols, sharey=True, squeeze=False).ravel()
    for ax, e in zip(axes, edges, strict=False):
        theory = np.median(runs.ode.singular_values(e), axis=1)
        q1, median, q3 = np.percentile(runs.random.singular_values(e), [25, 50, 75], axis=1)
        for r in range(theory.shape[1]):
            colour = _COLOURS[r % len(_COLOURS)]
            ax.fill_between(runs.random.t, q1[:, r], q3[:, r], color="tab:red", alpha=0.12, lw=0)
            ax.plot(
                runs.random.t,
                median[:, r],
                ":",
                color="tab:red",
                lw=1.2,
                label="simulation: median and IQR over seeds" if r == 0 else None,
            )
            ax.plot(
                runs.ode.t,
                theory[:, r],
                color=colour,
                lw=2,
                label=f"rank {r + 1}: full-matrix flow, median over seeds",
            )
        ax.set_title(f"edge {e}", fontsize=8)
        ax.set_xlabel(r"time $t/\tau$ (lr $\times$ step)")
    for ax in axes[len(edges) :]:
        ax.set_visible(False)
    axes[0].set_ylabel("singular values of $W_e$")
    axes[0].legend(fontsize=7, ncol=1)
    fig.suptitle(_title(metrics), fontsize=9)
    return fig


_COLOURS = ("tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:olive", "tab:cyan")
_STYLES: tuple[Any, ...] = ("-", (0, (6, 2)), (0, (3, 3)), (3, (3, 3)), (0, (1, 1)), (1, (1, 1)))


def _draw_panel(ax: Any, panel: Panel, theory: Mapping[Edge, np.ndarray], runs: Runs) -> None:
    """One orbit: random singular values by rank, then theory and decoupled run by mode."""
    ode, decoupled, random = runs.ode, runs.decoupled, runs.random
    assert decoupled is not None  # the reduced routes' figure
    names = [edge_name(e) for e in panel.edges]
    k = len(panel.modes) or random.singular_values(panel.edges[0]).shape[2]
    pooled = np.concatenate([random.singular_values(e)[:, :, :k] for e in panel.edges], axis=1)
    q1, median, q3 = np.percentile(pooled, [25, 50, 75], axis=1)
    for r in range(k):
        ax.fill_between(random.t, q1[:, r], q3[:, r], color="tab:red", alpha=0.12, lw=0)
        ax.plot(
            random.t,
            median[:, r],
            ":",
            color="tab:red",
            lw=1.2,
            label="random init: singular values by rank, median and IQR" if r == 0 else None,
        )
    step = max(1, len(decoupled.t) // 25)
    curves = theory[panel.edges[0]] if panel.modes else np.zeros((len(ode.t), 0))
    for group in equal_groups(list(curves.T)):  # modes of equal strength: one curve, named
        a, mode = group[0], panel.modes[group[0]]
        colour, style = _COLOURS[mode % len(_COLOURS)], _STYLES[mode % len(_STYLES)]
        modes = ", ".join(str(panel.modes[g]) for g in group)
        ax.plot(
            ode.t,
            curves[:, a],
            color=colour,
            lw=2,
            ls=style,
            label=f"mode{'s' if len(group) > 1 else ''} {modes}: theory (Eq. 10)",
            gid=f"theory mode{'s' if len(group) > 1 else ''} {modes}",
        )
        for i, e in enumerate(panel.edges):
            ax.plot(
                decoupled.t[::step],
                decoupled.projections(e)[::step, 0, a],
                "o",
                color=colour,
                ms=3,
                mfc="none",
                label="decoupled init, b_e of each mode" if a == 0 and i == 0 else None,
            )
    ax.set_title(_panel_title(names, bool(panel.modes)), fontsize=8)
    ax.set_xlabel(r"time $t/\tau$ (lr $\times$ step)")


def _panel_title(names: Sequence[str], has_theory: bool) -> str:
    """The edges of a panel: all of them, or first and last of a long orbit, and the count."""
    shown = ", ".join(names) if len(names) <= 3 else f"{names[0]}, ..., {names[-1]}"
    title = f"edge {shown}" if len(names) == 1 else f"{len(names)} edges: {shown}"
    return title if has_theory else f"{title} (no theory variable)"


def _title(metrics: Mapping[str, Any], *, width: int = 95) -> str:
    """The problem, the learning rate and where theory and random runs start, broken into
    lines of at most ``width`` characters (whole phrases kept together) so that nothing is
    cut off at the figure's edge."""
    params = ", ".join(f"{k}={v}" for k, v in metrics["params"].items())
    values = list(metrics["b0"].values())
    if metrics["theory_start"] == "random":
        start = f"b(0) from the random weights ({min(values):.3g}–{max(values):.3g})"
    else:
        start = f"b(0) = {values[0]:g}"
    phrases = [
        f"{metrics['graph']}" + (f" ({params})" if params else "") + ";",
        f"lr = {metrics['lr']:g},",
        f"{start},",
        f"random: {metrics['starts']['random']}"
        if "starts" in metrics
        else f"random: {metrics['init_scheme']} $\\sigma_0$ = {metrics['init_scale']:g}",
    ]
    lines = [""]
    for phrase in phrases:
        joined = f"{lines[-1]} {phrase}".strip()
        if lines[-1] and len(joined) > width:
            lines.append(phrase)
        else:
            lines[-1] = joined
    return "\n".join(textwrap.fill(line, width) for line in lines)


def _figure(figsize: tuple[float, float] = (7.5, 4.8)) -> Any:
    """A new figure with a constrained layout, drawn without a display."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt.figure(figsize=figsize, layout="constrained")
