r"""A ReLU run against its extracted gated network's dynamics (``gdln plot RUN --gated``).

Three panels on the run's time axis: the ReLU network's loss with the full-matrix
dynamics of the GDLN of its patterns started at the extracted step (Eqs. 3-4 of Saxe,
Sodhani & Lewallen 2022); the fraction of (example, unit) patterns that flip between
records; and, with a prediction, the share of the output carried by units in the
predicted gating classes and by units of the predicted selectivity (Jarvis et al. 2025).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..report._plots import place_legend

if TYPE_CHECKING:
    from ..gating import ReluTheory

__all__ = ["plot_relu_theory"]


def plot_relu_theory(result: ReluTheory, *, fig: Any = None) -> Any:
    """Draw a ReLU run against the theory of its extracted gated network.

    Parameters
    ----------
    result
        :func:`gdln.gating.relu_theory` of a run.
    fig
        A matplotlib figure to draw on (default: a new one, made without pyplot).

    Returns
    -------
    matplotlib.figure.Figure
        Its lines carry gids: ``relu-loss``, ``gated-theory`` (on the run's time axis),
        ``flips``, ``agreement``, ``selectivity`` and ``on-in-<k>`` (the share of units on
        in k contexts). Panels: the loss and the theory's, the pattern flips between records, and (with
        a prediction) the share of the predicted gatings over time.
    """
    if fig is None:
        from matplotlib.figure import Figure

        rows = 3 if result.agreement is not None else 2
        fig = Figure(figsize=(9.0, 3.0 * rows), layout="constrained")
    rows = 3 if result.agreement is not None else 2
    found = result.extraction
    ax = fig.add_subplot(rows, 1, 1)
    ax.plot(result.t, result.loss, color="C0", lw=2.2, label="ReLU network", gid="relu-loss")
    start = result.start
    ax.plot(
        result.theory.t + start,
        result.theory.loss,
        color="C3",
        lw=1.2,
        ls="--",
        gid="gated-theory",
        label=f"gated network of step {found.step} ({result.dynamics})",
    )
    ax.axvline(start, color="0.5", lw=0.8, ls=":")
    positive = result.loss[result.loss > 0]
    if positive.size and positive.max() > 100 * positive.min():
        ax.set_yscale("log")
    ax.set_ylabel("loss")
    ax.set_title(
        f"{found.source}, seed {result.seed}: {len(found.groups)} gated node(s) at step "
        f"{found.step}; largest gap {result.gap():.2g} of the loss there",
        fontsize=9,
    )
    place_legend(ax)
    ax = fig.add_subplot(rows, 1, 2, sharex=ax)
    flips = np.asarray(result.flip_fraction, float)
    shown = np.where(flips > 0, flips, np.nan)
    ax.plot(
        result.flip_t, shown, ".-", color="C2", ms=3, lw=0.8, label="patterns flipped", gid="flips"
    )
    if np.isfinite(shown).any():
        ax.set_yscale("log")
    frozen = found.frozen_from
    text = "never frozen in the run" if frozen is None else f"frozen from step {frozen}"
    ax.set_ylabel("flips between records")
    ax.set_title(f"fraction of (example, unit) patterns that flip: {text}", fontsize=9)
    place_legend(ax)
    if result.agreement is not None and result.prediction is not None:
        ax = fig.add_subplot(rows, 1, 3, sharex=ax)
        agreement = result.agreement
        ax.plot(
            agreement.t,
            agreement.agreement,
            color="C1",
            label="predicted gatings",
            gid="agreement",
        )
        ax.plot(
            agreement.t,
            agreement.selectivity,
            color="C4",
            ls="--",
            gid="selectivity",
            label="predicted selectivity",
        )
        contexts = agreement.sizes.shape[1] - 1
        for size in range(1, contexts + 1):
            ax.plot(
                agreement.t,
                agreement.sizes[:, size],
                color=f"C{5 + size % 5}",
                lw=0.8,
                alpha=0.8,
                gid=f"on-in-{size}",
                label=f"on in {size} of {contexts}",
            )
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel("share of the output")
        ax.set_title(
            "the ReLU network's output by its units' gating classes\npredicted: "
            f"{result.prediction.selectivity()}",
            fontsize=9,
        )
        place_legend(ax)
    ax.set_xlabel("t (units of tau)")
    return fig
