r"""The exact learning dynamics of a GDLN from a λ-balanced start, aligned or not.

Each pathway of :func:`~gdln.balanced.balanced_pathways` learns on its own (Eqs. 3-4 of
Saxe, Sodhani & Lewallen 2022) as a two-layer network with its gated statistics; on the
inputs' span, in the clock $ct$ with $\Sigma^x(p,p) = c\,\Pi$, this is the whitened flow
whose λ-balanced solution is closed form (:mod:`gdln.balanced._riccati`; Braun, Dominé,
Fitzgerald & Saxe 2022; Dominé et al. 2025). Time follows gdln's convention
$\tau\,dW/dt = -\partial\mathcal L/\partial W$ with $\tau = 1$.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._edge import edge_name
from .._errors import GdlnError
from .._runtime._blas import one_blas_thread
from ..solution._recording import Recording
from ..solution._series import CONTEXT_LOSS, pathway_key
from ..solution._trajectory import Trajectory
from ..task._problem import Problem
from ._pathways import context_losses, prepare
from ._riccati import riccati_solution
from ._weights import BALANCE_RTOL, balance_of, pathway_weights, read_weights, require_balanced

__all__ = ["BALANCED_ROUTE", "SERIES", "solve_balanced"]

BALANCED_ROUTE = "lambda-balanced"
"""``meta["route"]`` of the closed-form λ-balanced solution (what
:func:`gdln.trajectory_kernels` reads to take its representations)."""

SERIES = ("W2W1", "W1TW1", "W2W2T")
"""The series :func:`solve_balanced` records per pathway, as ``"<name>/<pathway>"``:
the network function $W_2W_1$ ``(T, |y|, |x|)`` and the representations $W_1^\\top W_1$
``(T, |x|, |x|)`` and $W_2W_2^\\top$ ``(T, |y|, |y|)``."""

MAX_POINTS = 1_000_000
"""Most recorded times of one solve."""


@one_blas_thread()
def solve_balanced(
    problem: Problem,
    weights: Mapping[Any, Any],
    *,
    t_max: float,
    points: int = 201,
    rtol: float = BALANCE_RTOL,
) -> Trajectory:
    r"""Solve the gradient flow exactly from λ-balanced weights, aligned with the task or not.

    Parameters
    ----------
    problem
        A problem whose active paths are independent, whitened two-layer pathways
        (:func:`~gdln.balanced.balanced_pathways`): XoR's four pathways, ``context.yaml``,
        dedicated routes, a two-layer linear network on whitened inputs.
    weights
        Edge (``"u->v"``, ``"W/u->v"`` as :func:`gdln.simulate` records it, or ``(u, v)``)
        -> array ``(|v|, |u|)``. Each pathway's start must be λ-balanced on the inputs it
        sees: $W_2^\top W_2 - W_1W_1^\top = \lambda I$ (each pathway has its own
        $\lambda$), with $W_1$ zero off the span of $\Sigma^x(p,p)$. Draw one with
        :func:`~gdln.balanced.balanced_weights`; decoupled weights
        (:meth:`gdln.Reduction.decoupled_weights`) are λ = 0 starts where every hidden
        direction carries a mode.
    t_max
        Final time, in units of $\tau$.
    points
        Number of recorded times, evenly spaced from 0 to ``t_max``.
    rtol
        Tolerance of $\lVert\Lambda-\lambda I\rVert_F$ relative to
        $\max(1, \lVert W_1\rVert_F^2, \lVert W_2\rVert_F^2)$.

    Returns
    -------
    Trajectory
        ``t``, ``loss`` (Eq. 1) and series per pathway ``"W2W1/<pathway>"``,
        ``"W1TW1/<pathway>"`` and ``"W2W2T/<pathway>"`` (:data:`SERIES`; input and
        output sides in the nodes' own coordinates), and ``"context_loss"``
        ``(T, contexts)``; ``meta`` holds ``"route"`` (``"lambda-balanced"``, as
        :func:`~gdln.balanced.solve_from_weights` returns it too), ``"lambda"``
        (pathway -> $\lambda$), ``"pathways"`` (pathway -> its two edges) and
        ``"context_labels"``.

    Raises
    ------
    BalancedSpecError
        The problem is outside the solution (the message names the pathway or edge and
        why), or a weight is missing or malformed.
    NotBalancedError
        A pathway's start is not λ-balanced; the message gives
        $\lVert\Lambda - \lambda I\rVert_F$.
    GdlnError
        ``t_max`` or ``points`` is not a positive number, or the problem's
        ``weight_decay`` is not 0 (the Riccati solution holds without decay; the
        full-matrix flow, :func:`gdln.solve` with ``weights``, takes any).

    References
    ----------
    Fukumizu (1998) and Braun, Dominé, Fitzgerald & Saxe (2022), "Exact learning dynamics
    of deep linear networks with prior knowledge" (the matrix Riccati solution, $\lambda = 0$);
    Dominé et al. (2025), "From lazy to rich: exact learning dynamics in deep linear
    networks" (any $\lambda$); Saxe, Sodhani & Lewallen (2022), Eqs. (1)-(6).

    Examples
    --------
    >>> import gdln
    >>> problem = gdln.load("graphs/xor.yaml", params={"hidden": 1})
    >>> start = gdln.balanced_weights(problem, lam=0.5, scale=0.1, seed=0)
    >>> trajectory = gdln.solve_balanced(problem, start, t_max=40.0, points=3)
    >>> round(trajectory.meta["lambda"]["x->h0->y"], 12), bool(trajectory.loss[-1] < 1e-9)
    (0.5, True)
    """
    if not (isinstance(t_max, (int, float)) and t_max > 0 and math.isfinite(t_max)):
        raise GdlnError(f"t_max must be a positive number, got {t_max!r}")
    if not (isinstance(points, int) and 2 <= points <= MAX_POINTS):
        raise GdlnError(f"points must be an integer in [2, {MAX_POINTS}], got {points!r}")
    if problem.settings.weight_decay:
        raise GdlnError(
            f"{problem.source}: weight_decay {problem.settings.weight_decay:g}: the "
            "lambda-balanced solution holds without weight decay (Lambda then decays as "
            "exp(-2 gamma t)); gdln.solve(problem, weights=...) integrates the flow with it"
        )
    prepared = prepare(problem)
    read = read_weights(problem, weights)
    recording = Recording(points=points)
    times = recording.times_of(float(t_max))
    series: dict[str, np.ndarray] = {}
    products: dict[int, np.ndarray] = {}
    lambdas: dict[str, float] = {}
    for index, pathway in enumerate(prepared.pathways):
        w1, w2 = pathway_weights(problem, pathway, read)
        balance = balance_of(pathway, w1, w2)
        require_balanced(problem, pathway, balance, rtol)
        r, basis = pathway.rank, pathway.basis
        q0 = np.vstack([(w1 @ basis).T, w2])
        P = riccati_solution(
            pathway.target,
            balance.lam,
            q0,
            pathway.scale * times,
            what=f"{problem.source}: pathway {pathway.name}: ",
        )
        product = P[:, r:, :r] @ basis.T
        products[index] = product
        lambdas[pathway.name] = balance.lam
        series[pathway_key("W2W1", pathway.name)] = product
        series[pathway_key("W1TW1", pathway.name)] = basis @ P[:, :r, :r] @ basis.T
        series[pathway_key("W2W2T", pathway.name)] = P[:, r:, r:]
    context_loss = context_losses(prepared, products)
    series[CONTEXT_LOSS] = context_loss
    meta = {
        "source": problem.source,
        "params": {k: str(v) for k, v in problem.params.items()},
        "route": BALANCED_ROUTE,
        "weight_decay": 0.0,
        "method": "lambda-balanced",
        "time_unit": "tau",
        "lambda": lambdas,
        "pathways": {p.name: [edge_name(p.first), edge_name(p.second)] for p in prepared.pathways},
        "context_labels": list(prepared.labels),
    }
    loss = context_loss @ prepared.probabilities
    return Trajectory(t=times, loss=loss, series=series, meta=meta, recording=recording)
