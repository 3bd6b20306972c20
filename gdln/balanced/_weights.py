r"""Weights given to the λ-balanced solution: read by edge name, checked, and measured.

Weights come as a mapping from an edge, ``"source->target"`` (the names
:func:`gdln.simulate` records as ``"W/<edge>"``) or ``(source, target)``, to an array of
shape ``(|target|, |source|)``. For each pathway the conserved matrix
$\Lambda = W_2^\top W_2 - (W_1\Pi)(W_1\Pi)^\top$ is measured (Dominé et al. 2025;
$\Pi$ the projector on the inputs the pathway sees, $\Pi = I$ for whitened full-rank
inputs), with $\lambda = \operatorname{tr}\Lambda/N_h$ and the residual
$\lVert\Lambda - \lambda I\rVert_F$.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._edge import Edge, edge_name
from ..solution._series import edge_in_key
from ..task._problem import Problem
from ._errors import BalancedSpecError, NotBalancedError
from ._pathways import Pathway, balanced_pathways

__all__ = ["Balance", "measure_balance"]

BALANCE_RTOL = 1e-8
"""Default tolerance of $\\lVert\\Lambda-\\lambda I\\rVert_F$, relative to
$\\max(1, \\lVert W_1\\rVert_F^2, \\lVert W_2\\rVert_F^2)$."""


@dataclass(frozen=True)
class Balance:
    r"""$\Lambda = W_2^\top W_2 - W_1W_1^\top$ of one pathway, measured.

    Parameters
    ----------
    lam
        $\lambda = \operatorname{tr}\Lambda / N_h$.
    residual
        $\lVert\Lambda - \lambda I\rVert_F$ (0 for a λ-balanced start).
    scale
        $\max(1, \lVert W_1\Pi\rVert_F^2, \lVert W_2\rVert_F^2)$, what ``residual`` is
        compared with.
    outside
        $\lVert W_1(I - \Pi)\rVert_F$: the part of $W_1$ on inputs the pathway never sees.

    References
    ----------
    Dominé et al. (2025), "From lazy to rich" (λ-balanced weights); Saxe et al.
    (2014) for $\lambda = 0$.
    """

    lam: float
    residual: float
    scale: float
    outside: float = 0.0

    def balanced(self, rtol: float = BALANCE_RTOL) -> bool:
        """Whether ``residual <= rtol * scale`` and ``outside <= rtol * sqrt(scale)``.

        Parameters
        ----------
        rtol
            The relative tolerance.

        Returns
        -------
        bool
            True for a λ-balanced start on the inputs' span.
        """
        return self.residual <= rtol * self.scale and self.outside <= rtol * self.scale**0.5


def read_weights(problem: Problem, weights: Mapping[Any, Any]) -> dict[Edge, np.ndarray]:
    """Each given weight as a float array under its edge, checked against the graph."""
    graph = problem.graph
    by_name = {edge_name(e): e for e in graph.edges}
    out: dict[Edge, np.ndarray] = {}
    if not isinstance(weights, Mapping):
        raise BalancedSpecError(
            f"{problem.source}: weights: expected a mapping from edge to array, "
            f"got {type(weights).__name__}"
        )
    for key, value in weights.items():
        if isinstance(key, str):
            key = edge_in_key("W", key) or key
        edge = by_name.get(key) if isinstance(key, str) else key
        if not isinstance(edge, tuple) or edge not in graph.edges:
            raise BalancedSpecError(
                f"{problem.source}: weights: {key!r} is not an edge of the graph; expected "
                f"names such as {next(iter(by_name), '?')!r}"
            )
        shape = (int(graph.nodes[edge[1]]["size"]), int(graph.nodes[edge[0]]["size"]))
        try:
            array = np.asarray(value, dtype=float)
        except (TypeError, ValueError) as err:
            raise BalancedSpecError(
                f"{problem.source}: weights[{edge_name(edge)!r}]: expected a float array "
                f"of shape {shape}, got {type(value).__name__}"
            ) from err
        if array.shape != shape:
            raise BalancedSpecError(
                f"{problem.source}: weights[{edge_name(edge)!r}]: expected shape {shape} "
                f"(|target|, |source|), got {array.shape}"
            )
        if not np.all(np.isfinite(array)):
            raise BalancedSpecError(
                f"{problem.source}: weights[{edge_name(edge)!r}]: holds non-finite values"
            )
        out[edge] = array
    return out


def pathway_weights(
    problem: Problem, pathway: Pathway, weights: Mapping[Edge, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """$(W_1, W_2)$ of a pathway from read weights; one line naming a missing edge."""
    missing = [e for e in (pathway.first, pathway.second) if e not in weights]
    if missing:
        raise BalancedSpecError(
            f"{problem.source}: weights: no array for edge {edge_name(missing[0])} of "
            f"pathway {pathway.name}"
        )
    return weights[pathway.first], weights[pathway.second]


def balance_of(pathway: Pathway, w1: np.ndarray, w2: np.ndarray) -> Balance:
    r"""$\Lambda$ of one pathway on its inputs' span (module docstring)."""
    inside = w1 @ pathway.basis
    lam_matrix = w2.T @ w2 - inside @ inside.T
    lam = float(np.trace(lam_matrix)) / lam_matrix.shape[0]
    residual = float(np.linalg.norm(lam_matrix - lam * np.eye(lam_matrix.shape[0])))
    scale = max(1.0, float(np.sum(inside**2)), float(np.sum(w2**2)))
    outside = float(np.linalg.norm(w1 - inside @ pathway.basis.T))
    return Balance(lam=lam, residual=residual, scale=scale, outside=outside)


