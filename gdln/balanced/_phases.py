r"""The λ-balanced closed form restarted at every phase of a schedule.

For a two-layer pathway $\Lambda = W_2^\top W_2 - W_1W_1^\top$ is conserved by gradient
flow under any data (Saxe, Sodhani & Lewallen 2022, Eqs. 3-4, with $\gamma = 0$; under
weight decay it decays as $e^{-2\gamma t}$), so a pathway that starts a schedule
λ-balanced starts every phase λ-balanced with the same $\lambda$, and each phase is the
closed form of :mod:`gdln.balanced._riccati` (Braun, Dominé, Fitzgerald & Saxe 2022;
Dominé et al. 2025) from the factor $Q = [W_1^\top; W_2]$ the previous phase ended with.

What changes from phase to phase is each pathway's $\Sigma^{yx}(p)$ and the scale $c$ of
$\Sigma^x(p,p) = c\,\Pi$. The closed form holds on one span $\Pi$: the union of the input
spans of every phase (the pathways of the schedule's union of contexts). A phase must see
that whole span, whitened ($\Sigma^x(p,p) = c_k\Pi$), or nothing at all ($c_k = 0$: the
pathway does not move); a phase that sees part of it is refused, since $W_1$ off the
phase's span would then stay put while $\Lambda$ on the span is no longer $\lambda I$.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .._edge import Edge
from ..paths._statistics import PathStatistics, active_paths, path_statistics
from ..task._problem import Problem
from ..task._task import as_float
from ._errors import BalancedSpecError
from ._pathways import BalancedProblem, Pathway, context_losses, prepare
from ._riccati import riccati_steps
from ._weights import BALANCE_RTOL, balance_of, require_balanced

__all__ = ["BalancedPhase", "balanced_phase", "prepare_schedule", "refuse_decay"]

SPAN_RTOL = 1e-9
r"""How far a phase's $\Sigma^x(p,p)$ may be from $c\,\Pi$ on the union's span, relative
to its largest eigenvalue."""


@dataclass(frozen=True, eq=False)
class BalancedPhase:
    r"""What one phase of the closed form gives.

    Attributes
    ----------
    products
        Pathway name -> $W_2W_1$ at each recorded time, ``(T, |y|, |x|)``.
    context_loss
        ``(T, contexts)``: Eq. (1) within each context of the union.
    end
        Every edge's weights at the phase's end: the pathways' from the factor $Q$ the
        closed form carries (the hidden layer in its own rotation, which no loss sees),
        the others as they came in.
    lambdas
        Pathway name -> $\lambda$.
    """

    products: dict[str, np.ndarray]
    context_loss: np.ndarray
    end: dict[Edge, np.ndarray]
    lambdas: dict[str, float]


def prepare_schedule(union: Problem) -> BalancedProblem:
    """The pathways of the schedule's union of contexts (each context at a positive
    probability), refused where the closed form does not cover them
    (:func:`~gdln.balanced.balanced_pathways`)."""
    return prepare(union)


def refuse_decay(gamma: float, what: str = "") -> None:
    r"""Refuse the closed form's restart under weight decay $\gamma > 0$: the balance
    $\Lambda = W_2^\top W_2 - W_1W_1^\top$ then decays as $e^{-2\gamma t}$ instead of
    being conserved (Braun et al. 2022 need it conserved), so the full-matrix flow solves.

    Parameters
    ----------
    gamma
        The weight decay of the run.
    what
        A prefix for the message (the file and the phase).

    Raises
    ------
    BalancedSpecError
        ``gamma`` is not 0.
    """
    if gamma:
        raise BalancedSpecError(
            f"{what}weight_decay {gamma:g}: no λ-balanced restart, since Λ = "
            "W2ᵀW2 - W1W1ᵀ decays as exp(-2 weight_decay t) instead of being conserved; "
            "the full-matrix flow takes weight decay"
        )


def balanced_phase(
    prepared: BalancedProblem,
    phase: Problem,
    weights: Mapping[Edge, np.ndarray],
    times: np.ndarray,
    *,
    rtol: float = BALANCE_RTOL,
    what: str = "",
) -> BalancedPhase:
    r"""One phase of the closed form from ``weights``, recorded at local ``times`` (from 0).

    Parameters
    ----------
    prepared
        :func:`prepare_schedule` of the union of the schedule's contexts.
    phase
        The problem with this phase's probabilities (the same contexts).
    weights
        Edge -> weights at the phase's start.
    times
        Increasing local times from 0; the last is the phase's end.
    rtol
        The tolerance of the λ-balance (:func:`~gdln.balanced.solve_balanced`).
    what
        A prefix for messages (the file and the phase).

    Returns
    -------
    BalancedPhase
        The products, context losses and end weights.

    Raises
    ------
    BalancedSpecError
        A phase that sees part of a pathway's span, or inputs that are not whitened.
    NotBalancedError
        A pathway that is not λ-balanced at the phase's start.
    """
    task = phase.require_task()
    active = active_paths(phase.graph, task)
    stats = path_statistics(phase.graph, task, active)
    products: dict[int, np.ndarray] = {}
    named: dict[str, np.ndarray] = {}
    end = {e: np.array(w, dtype=float) for e, w in weights.items()}
    lambdas: dict[str, float] = {}
    for index, pathway in enumerate(prepared.pathways):
        w1, w2 = end[pathway.first], end[pathway.second]
        balance = balance_of(pathway, w1, w2)
        require_balanced(phase, pathway, balance, rtol)
        scale, target = _phase_statistics(pathway, stats, what)
        r, basis = pathway.rank, pathway.basis
        q0 = np.vstack([(w1 @ basis).T, w2])
        P, q = riccati_steps(target, balance.lam, q0, scale * times, what=f"{what}{pathway.name}: ")
        products[index] = P[:, r:, :r] @ basis.T
        named[pathway.name] = products[index]
        lambdas[pathway.name] = balance.lam
        hidden = w1.shape[0]
        kept = min(hidden, q.shape[1])
        factor = np.zeros((q.shape[0], hidden))
        factor[:, :kept] = q[:, :kept]
        end[pathway.first] = factor[:r].T @ basis.T
        end[pathway.second] = factor[r:]
    return BalancedPhase(named, context_losses(prepared, products), end, lambdas)


def _phase_statistics(
    pathway: Pathway, stats: PathStatistics, what: str
) -> tuple[float, np.ndarray]:
    r"""$c_k$ and $\tilde\Sigma_k = \Sigma^{yx}_k(p)V/c_k$ of a pathway in one phase, on the
    union's span $V$; $c_k = 0$ (a target of zeros) where the phase does not train it."""
    path = pathway.path
    inputs, outputs = stats.input, stats.input_output
    size_x, _, size_y = pathway.sizes
    xx = as_float(inputs[(path, path)]) if (path, path) in inputs else np.zeros((size_x,) * 2)
    yx = as_float(outputs[path]) if path in outputs else np.zeros((size_y, size_x))
    basis = pathway.basis
    top = float(np.linalg.eigvalsh((xx + xx.T) / 2).max(initial=0.0))
    c = float(np.trace(basis.T @ xx @ basis)) / max(pathway.rank, 1)
    if np.linalg.norm(xx - c * basis @ basis.T) > SPAN_RTOL * max(top, pathway.scale):
        raise BalancedSpecError(
            f"{what}pathway {pathway.name}: Σx(p,p) in this phase is not c·Π on the union of "
            "the phases' input spans; the λ-balanced restart needs every phase to see the "
            "whole span, whitened, or none of it"
        )
    if c <= SPAN_RTOL * pathway.scale:
        return 0.0, np.zeros((size_y, pathway.rank))
    return c, yx @ basis / c
