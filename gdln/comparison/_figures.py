r"""The figures of :func:`gdln.compare` (Fig. 4e-f of Saxe et al. 2022), and saving figures.

Every figure gdln or its examples make is saved the same way, by :func:`save_figure`.
matplotlib is imported when a figure is made, not with this module.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from .._edge import Edge, edge_name
from ._metrics import Runs
from ._modes import theory_edge_values

__all__ = ["plot_loss", "plot_singular_values", "save_figure"]


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
    plt.close(fig)
    return paths


def plot_loss(out: Path, metrics: Mapping[str, Any], runs: Runs) -> list[Path]:
    """``loss.png``/``.svg``: the loss of Eq. (1) of every run against time (Fig. 4e)."""
    ode, gd_map, decoupled, random = runs.ode, runs.gd_map, runs.decoupled, runs.random
    fig = _figure()
    ax = fig.add_subplot()
    n = random.loss.shape[1]
    mean, std = random.loss.mean(1), random.loss.std(1)
    for s in range(n):
        ax.plot(random.t, random.loss[:, s], color="tab:red", lw=0.5, alpha=0.35)
    ax.fill_between(random.t, mean - std, mean + std, color="tab:red", alpha=0.2, lw=0)
    ax.plot(
        random.t,
        mean,
        color="tab:red",
        lw=1.5,
        label=f"simulation, random init ({n} seeds, mean ± sd)",
    )
    step = max(1, len(decoupled.t) // 25)
    ax.plot(
        decoupled.t[::step],
        decoupled.loss[::step, 0],
        "o",
        color="tab:green",
        ms=4,
        label="simulation, decoupled init (Eq. 9)",
    )
    ax.plot(ode.t, ode.loss, color="tab:blue", lw=2, label="theory, reduced ODE (Eq. 10)")
    ax.plot(gd_map.t, gd_map.loss, "--", color="navy", lw=1, label="theory, reduced GD map")
    ax.set_xlabel(r"time $t$ (units of $\tau$; $t/\tau$ = lr $\times$ step)")
    ax.set_ylabel(r"training loss $\mathcal{L}$ (Eq. 1)")
    ax.set_title(_title(metrics), fontsize=9)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return save_figure(fig, out, "loss")


def plot_singular_values(
    out: Path, metrics: Mapping[str, Any], reduction: Any, runs: Runs
) -> list[Path]:
    """``singular_values.png``/``.svg``: the modes' strengths against time (Fig. 4f).

    One panel per depth of edge, so that edges with equal theory curves stay visible.
    """
    ode, decoupled, random = runs.ode, runs.decoupled, runs.random
    graph = reduction.problem.graph
    theory = theory_edge_values(reduction, ode)
    edges = _plot_edges(graph, [tuple(e) for e in graph.edges if tuple(e) in theory])
    colours = ["tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:olive", "tab:cyan"]
    styles: list[Any] = ["-", (0, (6, 2)), (0, (3, 3)), (3, (3, 3)), (0, (1, 1)), (1, (1, 1))]
    fig = _figure((3.3 * max(len(edges), 2), 4.2))
    axes = fig.subplots(1, len(edges), sharey=True, squeeze=False)[0]
    step = max(1, len(decoupled.t) // 25)
    for ax, edge in zip(axes, edges, strict=True):
        name = edge_name(edge)
        sv_theory = np.sort(np.abs(theory[edge]), axis=1)[:, ::-1]
        k = sv_theory.shape[1]
        sv_random = random.series[f"sv/{name}"][:, :, :k]
        mean, std = sv_random.mean(1), sv_random.std(1)
        for a in range(k):
            colour = colours[a % len(colours)]
            ax.plot(  # a line style per mode too: degenerate modes share a theory curve
                ode.t,
                sv_theory[:, a],
                color=colour,
                lw=2,
                ls=styles[a % len(styles)],
                label=f"mode {a + 1}: theory",
            )
            ax.fill_between(
                random.t,
                mean[:, a] - std[:, a],
                mean[:, a] + std[:, a],
                color=colour,
                alpha=0.15,
                lw=0,
            )
            ax.plot(
                random.t,
                mean[:, a],
                ":",
                color=colour,
                lw=1.5,
                label="random init, mean ± sd" if a == 0 else None,
            )
            ax.plot(
                decoupled.t[::step],
                decoupled.series[f"sv/{name}"][::step, 0, a],
                "o",
                color=colour,
                ms=3,
                mfc="none",
                label="decoupled init" if a == 0 else None,
            )
        ax.set_title(f"edge {name}", fontsize=9)
        ax.set_xlabel(r"time $t/\tau$ (lr $\times$ step)")
    axes[0].set_ylabel("singular values of $W_e$ (one colour per mode)")
    axes[0].legend(fontsize=7, ncol=1)
    fig.suptitle(_title(metrics), fontsize=9)
    return save_figure(fig, out, "singular_values")


def _plot_edges(graph: nx.DiGraph, edges: Sequence[Edge]) -> list[Edge]:
    """One representative edge per depth of its target (input layer, hidden, output...)."""
    depth: dict[Hashable, int] = {}
    for v in nx.topological_sort(graph):
        preds = list(graph.predecessors(v))
        depth[v] = 1 + max(depth[u] for u in preds) if preds else 0
    chosen: dict[int, Edge] = {}
    for e in edges:
        chosen.setdefault(depth[e[1]], e)
    return [chosen[d] for d in sorted(chosen)]


def _title(metrics: Mapping[str, Any]) -> str:
    """The problem, the learning rate and where theory and random runs start."""
    params = ", ".join(f"{k}={v}" for k, v in metrics["params"].items())
    values = list(metrics["init_b"].values())
    if metrics["theory_init"] == "auto":
        start = f"b(0) from the random weights ({min(values):.3g}–{max(values):.3g})"
    else:
        start = f"b(0) = {values[0]:g}"
    return (
        f"{metrics['graph']}" + (f" ({params})" if params else "") + f"; lr = {metrics['lr']:g}, "
        f"{start}, random: {metrics['init_scheme']} $\\sigma_0$ = {metrics['init']:g}"
    )


def _figure(figsize: tuple[float, float] = (7.5, 4.8)) -> Any:
    """A new figure with a constrained layout, drawn without a display."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt.figure(figsize=figsize, layout="constrained")
