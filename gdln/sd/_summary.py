r"""Everything exact about one scalar residual chain under stochastic depth, in one call.

A linear residual chain with residual scalars $b_l$ and survival probabilities $p_l$ is one
mode of a GDLN whose residual blocks carry Bernoulli gates (Hayou & Ayed; the per-mode loss
of Eq. 10 of Saxe et al. 2022). :func:`chain_summary` gathers what ``gdln sd`` prints: the
expected output and loss with their gradient (:func:`expected_chain`), the regulariser of
Eqs. (4)/(6) (:func:`chain_regulariser`), Lemma 1's concentration of the depth
(:func:`depth_concentration`) and Prop. 1's gradient growth (:func:`gradient_growth`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import (
    ChainExpectation,
    DepthConcentration,
    RegulariserComparison,
    StochasticDepthError,
    chain_regulariser,
    depth_concentration,
    expected_chain,
    expected_chain_symbolic,
    gradient_growth,
)

__all__ = ["MAX_SYMBOLIC_DEPTH", "ChainSummary", "chain_summary"]

#: Deepest chain whose expected loss :func:`chain_summary` expands symbolically.
MAX_SYMBOLIC_DEPTH = 6


@dataclass(frozen=True)
class ChainSummary:
    r"""The exact expectations of one SD scalar chain (see :func:`chain_summary`).

    Parameters
    ----------
    b, p
        ``(L,)`` residual scalars and survival probabilities.
    s, d
        Input-output and input strength of the mode.
    scaling, mask
        Residual scaling (``"plain"`` or ``"stable"``) and mask convention.
    expectation
        $\mathbb E f$, $\mathbb E f^2$, $\mathbb E\mathcal L$, the average network's loss and
        $\partial\mathbb E\mathcal L/\partial b$ (:func:`expected_chain`).
    regulariser
        The exact penalty against Eqs. (4)/(6) of Hayou & Ayed (:func:`chain_regulariser`).
    depth
        Mean, variance and the 95% Bennett bound of the depth (Lemma 1).
    growth
        ``(L+1,)`` $\tilde q_l$ of Prop. 1 of Hayou & Ayed; ``growth[0]`` is the growth of
        the whole chain.
    symbolic_loss
        $\mathbb E\mathcal L$ as a sympy expression in $b_l$, $p_l$, $s$, $d$ (and
        $\kappa$ for stable scaling), or ``None`` if not asked for.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Eqs. (2)-(6),
    Lemma 1 and Proposition 1; Saxe, Sodhani & Lewallen (2022), Eq. (10).
    """

    b: np.ndarray
    p: np.ndarray
    s: float
    d: float
    scaling: str
    mask: str
    expectation: ChainExpectation
    regulariser: RegulariserComparison
    depth: DepthConcentration
    growth: np.ndarray
    symbolic_loss: Any = None

    def __post_init__(self) -> None:
        if self.b.shape != self.p.shape or self.growth.shape != (self.p.size + 1,):
            raise StochasticDepthError(
                f"b, p, growth: got shapes {self.b.shape}, {self.p.shape}, "
                f"{self.growth.shape}; expected (L,), (L,), (L+1,)",
                key="b",
            )

    def to_json(self) -> dict[str, Any]:
        """Every number of the summary as JSON values.

        Returns
        -------
        dict
            ``L``, ``p``, ``b``, ``s``, ``d`` and the expectation, regulariser and depth
            figures; the symbolic loss as a string.
        """
        ex, reg, depth = self.expectation, self.regulariser, self.depth
        return {
            "L": int(self.p.size),
            "p": self.p.tolist(),
            "b": self.b.tolist(),
            "s": self.s,
            "d": self.d,
            "scaling": self.scaling,
            "mask": self.mask,
            "mean": float(ex.mean[0]),
            "second": float(ex.second[0]),
            "loss": ex.loss,
            "average_loss": ex.average_loss,
            "grad": np.asarray(ex.grad, dtype=float).reshape(-1).tolist(),
            "regulariser": {
                "exact": reg.penalty_exact,
                "paper": reg.penalty_paper,
                "first_order": reg.penalty_first_order,
            },
            "depth": {
                "mean": depth.mean,
                "variance": depth.variance,
                "beta": depth.beta,
                "bound": depth.bound,
            },
            "gradient_growth": self.growth.tolist(),
            "symbolic_loss": None if self.symbolic_loss is None else str(self.symbolic_loss),
        }


def chain_summary(
    b: float | np.ndarray,
    p: np.ndarray,
    *,
    s: float = 1.0,
    d: float = 1.0,
    scaling: str = "stable",
    mask: str = "unscaled",
    symbolic: bool = False,
) -> ChainSummary:
    r"""Exact expected loss, gradient, regulariser, depth and gradient growth of one chain.

    The chain $f=\prod_l(1+\kappa\tilde\delta_lb_l)$ with independent gates
    $\delta_l\sim\mathrm{Bernoulli}(p_l)$ and per-mode loss $-s f+\tfrac12 d f^2$
    (Eq. 10 of Saxe et al. 2022 for one mode); the quantities of Eqs. (2), (4), (6) and
    Prop. 1 of Hayou & Ayed.

    Parameters
    ----------
    b
        Residual scalars: one number for every block, or ``(L,)``.
    p
        ``(L,)`` survival probabilities (e.g. from :func:`survival_probabilities`).
    s, d
        Input-output and input strength of the mode.
    scaling
        ``"plain"`` ($\kappa=1$) or ``"stable"`` ($\kappa=1/\sqrt L$, Eq. 3).
    mask
        A key of :data:`MASK_CONVENTIONS`.
    symbolic
        Also expand $\mathbb E\mathcal L$ symbolically (needs
        $L\le$ :data:`MAX_SYMBOLIC_DEPTH`).

    Returns
    -------
    ChainSummary
        The inputs and every quantity above.

    Raises
    ------
    StochasticDepthError
        An input is malformed, or ``symbolic`` with $L >$ :data:`MAX_SYMBOLIC_DEPTH`.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Eqs. (2)-(6),
    Lemma 1 and Proposition 1; Saxe, Sodhani & Lewallen (2022), Eq. (10).

    Examples
    --------
    >>> c = chain_summary(0.5, np.array([0.5, 0.5]), scaling="plain")
    >>> round(float(c.expectation.mean[0]), 6), c.depth.mean
    (1.5625, 1.0)
    """
    p = np.asarray(p, dtype=float).reshape(-1)
    L = p.size
    b_vec = np.asarray(b, dtype=float).reshape(-1)
    if b_vec.size == 1:
        b_vec = np.full(L, float(b_vec[0]))
    if b_vec.shape != (L,):
        raise StochasticDepthError(
            f"b has {b_vec.size} values; expected one, or one per block ({L})", key="b"
        )
    if symbolic and L > MAX_SYMBOLIC_DEPTH:
        raise StochasticDepthError(
            f"the symbolic expected loss needs L <= {MAX_SYMBOLIC_DEPTH}, got L = {L}", key="L"
        )
    common: dict[str, Any] = {"s": s, "d": d, "scaling": scaling, "mask": mask}
    return ChainSummary(
        b=b_vec,
        p=p,
        s=float(s),
        d=float(d),
        scaling=scaling,
        mask=mask,
        expectation=expected_chain(b_vec, p, **common),
        regulariser=chain_regulariser(b_vec, p, **common),
        depth=depth_concentration(p),
        growth=gradient_growth(p, scaling=scaling),
        symbolic_loss=(
            expected_chain_symbolic(L, scaling=scaling, mask=mask).loss if symbolic else None
        ),
    )
