r"""Survival modes: the probabilities $p_l$ that residual block $l$ is kept (Hayou & Ayed).

Each mode of :data:`gdln.sd.SURVIVAL_MODES` is a rule from the depth $L$ and its settings
to $(p_1,\dots,p_L)$; :func:`mode_for_budget` solves a mode's setting from the training
budget $\bar L=\sum_l p_l$ (Sec. 2 of Hayou & Ayed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._checks import StochasticDepthError, check_depth, check_probabilities
from ._names import SURVIVAL_MODES

__all__ = ["mode_for_budget", "survival_probabilities"]


def _uniform(L: int, *, p_L: float, **_: Any) -> np.ndarray:
    r"""Uniform mode $p_l = p_L$ (Huang et al. 2016; Sec. 2 of Hayou & Ayed)."""
    return np.full(L, float(p_L))


def _linear(L: int, *, p_L: float, **_: Any) -> np.ndarray:
    r"""Linear mode $p_l = 1 - \frac{l}{L}(1-p_L)$ (Sec. 2 of Hayou & Ayed)."""
    ell = np.arange(1, L + 1, dtype=float)
    return 1.0 - ell / L * (1.0 - float(p_L))


def _per_layer(L: int, *, p: Sequence[float] | np.ndarray, **_: Any) -> np.ndarray:
    given = np.array(p, dtype=float)
    if given.shape != (L,):
        raise StochasticDepthError(
            f"p has shape {given.shape}; expected ({L},), one survival probability per block",
            key="p",
        )
    return given


def _sensemode(
    L: int, *, sensitivities: Sequence[float] | np.ndarray, p_min: float, **_: Any
) -> np.ndarray:
    r"""SenseMode (Sec. 5 of Hayou & Ayed): $|S_l|$ mapped linearly onto $[p_{\min}, 1]$.

    The smallest sensitivity gets $p_{\min}$ and the largest gets 1; equal sensitivities
    give the uniform mode $p_l = 1$.
    """
    s = np.abs(np.asarray(sensitivities, dtype=float))
    if s.shape != (L,) or not np.all(np.isfinite(s)):
        raise StochasticDepthError(
            f"sensitivities has shape {s.shape} (or non-finite entries); expected ({L},) finite",
            key="sensitivities",
        )
    span = s.max() - s.min()
    r = np.ones(L) if span == 0 else (s - s.min()) / span
    return float(p_min) + (1.0 - float(p_min)) * r


def _sensemode_proportional(
    L: int, *, sensitivities: Sequence[float] | np.ndarray, budget: float, **_: Any
) -> np.ndarray:
    r"""The rule of Sec. 6 of Hayou & Ayed: $p_l\propto|S_l|$, at budget $\sum_l p_l=\bar L$.

    Probabilities that would exceed 1 are clipped and the rest rescaled (water filling),
    so the budget is met exactly whenever $\bar L\le L$.
    """
    s = np.abs(np.asarray(sensitivities, dtype=float))
    if s.shape != (L,) or not np.all(np.isfinite(s)) or s.sum() == 0:
        raise StochasticDepthError(
            f"sensitivities has shape {s.shape} or sums to zero; expected ({L},) finite, "
            "not all zero",
            key="sensitivities",
        )
    p = np.zeros(L)
    free = np.ones(L, dtype=bool)
    remaining = float(budget)
    for _round in range(L):
        scale = remaining / s[free].sum() if s[free].sum() > 0 else 0.0
        p[free] = s[free] * scale
        over = free & (p > 1.0)
        if not over.any():
            break
        p[over] = 1.0
        free &= ~over
        remaining = float(budget) - p[~free].sum()
    return np.clip(p, 0.0, 1.0)


#: Each survival mode's rule and the settings it needs, keyed like :data:`SURVIVAL_MODES`.
_RULES: dict[str, tuple[Callable[..., np.ndarray], tuple[str, ...]]] = {
    "uniform": (_uniform, ("p_L",)),
    "linear": (_linear, ("p_L",)),
    "per_layer": (_per_layer, ("p",)),
    "sensemode": (_sensemode, ("sensitivities", "p_min")),
    "sensemode_proportional": (_sensemode_proportional, ("sensitivities", "budget")),
}


def survival_probabilities(mode: str, L: int, **settings: Any) -> np.ndarray:
    r"""Survival probabilities $(p_1,\dots,p_L)$ of a named survival mode.

    Parameters
    ----------
    mode
        A key of :data:`SURVIVAL_MODES`: ``"uniform"`` ($p_l=p_L$), ``"linear"``
        ($p_l = 1-\frac lL(1-p_L)$, Sec. 2 of Hayou & Ayed), ``"per_layer"`` (given ``p``),
        ``"sensemode"`` (sensitivities mapped linearly to $[p_{\min},1]$, Sec. 5) or
        ``"sensemode_proportional"`` ($p_l\propto|S_l|$ at a budget, Sec. 6).
    L
        Number of residual blocks.
    **settings
        ``p_L`` (uniform, linear), ``p`` (per_layer), ``sensitivities`` and ``p_min``
        (sensemode), ``sensitivities`` and ``budget`` (sensemode_proportional).

    Returns
    -------
    numpy.ndarray
        ``(L,)`` probabilities in $[0,1]$.

    Examples
    --------
    >>> survival_probabilities("linear", 4, p_L=0.5).tolist()
    [0.875, 0.75, 0.625, 0.5]
    """
    L = check_depth(L)
    if mode not in _RULES:
        raise StochasticDepthError(
            f"mode = {mode!r} is not a survival mode; expected one of {sorted(SURVIVAL_MODES)}",
            key="mode",
        )
    rule, needs = _RULES[mode]
    missing = [k for k in needs if settings.get(k) is None]
    if missing:
        raise StochasticDepthError(
            f"survival mode {mode!r} needs {', '.join(missing)}; got only "
            f"{sorted(k for k, v in settings.items() if v is not None) or 'nothing'}",
            key=missing[0],
        )
    for key in ("p_L", "p_min"):
        if key in needs:
            value = float(settings[key])
            if not 0.0 <= value <= 1.0:
                raise StochasticDepthError(
                    f"survival probability {key} = {value!r} is outside [0, 1]; "
                    "expected a value in [0, 1]",
                    key=key,
                )
    if mode == "sensemode_proportional":
        budget = float(settings["budget"])
        if not 0.0 < budget <= L:
            raise StochasticDepthError(
                f"budget = {budget!r} is not an average depth of {L} blocks; expected 0 < "
                f"budget <= {L}",
                key="budget",
            )
    return check_probabilities(rule(L, **settings))


def mode_for_budget(
    mode: str, L: int, budget: float, *, sensitivities: Sequence[float] | np.ndarray | None = None
) -> np.ndarray:
    r"""Survival probabilities of a mode whose average depth $\sum_l p_l$ equals ``budget``.

    The training budget $\bar L$ of Sec. 2 of Hayou & Ayed. Uniform: $p_l=\bar L/L$.
    Linear: $\sum_l p_l = L-(1-p_L)(L+1)/2$, so $p_L = 1-2(L-\bar L)/(L+1)$, feasible only
    for $\bar L\ge (L-1)/2$. SenseMode: the linear map onto $[p_{\min},1]$ with $p_{\min}$
    solved from the budget (feasible only when $\bar L\ge\sum_l r_l$ with
    $r_l=(|S_l|-\min|S|)/(\max|S|-\min|S|)$); ``"sensemode_proportional"``: Sec. 6 rule.

    Parameters
    ----------
    mode
        A key of :data:`SURVIVAL_MODES`.
    L
        Number of residual blocks.
    budget
        The average depth $\bar L\in(0, L]$.
    sensitivities
        ``(L,)`` $S_l$ (:func:`layer_sensitivities`), for the SenseMode modes.

    Returns
    -------
    numpy.ndarray
        ``(L,)`` survival probabilities summing to ``budget``.

    Raises
    ------
    StochasticDepthError
        Unknown ``mode``, a budget outside $(0, L]$ or below what the mode can reach,
        or missing sensitivities.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Sec. 2 (budget,
    uniform and linear modes), Sec. 5 (SenseMode) and Sec. 6.

    Examples
    --------
    >>> round(float(mode_for_budget("linear", 9, 7.0).sum()), 12)
    7.0
    """
    L = check_depth(L)
    budget = float(budget)
    if not 0.0 < budget <= L:
        raise StochasticDepthError(
            f"budget = {budget!r} is not an average depth of {L} blocks; expected "
            f"0 < budget <= {L}",
            key="budget",
        )
    if mode == "uniform":
        return survival_probabilities("uniform", L, p_L=budget / L)
    if mode == "linear":
        p_L = 1.0 - 2.0 * (L - budget) / (L + 1)
        if p_L < 0.0:
            raise StochasticDepthError(
                f"budget = {budget!r} is below the smallest average depth of the linear mode "
                f"with L = {L} ({(L - 1) / 2}); expected budget >= (L - 1)/2",
                key="budget",
            )
        return survival_probabilities("linear", L, p_L=p_L)
    if mode == "sensemode":
        if sensitivities is None:
            raise StochasticDepthError("survival mode 'sensemode' needs sensitivities", key="mode")
        r = survival_probabilities("sensemode", L, sensitivities=sensitivities, p_min=0.0)
        R = float(r.sum())
        if budget < R - 1e-12 or R >= L:
            raise StochasticDepthError(
                f"budget = {budget!r} cannot be met by SenseMode's linear map for these "
                f"sensitivities; expected budget >= {R:.6g} (p_min = 0)",
                key="budget",
            )
        p_min = (budget - R) / (L - R)
        return survival_probabilities("sensemode", L, sensitivities=sensitivities, p_min=p_min)
    if mode == "sensemode_proportional":
        return survival_probabilities(mode, L, sensitivities=sensitivities, budget=budget)
    raise StochasticDepthError(
        f"mode = {mode!r} has no budget rule; expected one of "
        "['linear', 'sensemode', 'sensemode_proportional', 'uniform']",
        key="mode",
    )
