r"""The quantities of Hayou & Ayed (2021), *Regularization in ResNet with Stochastic Depth*.

Closed forms from the paper (Prop. 1, Eqs. 4/6, Lemma 2, Thm. 2; Lemma 1 is in
``_depth.py``) and, for linear residual chains, their exact counterparts from
:mod:`gdln.sd`.

Mask convention. The regulariser of Eqs. (4) and (6) is derived for the paper's
*unscaled* mask ($y_l = y_{l-1}+\delta_l\Psi_l$, average network $\delta\to p$), expanded
around $\delta = \mathbf 1$, with the Stable scaling $1/\sqrt L$ of Eq. (3) (the
$1/L$ in $\frac1{2L}$ is that scaling squared). :func:`chain_regulariser` also gives the
analogue for the *inverted* mask, where the expansion point is the mean
($\tilde\delta=\mathbf 1$) and the weight $p_l(1-p_l)$ becomes
$\mathrm{Var}[\delta_l/p_l] = (1-p_l)/p_l$.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy import special

from .._bounded._limits import beyond, current_limits
from ._chain import chain_inputs, chain_scale, exclusive_products, expected_chain
from ._checks import (
    StochasticDepthError,
    check_depth,
    check_probabilities,
    finite_results,
    quiet_floats,
)

__all__ = [
    "RegulariserComparison",
    "chain_regulariser",
    "chain_sensitivities",
    "gradient_growth",
    "growth_rate",
    "lindeberg_ratio",
    "max_regularisation_mode",
    "shapiro_pvalues",
]


# ----------------------------------------------------------------------------------------
# Prop. 1: gradient growth
# ----------------------------------------------------------------------------------------


def gradient_growth(
    p: np.ndarray | None = None, *, L: int | None = None, scaling: str | float = "plain"
) -> np.ndarray:
    r"""$\tilde q_l = \prod_{k=l+1}^{L}(1+p_k)$ for $l=0,\dots,L$ (Prop. 1 of Hayou & Ayed).

    The expected ratio $\mathbb E\|\nabla_{y_l}\mathcal L\|^2/\|\nabla_{y_L}\mathcal L\|^2$
    of a ReLU ResNet with He init at infinite width. Without SD (``p=None``, give ``L``)
    it is $2^{L-l}$. With a residual scale $\kappa$ (``scaling="stable"``:
    $\kappa=1/\sqrt L$, Eq. 3) the same argument gives factors $1+\kappa^2p_k$, i.e.
    $\prod_k(1+p_k/L)\le e$ for Stable ResNet (Fig. 2c).

    Parameters
    ----------
    p
        ``(L,)`` survival probabilities, or ``None`` for no stochastic depth.
    L
        The depth, needed when ``p`` is ``None``.
    scaling
        ``"plain"``, ``"stable"`` or a number $\kappa$.

    Returns
    -------
    numpy.ndarray
        ``(L+1,)`` $\tilde q_l$ for $l = 0, \dots, L$.

    Raises
    ------
    StochasticDepthError
        Neither ``p`` nor a positive ``L`` is given, ``p`` or ``scaling`` is malformed, or
        $\tilde q_0$ overflows float64 (plain scaling over thousands of blocks).

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Proposition 1 and
    Eq. (3).

    Examples
    --------
    >>> gradient_growth(L=3).tolist()
    [8.0, 4.0, 2.0, 1.0]
    >>> gradient_growth([0.5, 0.5]).tolist()
    [2.25, 1.5, 1.0]
    """
    if p is None:
        if L is None or isinstance(L, bool) or not isinstance(L, (int, np.integer)) or L < 1:
            raise StochasticDepthError(
                f"L = {L!r}; without survival probabilities give a positive depth L", key="L"
            )
        p_arr = np.ones(check_depth(L))
    else:
        p_arr = check_probabilities(p)
    factors = 1.0 + chain_scale(scaling, p_arr.size) ** 2 * p_arr
    with quiet_floats():
        tail = np.cumprod(factors[::-1])[::-1]  # tail[l] = prod_{k >= l+1} in 1-based terms
    if not np.isfinite(tail[0]):
        raise StochasticDepthError(
            f"the gradient growth q_0 = prod_l (1 + kappa^2 p_l) over {p_arr.size} blocks "
            "overflows float64; use stable scaling or fewer blocks",
            key="L",
        )
    return np.concatenate([tail, [1.0]])


def growth_rate(q: np.ndarray) -> np.ndarray:
    r"""Per-layer geometric growth $\tilde q_l^{1/(L-l)}$, $l=0,\dots,L-1$.

    The quantity reported in Table 1 of Hayou & Ayed (2 per layer without SD, $1+p$ for
    the uniform mode).

    Parameters
    ----------
    q
        ``(L+1,)`` $\tilde q_l$, e.g. from :func:`gradient_growth`.

    Returns
    -------
    numpy.ndarray
        ``(L,)`` growth per layer.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Proposition 1 and
    Table 1.
    """
    q = np.asarray(q, dtype=float)
    L = len(q) - 1
    ell = np.arange(L)
    return q[:L] ** (1.0 / (L - ell))


# ----------------------------------------------------------------------------------------
# Eqs. (4)/(6): the explicit regulariser, exact for linear chains
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegulariserComparison:
    r"""The SD loss of linear chains, exact and in the second-order form of Eqs. (4)/(6).

    All losses are summed over modes and include ``const`` (e.g. $\frac12\mathbb E\|y\|^2$).

    Parameters
    ----------
    expected_loss
        Exact $\mathbb E_\delta[\mathcal L]$.
    average_loss
        Exact loss of the average network, $\bar{\mathcal L}=\mathcal L(\mathbb E\tilde\delta)$;
        for linear chains $\mathbb E f = f(\mathbb E\tilde\delta)$ exactly.
    average_loss_taylor
        $\bar{\mathcal L}$ as the paper defines it: the second-order Taylor expansion of
        $\mathcal L(y(p))$ around $p=\mathbf 1$ (unscaled mask; equal to ``average_loss``
        for the inverted mask).
    penalty_paper
        $\frac12\sum_l \mathrm{Var}[\tilde\delta_l]\,
        (\partial f/\partial\tilde\delta_l|_{\mathbf 1})^2 d$: Eq. (4) with the derivative at
        $\delta=\mathbf 1$, i.e. $\frac1{2L}\sum_lp_l(1-p_l)g_l$ for Stable chains.
    penalty_first_order
        The same with the derivative at the mean (first Hoeffding order of the variance).
    penalty_exact
        $\frac12 d\,\mathrm{Var}[f]$, so that ``expected_loss = average_loss + penalty_exact``.
    variance_orders
        ``(L,)``: order-$k$ Hoeffding parts of $\frac12 d\,\mathrm{Var}f$, $k=1..L$; they sum
        to ``penalty_exact``, entry 0 is ``penalty_first_order``.

    Raises
    ------
    TypeError
        A loss or penalty is not a Python float.
    ValueError
        ``penalty_exact`` is negative.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Eqs. (4)-(6).
    """

    expected_loss: float
    average_loss: float
    average_loss_taylor: float
    penalty_paper: float
    penalty_first_order: float
    penalty_exact: float
    variance_orders: np.ndarray

    def __post_init__(self) -> None:
        for name in (
            "expected_loss",
            "average_loss",
            "average_loss_taylor",
            "penalty_paper",
            "penalty_first_order",
            "penalty_exact",
        ):
            if not isinstance(getattr(self, name), float):
                raise TypeError(f"{name} must be a Python float")
        if self.penalty_exact < -1e-12 * max(1.0, abs(self.expected_loss)):
            raise ValueError("penalty_exact is a variance and cannot be negative")

    @property
    def paper_approximation(self) -> float:
        r"""$\bar{\mathcal L}_{\rm Taylor}$ + penalty: the right-hand side of Eq. (4)."""
        return self.average_loss_taylor + self.penalty_paper


def chain_regulariser(
    b: np.ndarray,
    p: np.ndarray,
    *,
    s: float | np.ndarray,
    d: float | np.ndarray = 1.0,
    scaling: str | float = "stable",
    mask: str = "unscaled",
    a: float | np.ndarray = 1.0,
    c: float | np.ndarray = 1.0,
    const: float = 0.0,
) -> RegulariserComparison:
    r"""Eq. (4)/(6) of Hayou & Ayed against the exact expected loss of linear SD chains.

    For $f=ca\prod_l(1+\kappa\tilde\delta_lb_l)$ and $\mathcal L=-sf+\frac12df^2$ the
    second derivative of $f$ in any single $\tilde\delta_l$ vanishes (it is multilinear),
    so the discarded term $\Gamma_l$ of the paper is exactly zero and
    $g_l=d\,(\partial f/\partial\tilde\delta_l)^2$ with $H_\ell = d$. The exact identity is
    $\mathbb E\mathcal L = \bar{\mathcal L} + \frac12 d\,\mathrm{Var}f$, where
    $\mathrm{Var}f=(ca)^2[\prod_l(m_l^2+v_l\kappa^2b_l^2)-\prod_lm_l^2]$,
    $m_l=1+\kappa\,\mathbb E[\tilde\delta_l]\,b_l$, $v_l=\mathrm{Var}\tilde\delta_l$; expanding the
    product by the number of factors $v_l\kappa^2b_l^2$ gives the Hoeffding orders.
    The paper keeps order 1 and evaluates it at $\delta=\mathbf 1$ instead of the mean.

    Cost: $O(L)$ for every loss and penalty (the Taylor cross term in the closed form
    $f_1\kappa^2[(\sum_lu_l)^2-\sum_lu_l^2]$, $u_l=(p_l-1)b_l/(1+\kappa b_l)$), and
    $O(L\,K)$ for the Hoeffding orders, $K$ the number of orders above $10^{-300}$ of the
    variance (about 140 at Stable scaling); orders below that are returned as 0.

    Parameters
    ----------
    b, p, s, d, scaling, mask, a, c
        As for :func:`gdln.sd.expected_chain` (default Stable scaling).
    const
        Added to every loss (the $\frac12\mathbb E\|y\|^2$ of Eq. (1) of Saxe et al.).

    Returns
    -------
    RegulariserComparison
        The exact expected loss, the average network's loss (exact and as the paper's
        Taylor expansion), the penalty of Eq. (4) and its exact counterpart.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Eqs. (4)-(6);
    Saxe, Sodhani & Lewallen (2022), Eq. (10).
    """
    B, p, conv, s_, d_, ca, _ = chain_inputs(b, p, mask, s, d, a, c)
    L = B.shape[0]
    kappa = chain_scale(scaling, L)
    ex = expected_chain(B, p, s=s_, d=d_, scaling=kappa, mask=mask, a=ca, c=1.0)
    with quiet_floats():
        return _regulariser(B, p, conv, s_, d_, ca, kappa, ex, float(const))


def _regulariser(
    B: np.ndarray,
    p: np.ndarray,
    conv: Any,
    s_: np.ndarray,
    d_: np.ndarray,
    ca: np.ndarray,
    kappa: float,
    ex: Any,
    const: float,
) -> RegulariserComparison:
    """:func:`chain_regulariser` once its inputs are checked and its expectation is finite."""
    var = conv.variance(p)[:, None]
    mu = conv.mean(p)[:, None]
    m = 1.0 + kappa * mu * B
    one = 1.0 + kappa * B  # factors at delta~ = 1
    f1 = ca * np.prod(one, axis=0)
    df1 = ca * kappa * B * exclusive_products(one)  # d f / d delta~_l at 1
    dfm = ca * kappa * B * exclusive_products(m)  # at the mean
    penalty_paper = float(np.sum(0.5 * d_ * np.sum(var * df1**2, axis=0)))
    penalty_first = float(np.sum(0.5 * d_ * np.sum(var * dfm**2, axis=0)))
    # Hoeffding orders: coefficients of x^k in prod_l (m_l^2 + x v_l kappa^2 b_l^2)
    orders = _hoeffding_orders(m**2, var * kappa**2 * B**2) @ (0.5 * d_ * ca**2)
    penalty_exact = float(np.sum(0.5 * d_ * ex.variance))
    # second-order Taylor of L(f(p)) around p = 1 (unscaled); the mean itself for inverted
    if conv.name == "unscaled":
        delta = (p - 1.0)[:, None]
        loss1 = -s_ * f1 + 0.5 * d_ * f1**2
        resid = -s_ + d_ * f1
        first = np.sum(resid * df1 * delta, axis=0)
        # sum over l != k of delta_l delta_k d2f/d delta_l d delta_k, in O(L)
        cross = ca * kappa**2 * _second_order_cross(delta * B, one)
        quad = d_ * np.sum(df1 * delta, axis=0) ** 2 + resid * cross
        taylor = float(np.sum(loss1 + first + 0.5 * quad))
    else:
        taylor = ex.average_loss
    finite_results("the regulariser", penalty_paper, penalty_first, penalty_exact, taylor, orders)
    return RegulariserComparison(
        expected_loss=ex.loss + float(const),
        average_loss=ex.average_loss + float(const),
        average_loss_taylor=taylor + float(const),
        penalty_paper=penalty_paper,
        penalty_first_order=penalty_first,
        penalty_exact=penalty_exact,
        variance_orders=orders,
    )


# ----------------------------------------------------------------------------------------
# O(L) building blocks of chain_regulariser
# ----------------------------------------------------------------------------------------

# Hoeffding orders whose share of the variance is provably below this are set to 0.
_ORDER_CUTOFF = 1e-300


def _second_order_cross(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    r"""$\sum_{l\ne k}x_lx_k\prod_{i\ne l,k}y_i$ per column, in $O(L)$.

    For the unscaled Taylor term of :func:`chain_regulariser` with $x_l=\delta_lb_l$ and
    $y_l=1+\kappa b_l$, $c\,a\,\kappa^2$ times this is
    $\sum_{l\ne k}\delta_l\delta_k\,\partial^2f/\partial\delta_l\partial\delta_k$ at
    $\delta=\mathbf 1$; with no zero factor it is
    $\prod_iy_i\,[(\sum_lu_l)^2-\sum_lu_l^2]$, $u_l=x_l/y_l$, summed here as
    $2\sum_ku_k\sum_{l<k}u_l$ (no cancellation of the squares when some $u_l$ is large).
    Columns with exactly one or two zero factors keep only the pairs that contain them;
    three or more give 0.
    """
    zero = y == 0.0
    count = zero.sum(axis=0)
    safe = np.where(zero, 1.0, y)
    u = np.where(zero, 0.0, x / safe)
    rest = np.prod(safe, axis=0)  # product of the nonzero factors
    before = np.cumsum(u, axis=0) - u
    out = np.where(count == 0, 2.0 * rest * np.sum(u * before, axis=0), 0.0)
    for j in np.flatnonzero((count == 1) | (count == 2)):
        at = np.flatnonzero(zero[:, j])
        if at.size == 1:
            out[j] = 2.0 * x[at[0], j] * rest[j] * (u[:, j].sum())
        else:
            out[j] = 2.0 * x[at[0], j] * x[at[1], j] * rest[j]
    return out


def _polynomial_products(constant: np.ndarray, factors: np.ndarray, degree: int) -> np.ndarray:
    r"""Coefficients $0..$``degree`` of $\prod_l(c_l+x\,r_l)$ for each row of the arguments.

    ``constant`` and ``factors`` are ``(modes, L)`` with $c_l, r_l\ge0$. A balanced product
    tree of direct convolutions (one ``einsum`` per level against Toeplitz windows),
    truncated at ``degree``: every coefficient is a sum of non-negative products, so each is
    accurate to a few ulps (an FFT would lose the small ones).
    """
    n = 1
    while n < factors.shape[1]:
        n *= 2
    poly = np.zeros((factors.shape[0], n, 2))
    poly[:, :, 0] = 1.0
    poly[:, : factors.shape[1], 0] = constant
    poly[:, : factors.shape[1], 1] = factors
    while poly.shape[1] > 1:
        left, right = poly[:, 0::2], poly[:, 1::2]
        k = left.shape[2]
        size = min(2 * k - 1, degree + 1)
        # out[i] = sum_j left[j] right[i - j]: windows of the reversed, zero-padded right
        padded = np.zeros((*right.shape[:2], 3 * k - 2))
        padded[..., k - 1 : 2 * k - 1] = right[..., ::-1]
        windows = sliding_window_view(padded, k, axis=2)[..., ::-1, :][..., :size, :]
        poly = np.einsum("mbj,mbij->mbi", left, windows)
    return poly[:, 0]


def _hoeffding_orders(m2: np.ndarray, w: np.ndarray) -> np.ndarray:
    r"""Coefficients of $x^1..x^L$ in $\prod_l(m_l^2+x\,w_l)$ per column (``(L, modes)``).

    These are the Hoeffding orders of $\mathrm{Var}f/(ca)^2$ in :func:`chain_regulariser`.
    With $r_l=w_l/m_l^2\ge0$ the normalised coefficients are the elementary symmetric
    polynomials $e_k(r)\le e_1^k/k!$; orders whose bound falls below
    ``_ORDER_CUTOFF`` $\cdot e_1$ are 0, so the cost is $O(L\,K)$ with $K$ the number of
    orders that matter ($K\approx140$ at Stable scaling), not $O(L^2)$; factors with
    $m_l=0$ (pure $x\,w_l$) add one order each. The product is taken as
    $\prod_l(m_l^2+w_l)\cdot\prod_l\bigl((1-q_l)+x\,q_l\bigr)$ with $q_l=w_l/(m_l^2+w_l)$:
    the second factor's coefficients are probabilities (a Poisson binomial law), so none
    overflows however large $r_l$ is ($m_l$ near 0).
    """
    L, M = m2.shape
    zero = m2 == 0.0
    r = np.where(zero, 0.0, w / np.where(zero, 1.0, m2))
    total = m2 + w
    positive = np.where(total > 0, total, 1.0)
    q, rest = np.where(total > 0, w / positive, 0.0), np.where(total > 0, m2 / positive, 1.0)
    scale = np.prod(total, axis=0)
    degree = max(
        min(L, _truncation_degree(float(e1), L) + int(shift))
        for e1, shift in zip(r.sum(axis=0), zero.sum(axis=0), strict=True)
    )
    held = L * M * degree
    if held > current_limits().batch_elements:
        raise StochasticDepthError(
            beyond(
                "batch_elements",
                f"the Hoeffding orders of {L} blocks up to order {degree} ({held:.3g} products)",
            ),
            key="b",
        )
    coeffs = _polynomial_products(rest.T, q.T, degree) * scale[:, None]
    orders = np.zeros((L, M))
    top = min(coeffs.shape[1], L + 1)
    orders[: top - 1] = coeffs[:, 1:top].T
    return orders


def _truncation_degree(e1: float, n: int) -> int:
    """Smallest K <= n with e1^k / k! < cutoff * e1 for every k > K (Maclaurin's bound)."""
    if e1 == 0.0 or n <= 1:
        return max(n, 1)
    k = np.arange(2, n + 1)
    small = (k > e1) & (k * np.log(e1) - special.gammaln(k + 1.0) < np.log(_ORDER_CUTOFF * e1))
    return int(k[np.argmax(small)] - 1) if small.any() else n


def chain_sensitivities(
    b: np.ndarray,
    *,
    s: float | np.ndarray,
    d: float | np.ndarray = 1.0,
    scaling: str | float = "stable",
    a: float | np.ndarray = 1.0,
    c: float | np.ndarray = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    r"""SenseMode sensitivities of linear chains (Sec. 5 of Hayou & Ayed).

    Parameters
    ----------
    b, s, d, scaling, a, c
        As for :func:`gdln.sd.expected_chain` (default Stable scaling).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        $S_l=\mathcal L(\mathbf 1)-\mathcal L(\mathbf 1_l)$ (exact drop of block $l$) and its
        first-order approximation $\partial\mathcal L/\partial\delta_l|_{\delta=\mathbf 1}$
        used by the paper, both ``(L,)`` and summed over modes.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Sec. 5 (SenseMode).
    """
    B, _, _, s_, d_, ca, _ = chain_inputs(b, np.ones(np.shape(b)[0]), "unscaled", s, d, a, c)
    kappa = chain_scale(scaling, B.shape[0])
    with quiet_floats():
        one = 1.0 + kappa * B
        f1 = ca * np.prod(one, axis=0)
        excl = ca * exclusive_products(one)  # f with block l removed
        loss1 = -s_ * f1 + 0.5 * d_ * f1**2
        drop = np.sum(loss1 - (-s_ * excl + 0.5 * d_ * excl**2), axis=1)
        grad = np.sum((-s_ + d_ * f1) * kappa * B * excl, axis=1)
    finite_results("the sensitivities", drop, grad)
    return drop, grad


# ----------------------------------------------------------------------------------------
# Lemma 2 / Thm. 1: the maximising mode
# ----------------------------------------------------------------------------------------


def max_regularisation_mode(g: np.ndarray, budget: float) -> tuple[np.ndarray, float]:
    r"""$p^*_l=\min(1,\max(0,\tfrac12-C/g_l))$ with $\sum_lp^*_l=\bar L$ (Lemma 2 of Hayou & Ayed).

    Maximises $\sum_l p_l(1-p_l)g_l$ over $p\in[0,1]^L$ at fixed budget $\sum_lp_l=\bar L$;
    $C$ (same sign as $L-2\bar L$) is found by bisection. Equal $g_l$ give the uniform mode
    $\bar L/L$ (Thm. 1).

    Parameters
    ----------
    g
        ``(L,)`` positive regularisation weights $g_l$.
    budget
        The average depth $\bar L\in(0, L)$.

    Returns
    -------
    (numpy.ndarray, float)
        $p^*$ and $C$.

    Raises
    ------
    StochasticDepthError
        ``g`` is empty or not positive, or ``budget`` is not in $(0, L)$.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Lemma 2 and Theorem 1.
    """
    g = np.asarray(g, dtype=float)
    if g.ndim != 1 or g.size == 0 or np.any(~np.isfinite(g)) or np.any(g <= 0):
        raise StochasticDepthError(
            f"g = {g!r}; expected a non-empty array of positive regularisation weights", key="g"
        )
    L = g.size
    if not 0.0 < float(budget) < L:
        raise StochasticDepthError(
            f"budget = {budget!r} is not an average depth strictly between 0 and L = {L}",
            key="budget",
        )

    def total(C: float) -> float:
        return float(np.clip(0.5 - C / g, 0.0, 1.0).sum())

    lo, hi = -0.5 * g.max(), 0.5 * g.max()  # total(lo) = L, total(hi) = 0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if total(mid) > budget:
            lo = mid
        else:
            hi = mid
    C = 0.5 * (lo + hi)
    return np.clip(0.5 - C / g, 0.0, 1.0), float(C)


# ----------------------------------------------------------------------------------------
# Thm. 2: Gaussian noise
# ----------------------------------------------------------------------------------------


def lindeberg_ratio(mu: np.ndarray) -> float:
    r"""$\max_k\mu_k^2/\sum_l\mu_l^2$: condition 2 of Thm. 2 of Hayou & Ayed (must tend to 0).

    Parameters
    ----------
    mu
        ``(L,)`` per-layer weights $\mu_l$ of the sum.

    Returns
    -------
    float
        The ratio.

    Raises
    ------
    StochasticDepthError
        ``mu`` is identically zero.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Theorem 2.
    """
    mu = np.asarray(mu, dtype=float)
    total = float(np.sum(mu**2))
    if total == 0.0:
        raise StochasticDepthError("mu is identically zero; the ratio is undefined", key="mu")
    return float(np.max(mu**2) / total)


def shapiro_pvalues(samples: np.ndarray) -> np.ndarray:
    r"""Shapiro–Wilk p-values of each row of ``samples`` (Fig. 5 of Hayou & Ayed).

    Parameters
    ----------
    samples
        ``(n_inputs, n_masks)``: for each input, a neuron's value under ``n_masks`` masks
        (at least 3). Rows with zero spread get p-value 0 (a point mass is not Gaussian).

    Returns
    -------
    numpy.ndarray
        ``(n_inputs,)`` p-values.

    Raises
    ------
    StochasticDepthError
        ``samples`` is not two-dimensional with at least 3 columns.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Theorem 2 and Fig. 5.
    """
    from scipy.stats import shapiro  # scipy.stats is slow to import; only this needs it

    x = np.asarray(samples, dtype=float)
    if x.ndim != 2 or x.shape[1] < 3:
        raise StochasticDepthError(
            f"samples has shape {x.shape}; expected (n_inputs, n_masks) with n_masks >= 3",
            key="samples",
        )
    out = np.empty(x.shape[0])
    for i, row in enumerate(x):
        out[i] = 0.0 if np.ptp(row) == 0 else float(shapiro(row).pvalue)
    return out