def measure_balance(problem: Problem, weights: Mapping[Any, Any]) -> dict[str, Balance]:
    r"""Measure $\Lambda = W_2^\top W_2 - W_1W_1^\top$ of every pathway of a problem.

    Parameters
    ----------
    problem
        A problem whose pathways :func:`balanced_pathways` accepts.
    weights
        Edge (``"u->v"``, ``"W/u->v"`` or ``(u, v)``) -> array ``(|v|, |u|)``; every
        pathway's two edges are needed, others are checked and ignored.

    Returns
    -------
    dict of str to Balance
        Pathway name (``"x->h->y"``) -> its :class:`Balance`.

    Raises
    ------
    BalancedSpecError
        The problem is outside the λ-balanced solution, or a weight is missing, names no
        edge, has the wrong shape or holds non-finite values.

    References
    ----------
    Dominé et al. (2025), "From lazy to rich" (λ-balanced weights).
    """
    read = read_weights(problem, weights)
    out = {}
    for pathway in balanced_pathways(problem):
        out[pathway.name] = balance_of(pathway, *pathway_weights(problem, pathway, read))
    return out


def require_balanced(problem: Problem, pathway: Pathway, balance: Balance, rtol: float) -> None:
    """Refuse a start that is not λ-balanced on the pathway's inputs, in one line."""
    if balance.outside > rtol * balance.scale**0.5:
        raise BalancedSpecError(
            f"{problem.source}: pathway {pathway.name}: W1 acts on inputs the pathway never "
            f"sees (|W1(I - Π)| = {balance.outside:.3g}, Π the span of Σx(p,p)); the exact "
            "solution needs W1 = W1·Π"
        )
    if not balance.balanced(rtol):
        raise NotBalancedError(
            f"{problem.source}: pathway {pathway.name}: the start is not λ-balanced: "
            f"|Λ - λI| = {balance.residual:.3g} with Λ = W2ᵀW2 - W1W1ᵀ and λ = tr Λ/N_h = "
            f"{balance.lam:.6g} (tolerance {rtol:g} x {balance.scale:.3g}); draw a start "
            "with gdln.balanced_weights",
            pathway=pathway.name,
            lam=balance.lam,
            residual=balance.residual,
        )
