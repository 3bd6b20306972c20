r"""How far the simulations are from the theory: the metrics of :func:`gdln.compare`.

Every gap is a loss difference relative to the initial loss,
$\max_t |L(t) - L_\mathrm{ref}(t)| / L_\mathrm{ref}(0)$, over the times both runs recorded
(:func:`gdln.compare` records all its runs at the same steps); nothing is interpolated,
since a straight line between recorded points of a falling loss is off by more than the
gap between an exact theory and the network. The time to half loss is the first $t/\tau$
with $L(t) \le L(0)/2$ (Eq. 1 of Saxe et al. 2022 for $L$).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._errors import GdlnError
from ..solution._loss_curve import time_to_half_loss
from ..solution._trajectory import Trajectory
from ._summary import SPREAD, summarize_seeds

__all__ = ["DEFINITIONS", "Runs", "loss_metrics", "max_relative_gap"]

DEFINITIONS: Mapping[str, str] = {
    "decoupled_vs_map": "max_t |L_sim(t) - L_map(t)| / L(0), decoupled init (Eq. 9)",
    "times": "every gap is taken at the steps all runs recorded (t/tau = lr * step), "
    "never between recorded points",
    "random_vs_ode": "max_t |L_sim(t) - L_ode(t)| / L(0) of each random seed: median, "
    f"{SPREAD}, and the number of seeds",
    "random_mean_vs_ode": "max_t |mean over seeds of L_sim(t) - L_ode(t)| / L(0)",
    "theory_start": "random: b_e(0) read off the random initial weights "
    "(gdln.comparison.initial_mode_strengths); b0: the b0 setting (b0 holds the values); "
    "theory_start_from says which source decided (auto: the run's b0 or init_scale, else "
    "the file's solve.b0, else random), starts where each curve starts",
    "modes": "edge -> the reduction's numbers of the modes it carries (Reduction.edge_bases), "
    "as in the figures' legends and in gdln derive's text ('system k: modes [...]')",
    "time_to_half_loss": "first t/tau with L(t) <= L(0)/2, linear interpolation; null "
    "(one run) or '> t_max' (a quantile over seeds) where not reached within t_max",
    "time_to_half_loss.random": f"over all seeds, censored ones (never within t_max) "
    f"counted as > t_max: median, {SPREAD}; the q-quantile is the smallest time by which "
    "a fraction q of the seeds reached half loss",
    "stages": "gdln.timescales on the same problem, route and b(0) (u0: b0, or the geometric "
    "mean of the per-edge b_e(0)): each stage's leading-order escape time in tau, its "
    "formula in u0, the variables that become active, the plateau loss after it and whether "
    "it falls within t_max (then a dotted line in loss.png); note says why the list is empty",
}
"""What the metrics in ``metrics.json`` mean, written into it."""


@dataclass(frozen=True)
class Runs:
    """The four trajectories of a comparison: reduced ODE and map, two simulations."""

    ode: Trajectory
    gd_map: Trajectory
    decoupled: Trajectory | None
    random: Trajectory


def max_relative_gap(t: np.ndarray, loss: np.ndarray, t_ref: np.ndarray, ref: np.ndarray) -> float:
    r"""$\max_t |L(t) - L_\mathrm{ref}(t)| / L_\mathrm{ref}(0)$ over the times both runs have.

    Parameters
    ----------
    t
        Times of ``loss``, shape ``(T,)``.
    loss
        The loss to judge, shape ``(T,)``.
    t_ref
        Increasing times of ``ref``, shape ``(T_ref,)``, starting at 0 like ``t``. Only the
        times of ``t`` that ``t_ref`` also holds (to $10^{-9}$ of the horizon) are compared;
        nothing is interpolated.
    ref
        The reference loss, e.g. the reduced theory's; ``ref[0]`` must be non-zero.

    Returns
    -------
    float
        The largest gap at the shared times, relative to the reference's initial loss.

    Raises
    ------
    ValueError
        The runs share no recorded time.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (1): the loss compared.

    Examples
    --------
    >>> max_relative_gap(np.array([0.0, 1.0]), np.array([2.0, 1.5]), np.array([0.0, 1.0]),
    ...                  np.array([2.0, 1.0]))
    0.25
    >>> max_relative_gap(np.array([0.0, 1.0, 2.0]), np.array([2.0, 1.9, 0.5]),
    ...                  np.array([0.0, 2.0]), np.array([2.0, 0.25]))  # t = 1 is not shared
    0.125
    """
    t, t_ref = np.asarray(t, float), np.asarray(t_ref, float)
    loss, ref = np.asarray(loss, float), np.asarray(ref, float)
    horizon = max(float(np.max(np.abs(t), initial=0.0)), float(np.max(np.abs(t_ref), initial=0.0)))
    nearest = np.clip(np.searchsorted(t_ref, t), 0, len(t_ref) - 1)
    left = np.maximum(nearest - 1, 0)
    nearest = np.where(np.abs(t_ref[left] - t) < np.abs(t_ref[nearest] - t), left, nearest)
    shared = np.abs(t_ref[nearest] - t) <= 1e-9 * max(horizon, 1e-300)
    if not np.any(shared):
        raise ValueError(
            f"the two runs share no recorded time (times {t[:3]}... and {t_ref[:3]}...); "
            "record them at the same steps"
        )
    gaps = np.abs(loss[shared] - ref[nearest[shared]])
    return float(np.max(gaps) / float(ref[0]))


def loss_metrics(runs: Runs, *, source: str) -> dict[str, Any]:
    """The initial loss, the loss gaps between the runs and each run's time to half loss.

    Summaries over the random seeds cover every seed (:func:`summarize_seeds`): a seed
    that never reaches half loss within the horizon is counted as censored, not dropped.
    ``source`` names the problem in the error raised when the initial loss is not positive.
    """
    ode, gd_map, decoupled, random = runs.ode, runs.gd_map, runs.decoupled, runs.random
    assert decoupled is not None  # the reduced routes' comparison
    l0 = float(ode.loss[0])
    if not l0 > 0:
        raise GdlnError(f"{source}: the initial loss is {l0}; nothing to learn")
    n_seeds = random.loss.shape[1]
    per_seed = [
        max_relative_gap(random.t, random.loss[:, s], ode.t, ode.loss) for s in range(n_seeds)
    ]
    half_random = [time_to_half_loss(random.t, random.loss[:, s]) for s in range(n_seeds)]
    t_max = float(random.t[-1])
    return {
        "initial_loss": l0,
        "decoupled_vs_map": max_relative_gap(
            decoupled.t, decoupled.loss[:, 0], gd_map.t, gd_map.loss
        ),
        "decoupled_vs_ode": max_relative_gap(decoupled.t, decoupled.loss[:, 0], ode.t, ode.loss),
        "map_vs_ode": max_relative_gap(gd_map.t, gd_map.loss, ode.t, ode.loss),
        "random_vs_ode": summarize_seeds(per_seed).to_json(),
        "random_vs_ode_per_seed": per_seed,
        "random_mean_vs_ode": max_relative_gap(random.t, random.loss.mean(1), ode.t, ode.loss),
        "time_to_half_loss": {
            "ode": time_to_half_loss(ode.t, ode.loss),
            "gd_map": time_to_half_loss(gd_map.t, gd_map.loss),
            "decoupled": time_to_half_loss(decoupled.t, decoupled.loss[:, 0]),
            "random_per_seed": half_random,
            "random": summarize_seeds(half_random, t_max=t_max).to_json(),
        },
    }
