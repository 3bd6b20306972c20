r"""Mask conventions: how a Bernoulli gate $\delta\sim\mathrm{Bernoulli}(p)$ enters the network.

The paper's *unscaled* mask (Eq. 1 of Hayou & Ayed) multiplies block $l$ by $\delta_l$ and
the test-time network by the mean $p_l$; the *inverted* mask of timm/torchvision multiplies
by $\delta_l/p_l$ and uses the full network at test time. Every expectation of the
stochastic-depth functions needs only the first two moments of the multiplier.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import StochasticDepthError
from ._names import MASK_CONVENTIONS

__all__ = ["MaskConvention"]

#: Whether the gate of each convention is divided by its survival probability.
_DIVIDES_BY_P: dict[str, bool] = {"unscaled": False, "inverted": True}


@dataclass(frozen=True)
class MaskConvention:
    r"""How a Bernoulli gate $\delta\sim\mathrm{Bernoulli}(p)$ enters the network.

    Parameters
    ----------
    name
        ``"unscaled"`` (Hayou & Ayed Eq. 1: $\tilde\delta=\delta$, test-time network uses
        the mean $p$) or ``"inverted"`` (timm/torchvision: $\tilde\delta=\delta/p$,
        test-time network uses 1); a key of :data:`gdln.sd.MASK_CONVENTIONS`.

    Raises
    ------
    StochasticDepthError
        ``name`` is not a known convention.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Eq. (1).

    Examples
    --------
    >>> conv = MaskConvention("inverted")
    >>> conv.mean(np.array([0.5])).tolist(), conv.second_moment(np.array([0.5])).tolist()
    ([1.0], [2.0])
    """

    name: str

    def __post_init__(self) -> None:
        if self.name not in _DIVIDES_BY_P:
            raise StochasticDepthError(
                f"mask = {self.name!r} is not a mask convention; expected one of "
                f"{sorted(MASK_CONVENTIONS)}",
                key="mask",
            )

    @property
    def description(self) -> str:
        """One line for help texts."""
        return MASK_CONVENTIONS[self.name]

    @property
    def inverted(self) -> bool:
        r"""Whether the gate is divided by its survival probability, $\tilde\delta=\delta/p$."""
        return _DIVIDES_BY_P[self.name]

    def gate_value(self, delta: np.ndarray, p: np.ndarray) -> np.ndarray:
        r"""The multiplier $\tilde\delta$ for Bernoulli draws ``delta``.

        Parameters
        ----------
        delta
            Draws $\delta\in\{0, 1\}$.
        p
            The survival probabilities they were drawn with.

        Returns
        -------
        numpy.ndarray
            $\delta$ (unscaled) or $\delta/p$ (inverted).
        """
        delta = np.asarray(delta, dtype=float)
        return delta / p if self.inverted else delta

    def mean(self, p: np.ndarray) -> np.ndarray:
        r"""$\mathbb E[\tilde\delta]$: $p$ (unscaled) or $1$ (inverted).

        Parameters
        ----------
        p
            Survival probabilities.

        Returns
        -------
        numpy.ndarray
            The mean gate, one per probability.
        """
        p = np.asarray(p, dtype=float)
        return np.ones_like(p) if self.inverted else p.copy()

    def second_moment(self, p: np.ndarray) -> np.ndarray:
        r"""$\mathbb E[\tilde\delta^2]$: $p$ (unscaled) or $1/p$ (inverted).

        Parameters
        ----------
        p
            Survival probabilities.

        Returns
        -------
        numpy.ndarray
            The second moment, one per probability.
        """
        p = np.asarray(p, dtype=float)
        return 1.0 / p if self.inverted else p.copy()

    def variance(self, p: np.ndarray) -> np.ndarray:
        r"""$\mathrm{Var}[\tilde\delta]$: $p(1-p)$ (unscaled) or $(1-p)/p$ (inverted).

        Parameters
        ----------
        p
            Survival probabilities.

        Returns
        -------
        numpy.ndarray
            The variance, one per probability.
        """
        return self.second_moment(p) - self.mean(p) ** 2


def mask_convention(mask: str | MaskConvention) -> MaskConvention:
    """The convention named ``mask`` (a key of :data:`MASK_CONVENTIONS`), or ``mask`` itself."""
    return mask if isinstance(mask, MaskConvention) else MaskConvention(mask)
