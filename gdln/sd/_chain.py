r"""Scalar residual chains under stochastic depth: exact expectations in $O(L)$.

For a linear residual network in a decoupled mode every layer carries one scalar and the
transfer of the mode is a scalar residual chain

$$f(\delta) = c\,a\prod_{l=1}^{L}\bigl(1 + \kappa\,\tilde\delta_l\, b_l\bigr),$$

with $\kappa = 1$ (plain) or $1/\sqrt L$ (Stable ResNet, Eq. 3 of Hayou & Ayed) and
$\tilde\delta_l$ the gate under the mask convention (:class:`gdln.sd.MaskConvention`).
Its $2^L$ paths never need listing: because the gates are independent, $\mathbb E[f]$
and $\mathbb E[f^2]$ are products of one factor per layer, which gives the exact
expected per-mode loss

$$\mathbb E[\mathcal L] = -s\,\mathbb E[f] + \tfrac12 d\,\mathbb E[f^2]$$

and its gradient in $O(L)$ (the constant $\tfrac12\mathbb E[y^2]$ of Eq. (1) of Saxe et
al. 2022 is dropped, as in the per-mode loss of the decoupled reduction).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ._checks import (
    StochasticDepthError,
    check_depth,
    check_finite,
    check_probabilities,
    finite_results,
    quiet_floats,
)
from ._masks import MaskConvention, mask_convention

__all__ = ["ChainExpectation", "brute_force_chain", "chain_scale", "expected_chain"]


def chain_scale(scaling: str | float, L: int) -> float:
    r"""Residual scale $\kappa$: 1 for ``"plain"``, $1/\sqrt L$ for ``"stable"`` (Eq. 3).

    A number is taken as $\kappa$ itself.

    Parameters
    ----------
    scaling
        ``"plain"``, ``"stable"`` or a positive number.
    L
        The number of residual blocks.

    Returns
    -------
    float
        $\kappa$.

    Raises
    ------
    StochasticDepthError
        ``scaling`` is neither a known name nor a positive number.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Eq. (3): the
    Stable scaling $1/\sqrt L$.
    """
    if isinstance(scaling, str):
        if scaling == "plain":
            return 1.0
        if scaling == "stable":
            return 1.0 / float(np.sqrt(L))
        raise StochasticDepthError(
            f"scaling = {scaling!r} is not a residual scaling; expected 'plain', 'stable' "
            "or a number",
            key="scaling",
        )
    try:
        kappa = float(scaling)
    except (TypeError, ValueError, OverflowError):
        kappa = float("nan")
    if not np.isfinite(kappa):
        raise StochasticDepthError(
            f"scaling = {scaling!r} is not a finite number, 'plain' or 'stable'", key="scaling"
        )
    return kappa


@dataclass(frozen=True)
class ChainExpectation:
    r"""Exact expectations over the masks of scalar residual chains (one per mode).

    Parameters
    ----------
    loss
        $\sum_\alpha \mathbb E[\mathcal L_\alpha]$, summed over modes.
    loss_modes
        ``(M,)`` $\mathbb E[\mathcal L_\alpha] = -s_\alpha\mathbb E f_\alpha
        + \tfrac12 d_\alpha\mathbb E f_\alpha^2$.
    mean, second
        ``(M,)`` $\mathbb E[f]$ and $\mathbb E[f^2]$.
    grad
        $\partial\,\mathbb E[\mathcal L]/\partial b$, same shape as the ``b`` given.
    average_loss
        $\sum_\alpha -s_\alpha\mathbb E f_\alpha + \tfrac12 d_\alpha(\mathbb E f_\alpha)^2$:
        the loss of the average network (mask replaced by its mean).

    Raises
    ------
    TypeError, ValueError
        A field has the wrong type or shape.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (10) (the per-mode loss of a decoupled pathway);
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Eqs. (1) and (4)
    (the stochastic-depth network and its average network).
    """

    loss: float
    loss_modes: np.ndarray
    mean: np.ndarray
    second: np.ndarray
    grad: np.ndarray
    average_loss: float

    def __post_init__(self) -> None:
        m = np.asarray(self.mean).shape
        if np.asarray(self.loss_modes).shape != m or np.asarray(self.second).shape != m:
            raise ValueError("loss_modes, mean and second must have one entry per mode")
        if not isinstance(self.loss, float) or not isinstance(self.average_loss, float):
            raise TypeError("loss and average_loss must be Python floats")

    @property
    def variance(self) -> np.ndarray:
        r"""$\mathrm{Var}[f] = \mathbb E f^2 - (\mathbb E f)^2$ per mode."""
        return self.second - self.mean**2


class ChainInputs(NamedTuple):
    """Checked inputs of the chain functions: weights as ``(L, M)``, one entry per mode."""

    B: np.ndarray
    p: np.ndarray
    conv: MaskConvention
    s: np.ndarray
    d: np.ndarray
    ca: np.ndarray
    vector: bool


def chain_inputs(
    b: np.ndarray, p: np.ndarray, mask: str | MaskConvention, s: Any, d: Any, a: Any, c: Any
) -> ChainInputs:
    """Check and broadcast the arguments of :func:`expected_chain` and its relatives.

    ``vector`` records whether ``b`` was ``(L,)`` (one mode) so results can be shaped
    like it; ``ca`` is the product of the fixed input and output scalars per mode.
    """
    conv = mask_convention(mask)
    b = check_finite("b", b)
    B = b.reshape(b.shape[0], -1) if b.ndim in (1, 2) else None
    if B is None or B.shape[0] == 0:
        raise StochasticDepthError(
            f"b has shape {b.shape}; expected (L,) or (L, modes) with L >= 1", key="b"
        )
    L, M = B.shape
    check_depth(L, M)
    p = check_probabilities(p, positive=conv.inverted)
    if p.shape != (L,):
        raise StochasticDepthError(
            f"p has shape {p.shape}; expected ({L},), one survival probability per block",
            key="p",
        )
    out = []
    for name, value in (("s", s), ("d", d), ("a", a), ("c", c)):
        if np.ndim(value) > 1:
            raise StochasticDepthError(
                f"{name} has shape {np.shape(value)}; expected a scalar or ({M},)", key=name
            )
        out.append(np.array(np.broadcast_to(check_finite(name, value), (M,))))
    sa, da, aa, ca = out
    return ChainInputs(B, p, conv, sa, da, aa * ca, b.ndim == 1)


def exclusive_products(m: np.ndarray, axis: int = 0) -> np.ndarray:
    """Product over all entries but entry l along ``axis``, for each l, without division.

    Examples
    --------
    >>> exclusive_products(np.array([2.0, 3.0, 5.0])).tolist()
    [15.0, 10.0, 6.0]
    """
    m = np.moveaxis(m, axis, 0)
    ones = np.ones((1, *m.shape[1:]))
    prefix = np.cumprod(np.concatenate([ones, m[:-1]]), axis=0)
    suffix = np.cumprod(np.concatenate([ones, m[::-1][:-1]]), axis=0)[::-1]
    return np.moveaxis(prefix * suffix, 0, axis)


def masked_chains(
    gate: np.ndarray, B: np.ndarray, *, ca: np.ndarray, s: np.ndarray, d: np.ndarray, kappa: float
) -> tuple[np.ndarray, np.ndarray]:
    r"""Loss and gradient of the chains under a batch of fixed masks.

    For each row of ``gate`` (``(batch, L)`` multipliers $\tilde\delta$), $f=ca\prod_l
    (1+\kappa\tilde\delta_lb_l)$ and $\mathcal L=-sf+\frac12df^2$ per mode; ``B`` is
    ``(L, M)`` or ``(batch, L, M)``.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        The loss ``(batch, M)`` and $\partial\mathcal L/\partial b$ ``(batch, L, M)``.
    """
    h = 1.0 + kappa * gate[:, :, None] * B  # (batch, L, M)
    f = ca * np.prod(h, axis=1)  # (batch, M)
    df = ca * exclusive_products(h, axis=1) * kappa * gate[:, :, None]
    loss = -s * f + 0.5 * d * f**2
    return loss, (-s + d * f)[:, None, :] * df


def expected_chain(
    b: np.ndarray,
    p: np.ndarray,
    *,
    s: float | np.ndarray,
    d: float | np.ndarray = 1.0,
    scaling: str | float = "plain",
    mask: str = "unscaled",
    a: float | np.ndarray = 1.0,
    c: float | np.ndarray = 1.0,
) -> ChainExpectation:
    r"""Exact expected loss and gradient of SD scalar residual chains in $O(L)$.

    Each mode is $f=c\,a\prod_l(1+\kappa\tilde\delta_lb_l)$ with independent gates, so
    $\mathbb E f = ca\prod_l m_l$ and $\mathbb E f^2=(ca)^2\prod_l q_l$ where
    $m_l = 1+\kappa\mu_lb_l$, $q_l = 1+2\kappa\mu_lb_l+\kappa^2\nu_lb_l^2$,
    $\mu_l=\mathbb E\tilde\delta_l$, $\nu_l = \mathbb E\tilde\delta_l^2$ (for the unscaled
    mask this is $\mathbb E[F]=\prod_l(1+p_lb_l)$, $\mathbb E[F^2]=\prod_l(1+2p_lb_l+p_lb_l^2)$).
    The per-mode loss is $-s\,\mathbb E f+\frac12 d\,\mathbb E f^2$ (gradient flow on it is
    the expected version of Eq. 10 of Saxe et al. 2022); derivatives use prefix and suffix
    products, so no division by a factor that may vanish.

    Parameters
    ----------
    b
        ``(L,)`` or ``(L, M)`` residual scalars, one column per mode.
    p
        ``(L,)`` survival probabilities (shared by all modes: one mask per step).
    s, d
        Per-mode input-output and input strengths (scalars or ``(M,)``).
    scaling
        ``"plain"``, ``"stable"`` ($\kappa=1/\sqrt L$) or a number $\kappa$.
    mask
        ``"unscaled"`` or ``"inverted"`` (see :data:`MASK_CONVENTIONS`).
    a, c
        Fixed input and output scalars of each mode (default 1).

    Returns
    -------
    ChainExpectation
        Expected loss (total and per mode), $\mathbb E f$, $\mathbb E f^2$, the
        gradient in ``b`` and the loss of the average network.

    Raises
    ------
    StochasticDepthError
        An input is malformed or not finite, the chain holds more numbers than
        :class:`gdln.graphfile.Limits` ``batch_elements``, or the result leaves float64
        (the product of the factors overflows).

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (10); Hayou & Ayed (2021), "Regularization in
    ResNet with Stochastic Depth", Eqs. (1), (3) and (4).

    Examples
    --------
    >>> e = expected_chain([0.5, 0.5], [0.5, 0.5], s=1.0, d=1.0)
    >>> round(float(e.mean[0]), 6), round(float(e.second[0]), 6)
    (1.5625, 2.640625)
    """
    B, p, conv, s_, d_, ca, vector = chain_inputs(b, p, mask, s, d, a, c)
    L = B.shape[0]
    kappa = chain_scale(scaling, L)
    mu = conv.mean(p)[:, None]
    nu = conv.second_moment(p)[:, None]
    with quiet_floats():
        m = 1.0 + kappa * mu * B
        q = 1.0 + 2.0 * kappa * mu * B + kappa**2 * nu * B**2
        mean = ca * np.prod(m, axis=0)
        second = ca**2 * np.prod(q, axis=0)
        dmean = ca * exclusive_products(m) * (kappa * mu)
        dsecond = ca**2 * exclusive_products(q) * (2.0 * kappa * mu + 2.0 * kappa**2 * nu * B)
        grad = -s_ * dmean + 0.5 * d_ * dsecond
        loss_modes = -s_ * mean + 0.5 * d_ * second
        average = -s_ * mean + 0.5 * d_ * mean**2
    finite_results("the expected loss", second, grad, loss_modes, average)
    return ChainExpectation(
        loss=float(loss_modes.sum()),
        loss_modes=loss_modes,
        mean=mean,
        second=second,
        grad=grad[:, 0] if vector else grad,
        average_loss=float(average.sum()),
    )


def brute_force_chain(
    b: np.ndarray,
    p: np.ndarray,
    *,
    s: float | np.ndarray,
    d: float | np.ndarray = 1.0,
    scaling: str | float = "plain",
    mask: str = "unscaled",
    a: float | np.ndarray = 1.0,
    c: float | np.ndarray = 1.0,
) -> tuple[float, np.ndarray]:
    r"""Expected loss and gradient by enumerating all $2^L$ masks (reference; $L\le 20$).

    $\mathbb E[\mathcal L]=\sum_{\delta\in\{0,1\}^L}\prod_l p_l^{\delta_l}(1-p_l)^{1-\delta_l}
    \,\mathcal L(\delta)$, with the gradient of each masked loss taken in closed form.

    Parameters
    ----------
    b
        ``(L,)`` or ``(L, M)`` residual scalars, one column per mode.
    p
        ``(L,)`` survival probabilities (shared by all modes: one mask per step).
    s, d
        Per-mode input-output and input strengths (scalars or ``(M,)``).
    scaling
        ``"plain"``, ``"stable"`` ($\kappa=1/\sqrt L$) or a number $\kappa$.
    mask
        ``"unscaled"`` or ``"inverted"`` (see :data:`MASK_CONVENTIONS`).
    a, c
        Fixed input and output scalars of each mode (default 1).

    Returns
    -------
    (float, numpy.ndarray)
        Expected loss summed over modes, and its gradient shaped like ``b``.

    Raises
    ------
    StochasticDepthError
        $L > 20$, or an input is malformed.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Eq. (1): the
    masked residual network.
    """
    B, p, conv, s_, d_, ca, vector = chain_inputs(b, p, mask, s, d, a, c)
    L = B.shape[0]
    if L > 20:
        raise StochasticDepthError(
            f"L = {L} is too deep to enumerate 2^L masks; expected L <= 20", key="L"
        )
    kappa = chain_scale(scaling, L)
    total = 0.0
    g = np.zeros_like(B)
    chunk = 1 << min(L, 14)
    bits = 1 << np.arange(L - 1, -1, -1)
    for start in range(0, 1 << L, chunk):
        # masks start .. start + chunk - 1 in binary, first block as the highest bit
        masks = ((np.arange(start, start + chunk)[:, None] & bits) > 0).astype(float)
        prob = np.prod(np.where(masks == 1.0, p, 1.0 - p), axis=1)
        gate = conv.gate_value(masks, p)
        with quiet_floats():
            loss, grad = masked_chains(gate, B, ca=ca, s=s_, d=d_, kappa=kappa)
            g += (grad * prob[:, None, None]).sum(axis=0)
            total += float((prob[:, None] * loss).sum())
    finite_results("the expected loss", total, g)
    return total, (g[:, 0] if vector else g)
