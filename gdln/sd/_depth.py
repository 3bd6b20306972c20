r"""Lemma 1 of Hayou & Ayed (2021), *Regularization in ResNet with Stochastic Depth*.

The depth $L_\delta=\sum_l\delta_l$ of the subnetwork that stochastic depth trains
concentrates around its mean $L_p=\sum_lp_l$: Bennett's inequality (Eq. (2)) bounds
$|L_\delta-L_p|$ through $u(t)=(1+t)\log(1+t)-t$ and its inverse.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from ._checks import StochasticDepthError, check_probabilities

__all__ = ["DepthConcentration", "bennett_u", "bennett_u_inverse", "depth_concentration"]


def bennett_u(t: np.ndarray | float) -> np.ndarray | float:
    r"""$u(t) = (1+t)\log(1+t) - t$ (Lemma 1 of Hayou & Ayed, Bennett's inequality).

    Parameters
    ----------
    t
        A number or array, $t > -1$.

    Returns
    -------
    float or numpy.ndarray
        $u(t)$, shaped like ``t``.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Lemma 1.
    """
    t = np.asarray(t, dtype=float)
    out = (1.0 + t) * np.log1p(t) - t
    return float(out) if out.ndim == 0 else out


def bennett_u_inverse(y: np.ndarray | float) -> np.ndarray | float:
    r"""$u^{-1}(y)$ for $y\ge0$, in closed form through the Lambert $W$ function.

    With $w = 1+t$, $u = w\log w - w + 1 = y$ gives $w = e^{1+W((y-1)/e)}$ (principal
    branch).

    Parameters
    ----------
    y
        A number or array, $y\ge 0$.

    Returns
    -------
    float or numpy.ndarray
        The $t\ge 0$ with $u(t)=y$, shaped like ``y``.

    Raises
    ------
    StochasticDepthError
        Some ``y`` is negative.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Lemma 1.
    """
    y = np.asarray(y, dtype=float)
    if np.any(y < 0):
        raise StochasticDepthError(f"y = {y!r}: u^{{-1}} is defined for y >= 0", key="y")
    w = np.exp(1.0 + np.real(special.lambertw((y - 1.0) / np.e, 0)))
    t = np.where(y > 0, np.maximum(w - 1.0, np.sqrt(2.0 * np.maximum(y, 0)) * 0.5), 0.0)
    for _ in range(3):  # Newton polish near the branch point y = 0, where W loses digits
        slope = np.log1p(t)
        step = np.divide(bennett_u(t) - y, slope, out=np.zeros_like(t), where=slope > 0)
        t = np.where(y > 0, t - step, 0.0)
    out = t
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class DepthConcentration:
    r"""Lemma 1 of Hayou & Ayed for the depth $L_\delta=\sum_l\delta_l$.

    Parameters
    ----------
    mean
        $L_p = \sum_l p_l$.
    variance
        $v_p = \sum_l p_l(1-p_l)$.
    beta
        Failure probability $\beta$.
    bound
        $v_p\,u^{-1}(\log(2/\beta)/v_p)$: $|L_\delta-L_p|\le$ bound with probability
        $\ge 1-\beta$ (0 when $v_p=0$).

    Raises
    ------
    StochasticDepthError
        ``beta`` is not in $(0, 1)$.
    ValueError
        ``variance`` or ``bound`` is negative.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Lemma 1 and Eq. (2).
    """

    mean: float
    variance: float
    beta: float
    bound: float

    def __post_init__(self) -> None:
        if not 0.0 < self.beta < 1.0:
            raise StochasticDepthError(
                f"beta = {self.beta!r} is not a probability in (0, 1)", key="beta"
            )
        if self.variance < 0 or self.bound < 0:
            raise ValueError("variance and bound must be non-negative")


def depth_concentration(p: np.ndarray, *, beta: float = 0.05) -> DepthConcentration:
    r"""Mean, variance and the Bennett bound of Eq. (2) (Lemma 1 of Hayou & Ayed).

    Parameters
    ----------
    p
        ``(L,)`` survival probabilities.
    beta
        Failure probability $\beta\in(0, 1)$.

    Returns
    -------
    DepthConcentration
        $L_p$, $v_p$, $\beta$ and the bound on $|L_\delta - L_p|$.

    Raises
    ------
    StochasticDepthError
        ``p`` is not a vector of probabilities, or ``beta`` is not in $(0, 1)$.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Lemma 1 and Eq. (2).

    Examples
    --------
    >>> c = depth_concentration([0.5] * 100, beta=0.05)
    >>> c.mean, c.variance
    (50.0, 25.0)
    """
    p = check_probabilities(p)
    if not 0.0 < float(beta) < 1.0:
        raise StochasticDepthError(f"beta = {beta!r} is not a probability in (0, 1)", key="beta")
    v = float(np.sum(p * (1.0 - p)))
    bound = 0.0 if v == 0.0 else v * float(bennett_u_inverse(np.log(2.0 / beta) / v))
    return DepthConcentration(float(p.sum()), v, float(beta), float(bound))
