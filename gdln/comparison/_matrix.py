r"""Theory against simulation on the matrix route: the full-matrix flow, seed by seed.

Where the path statistics have no common bases (Eqs. 7-8 of Saxe et al. 2022) there is no
reduced ODE, but the full-matrix gradient flow of Eqs. (3)-(4) and its gradient-descent
map hold for any graph and any start. :func:`gdln.compare` then integrates them from each
simulation's own initial weights: the map must follow the simulation of the same seed to
rounding error, and the flow differs from it by the time step only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from .._edge import Edge, edge_name
from ..settings._declared import Settings
from ..simulation import initial_weights
from ..simulation._seeds import seed_list
from ..solution._full import full_solution, initial_full_weights
from ..solution._loss_curve import time_to_half_loss
from ..solution._series import matrix_key
from ..solution._trajectory import Trajectory
from ..task import Problem
from ._metrics import Runs, max_relative_gap
from ._summary import summarize_seeds

__all__ = ["MATRIX_DEFINITIONS", "matrix_metrics", "matrix_starts", "matrix_theory"]

MATRIX_DEFINITIONS: Mapping[str, str] = {
    "random_vs_map": "route matrix: max over seeds of max_t |L_sim(t) - L_map(t)| / L(0), the "
    "full-matrix gradient-descent map from the same seed's initial weights (rounding only)",
    "random_vs_ode": "route matrix: max_t |L_sim(t) - L_ode(t)| / L(0) of each seed against the "
    "full-matrix flow (Eqs. 3-4) from that seed's own initial weights: median, quartiles, range",
}
"""What the metrics of the matrix route mean, written into ``metrics.json``."""


def matrix_starts(
    problem: Problem, *, rule: str, chosen: Any, seeds: int, seed: int
) -> dict[Edge, np.ndarray]:
    r"""The initial weights of every seed, ``(S, |t|, |s|)`` per edge.

    Rule ``"random"``: the random scheme's weights at ``init_scale`` (those
    :func:`gdln.simulate` draws). Rule ``"b0"``: random weights whose singular values all
    equal $b(0)$ (:func:`gdln.solution._full.initial_full_weights`), one draw per seed.
    """
    if rule == "random":
        drawn = initial_weights(
            problem.graph,
            init_scheme=chosen.init_scheme,
            init_scale=chosen.init_scale,
            seeds=seeds,
            seed=seed,
        )
        graph = problem.graph
        for e in graph.edges:  # a fixed edge holds c I in the simulation, whatever is drawn
            fixed = graph.edges[e].get("fixed")
            if fixed is not None:
                drawn[e] = np.broadcast_to(
                    float(fixed) * np.eye(*drawn[e].shape[1:]), drawn[e].shape
                )
        return drawn
    draws = [initial_full_weights(problem, chosen, seed=s) for s in seed_list(seeds, seed)]
    return {e: np.stack([d[e] for d in draws]) for e in problem.graph.edges}


def matrix_theory(
    problem: Problem,
    starts: Mapping[Edge, np.ndarray],
    chosen: Settings,
    *,
    t_max: float,
    times: np.ndarray,
) -> tuple[Trajectory, Trajectory]:
    """The full-matrix flow and gradient-descent map (learning rate ``chosen.lr``, weight
    decay ``chosen.weight_decay``) from each seed's weights, stacked as a simulation's
    are: loss ``(T, S)``, singular values ``(T, S, k)`` per edge."""
    n = len(next(iter(starts.values())))
    runs: dict[str, list[Trajectory]] = {"flow": [], "gd-map": []}
    for s in range(n):
        weights = {e: w[s] for e, w in starts.items()}
        for dynamics in runs:
            settings = replace(chosen, t_max=t_max, dynamics=dynamics)
            runs[dynamics].append(full_solution(problem, settings, weights, times=times))
    return _stacked(runs["flow"], "flow"), _stacked(runs["gd-map"], "gd-map")


def _stacked(runs: Sequence[Trajectory], dynamics: str) -> Trajectory:
    first = runs[0]
    prefix = matrix_key("sv", "")[:-1]  # the singular values of every edge: "sv[" ... "]"
    edges = [k for k in first.series if k.startswith(prefix)]
    series = {k: np.stack([r.series[k] for r in runs], axis=1) for k in edges}
    meta = {**first.meta, "route": "matrix", "seeds": len(runs), "dynamics": dynamics}
    recording = first.recording and replace(first.recording, weights=False)  # only sv[...]
    loss = np.stack([r.loss for r in runs], axis=1)
    return Trajectory(first.t, loss, series, meta, recording=recording)


def matrix_metrics(runs: Runs, *, edges: Sequence[Edge]) -> dict[str, Any]:
    """The gaps of each seed's simulation to the full-matrix flow and map from its own
    weights, and every run's time to half loss (per seed)."""
    ode, gd_map, random = runs.ode, runs.gd_map, runs.random
    n = random.loss.shape[1]

    def gaps(theory: Trajectory) -> list[float]:
        return [
            max_relative_gap(random.t, random.loss[:, s], theory.t, theory.loss[:, s])
            for s in range(n)
        ]

    to_ode, to_map = gaps(ode), gaps(gd_map)
    t_max = float(random.t[-1])
    half = {
        name: [time_to_half_loss(run.t, run.loss[:, s]) for s in range(n)]
        for name, run in (("ode", ode), ("gd_map", gd_map), ("random", random))
    }
    return {
        "initial_loss": float(np.mean(ode.loss[0])),
        "initial_loss_per_seed": [float(v) for v in ode.loss[0]],
        "random_vs_map": max(to_map),
        "random_vs_map_per_seed": to_map,
        "random_vs_ode": summarize_seeds(to_ode).to_json(),
        "random_vs_ode_per_seed": to_ode,
        "map_vs_ode": max(
            max_relative_gap(gd_map.t, gd_map.loss[:, s], ode.t, ode.loss[:, s]) for s in range(n)
        ),
        "time_to_half_loss": {
            "ode_per_seed": half["ode"],
            "gd_map_per_seed": half["gd_map"],
            "random_per_seed": half["random"],
            "ode": summarize_seeds(half["ode"], t_max=t_max).to_json(),
            "random": summarize_seeds(half["random"], t_max=t_max).to_json(),
        },
        "singular_values_at_end": {
            edge_name(e): np.median(ode.series[matrix_key("sv", e)][-1], axis=0).tolist()
            for e in edges
        },
    }


def typical_scale(starts: Mapping[Edge, np.ndarray], edges: Sequence[Edge]) -> dict[Edge, float]:
    r"""Per edge, the root-mean-square singular value of its initial weights over the seeds:
    the scale $u_0$ the asymptotic stage times take from a random start."""
    out = {}
    for e in edges:
        w = np.asarray(starts[e], dtype=float)
        k = min(w.shape[-2:])
        out[e] = float(np.sqrt(np.mean(np.sum(w**2, axis=(-2, -1)) / k)))
    return out
