r"""The exact expected loss of a stochastic-depth scalar chain as a sympy expression.

The symbolic twin of :func:`gdln.sd.expected_chain`: with independent gates
$\mathbb E[f]=\prod_l(1+\kappa\mu_lb_l)$ and $\mathbb E[f^2]=\prod_l(1+2\kappa\mu_lb_l+
\kappa^2\nu_lb_l^2)$, so the expected per-mode loss and its gradient flow (the expected
version of Eq. 10 of Saxe et al. 2022) are polynomials one can print and differentiate.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from ._checks import StochasticDepthError, check_depth
from ._masks import mask_convention

__all__ = ["SymbolicChain", "expected_chain_symbolic"]


@dataclass(frozen=True)
class SymbolicChain:
    r"""The exact expected loss of one SD scalar chain as sympy expressions.

    Parameters
    ----------
    loss, mean, second
        $\mathbb E[\mathcal L]$, $\mathbb E[f]$, $\mathbb E[f^2]$.
    b, p
        The symbols $b_1..b_L$ and $p_1..p_L$.
    s, d, kappa
        The symbols $s$, $d$ and $\kappa$ (``kappa`` is the number 1 for plain scaling).

    Raises
    ------
    ValueError
        ``b`` and ``p`` differ in length.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (10); Hayou & Ayed (2021), "Regularization in
    ResNet with Stochastic Depth", Eq. (1).
    """

    loss: sp.Expr
    mean: sp.Expr
    second: sp.Expr
    b: tuple[sp.Symbol, ...]
    p: tuple[sp.Symbol, ...]
    s: sp.Symbol
    d: sp.Symbol
    kappa: sp.Expr

    def __post_init__(self) -> None:
        if len(self.b) != len(self.p):
            raise ValueError("b and p must have one symbol per block")

    def gradient(self) -> tuple[sp.Expr, ...]:
        r"""$\partial\,\mathbb E[\mathcal L]/\partial b_l$ for each $l$.

        Returns
        -------
        tuple of sympy.Expr
            One derivative per block.
        """
        return tuple(sp.diff(self.loss, bl) for bl in self.b)

    def flow(self) -> tuple[sp.Expr, ...]:
        r"""Right-hand sides of $\tau\dot b_l = -\partial\,\mathbb E[\mathcal L]/\partial b_l$.

        Returns
        -------
        tuple of sympy.Expr
            One per block.
        """
        return tuple(-g for g in self.gradient())


def expected_chain_symbolic(
    L: int, *, scaling: str = "plain", mask: str = "unscaled"
) -> SymbolicChain:
    r"""The exact expected per-mode loss of an SD scalar chain as a sympy expression.

    Same factorised form as :func:`expected_chain`; $\kappa$ is kept as a symbol for
    ``scaling="stable"`` (substitute $1/\sqrt L$) and is 1 for ``"plain"``.

    Parameters
    ----------
    L
        Number of residual blocks.
    scaling
        ``"plain"`` or ``"stable"``.
    mask
        ``"unscaled"`` or ``"inverted"`` (see :data:`MASK_CONVENTIONS`).

    Returns
    -------
    SymbolicChain
        $\mathbb E[\mathcal L]$, $\mathbb E f$, $\mathbb E f^2$ and their symbols.

    Raises
    ------
    StochasticDepthError
        ``L``, ``scaling`` or ``mask`` is malformed.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (10); Hayou & Ayed (2021), "Regularization in
    ResNet with Stochastic Depth", Eqs. (1) and (3).

    Examples
    --------
    >>> ch = expected_chain_symbolic(1)
    >>> ch.loss
    d*(b_1**2*p_1 + 2*b_1*p_1 + 1)/2 - s*(b_1*p_1 + 1)
    """
    L = check_depth(L)
    conv = mask_convention(mask)
    b = sp.symbols(f"b_1:{L + 1}", real=True)
    p = sp.symbols(f"p_1:{L + 1}", positive=True)
    s, d = sp.symbols("s d", real=True)
    if scaling == "plain":
        kappa: sp.Expr = sp.Integer(1)
    elif scaling == "stable":
        kappa = sp.Symbol("kappa", positive=True)
    else:
        raise StochasticDepthError(
            f"scaling = {scaling!r} is not a residual scaling; expected 'plain' or 'stable'",
            key="scaling",
        )
    mean = sp.Integer(1)
    second = sp.Integer(1)
    for bl, pl in zip(b, p, strict=True):
        mu = sp.Integer(1) if conv.inverted else pl
        nu = 1 / pl if conv.inverted else pl
        mean *= 1 + kappa * mu * bl
        second *= 1 + 2 * kappa * mu * bl + kappa**2 * nu * bl**2
    loss = -s * mean + d * second / 2
    return SymbolicChain(loss, mean, second, tuple(b), tuple(p), s, d, kappa)
