r"""Linear residual networks with stochastic depth, full matrices: exact expected loss.

$y=W_{\rm out}\prod_l(I+\kappa\tilde\delta_lW_l)W_{\rm in}x$ need not be aligned with
the task, so its modes do not decouple; its expected loss is still exact without listing
the $2^L$ paths of Saxe et al.'s path sum, through a recursion for the second moment of
the hidden state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._chain import chain_scale
from ._checks import StochasticDepthError, check_probabilities
from ._masks import mask_convention

__all__ = ["LinearResNetExpectation", "expected_linear_resnet"]


@dataclass(frozen=True)
class LinearResNetExpectation:
    r"""Exact expected loss of a linear SD ResNet and its gradients.

    Parameters
    ----------
    loss
        $\mathbb E_\delta[\mathcal L]$ (Eq. 1 of Saxe et al. with the $\frac12\mathrm{tr}
        \Sigma^{yy}$ term when given).
    average_loss
        Loss of the average network
        $W_{\rm out}\prod_l(I+\kappa\,\mathbb E\tilde\delta_l\,W_l)W_{\rm in}$.
    grad_blocks
        ``(L, N, N)`` gradient of ``loss`` in the block weights.
    grad_in, grad_out
        Gradients in $W_{\rm in}$ and $W_{\rm out}$.

    Raises
    ------
    TypeError, ValueError
        A field has the wrong type or shape.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (1); Hayou & Ayed (2021), "Regularization in ResNet
    with Stochastic Depth", Eqs. (1) and (4).
    """

    loss: float
    average_loss: float
    grad_blocks: np.ndarray
    grad_in: np.ndarray
    grad_out: np.ndarray

    def __post_init__(self) -> None:
        if not isinstance(self.loss, float) or not isinstance(self.average_loss, float):
            raise TypeError("loss and average_loss must be Python floats")
        if self.grad_blocks.ndim != 3:
            raise ValueError("grad_blocks must be (L, N, N)")


def _resnet_arrays(
    blocks: np.ndarray,
    sigma_x: np.ndarray,
    sigma_yx: np.ndarray,
    w_in: np.ndarray | None,
    w_out: np.ndarray | None,
) -> dict[str, np.ndarray]:
    """The weights and statistics as float arrays whose shapes chain (identity defaults)."""
    blocks = np.asarray(blocks, dtype=float)
    if blocks.ndim != 3 or blocks.shape[1] != blocks.shape[2]:
        raise StochasticDepthError(
            f"blocks has shape {blocks.shape}; expected (L, N, N)", key="blocks"
        )
    N = blocks.shape[1]
    sx = np.asarray(sigma_x, dtype=float)
    syx = np.asarray(sigma_yx, dtype=float)
    win = np.eye(N) if w_in is None else np.asarray(w_in, dtype=float)
    wout = np.eye(N) if w_out is None else np.asarray(w_out, dtype=float)
    if (
        win.shape != (N, sx.shape[0])
        or wout.shape != (syx.shape[0], N)
        or syx.shape[1] != sx.shape[0]
    ):
        raise StochasticDepthError(
            f"shapes do not chain: w_in {win.shape}, blocks {(N, N)}, w_out {wout.shape}, "
            f"sigma_x {sx.shape}, sigma_yx {syx.shape}",
            key="sigma_yx",
        )
    return {"W": blocks, "win": win, "wout": wout, "sx": sx, "syx": syx}


def _expected_losses(
    t: dict[str, Any], mu: np.ndarray, nu: np.ndarray, kappa: float, trace_yy: float
) -> tuple[Any, Any]:
    r"""$\mathbb E\mathcal L$ and the average network's loss as torch scalars.

    The mean map $\mathbb EF$ and the second moment $S_l$ of the hidden state follow the
    recursion of :func:`expected_linear_resnet`, one block at a time.
    """
    W, win, wout = t["W"], t["win"], t["wout"]
    mean_map = win
    S = win @ t["sx"] @ win.T
    for ell in range(W.shape[0]):
        Wl = W[ell]
        mean_map = mean_map + kappa * mu[ell] * (Wl @ mean_map)
        WS = Wl @ S
        S = S + kappa * mu[ell] * (WS + WS.T) + kappa**2 * nu[ell] * (WS @ Wl.T)
    EF = wout @ mean_map
    cross = (EF @ t["syx"].T).trace()
    loss = 0.5 * trace_yy - cross + 0.5 * (wout @ S @ wout.T).trace()
    average = 0.5 * trace_yy - cross + 0.5 * (EF @ t["sx"] @ EF.T).trace()
    return loss, average


def expected_linear_resnet(
    blocks: np.ndarray,
    p: np.ndarray,
    sigma_x: np.ndarray,
    sigma_yx: np.ndarray,
    *,
    w_in: np.ndarray | None = None,
    w_out: np.ndarray | None = None,
    trace_yy: float = 0.0,
    scaling: str | float = "plain",
    mask: str = "unscaled",
) -> LinearResNetExpectation:
    r"""Exact expected loss of $y=W_{\rm out}\prod_l(I+\kappa\tilde\delta_lW_l)W_{\rm in}x$.

    No path is listed: with independent gates the mean map is
    $\mathbb E F = W_{\rm out}\prod_l(I+\kappa\mu_lW_l)W_{\rm in}$ and the second moment
    of the hidden state obeys $S_0=W_{\rm in}\Sigma^xW_{\rm in}^T$,
    $S_l = S_{l-1}+\kappa\mu_l(W_lS_{l-1}+S_{l-1}W_l^T)+\kappa^2\nu_lW_lS_{l-1}W_l^T$
    ($\mu=\mathbb E\tilde\delta$, $\nu=\mathbb E\tilde\delta^2$), so
    $\mathbb E\mathcal L = \frac12\mathrm{tr}\Sigma^{yy}-\mathrm{tr}(\mathbb EF\,\Sigma^{yx\,T})
    +\frac12\mathrm{tr}(W_{\rm out}S_LW_{\rm out}^T)$, in $O(LN^3)$ for the $2^L$ paths of
    Saxe et al.'s path sum (Eq. 1 of Saxe et al. 2022). Gradients by reverse-mode AD
    (torch, float64).

    Parameters
    ----------
    blocks
        ``(L, N, N)`` residual weights $W_l$.
    p
        ``(L,)`` survival probabilities.
    sigma_x, sigma_yx
        Input covariance $\Sigma^x$ ``(D, D)`` and input-output covariance $\Sigma^{yx}$
        ``(O, D)``.
    w_in, w_out
        ``(N, D)`` and ``(O, N)``; identity when omitted (then $D=N$ or $O=N$).
    trace_yy
        $\mathrm{tr}\,\Sigma^{yy}$ (a constant).
    scaling
        ``"plain"``, ``"stable"`` ($\kappa=1/\sqrt L$) or a number $\kappa$.
    mask
        ``"unscaled"`` or ``"inverted"`` (see :data:`MASK_CONVENTIONS`).

    Returns
    -------
    LinearResNetExpectation
        The expected loss, the average network's loss and the gradients of the
        expected loss in every weight.

    Raises
    ------
    StochasticDepthError
        Shapes disagree, or ``p``, ``scaling`` or ``mask`` is malformed.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (1) (the loss as a sum over paths);
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Eqs. (1), (3) and (4).
    """
    import torch

    conv = mask_convention(mask)
    arrays = _resnet_arrays(blocks, sigma_x, sigma_yx, w_in, w_out)
    L = arrays["W"].shape[0]
    p = check_probabilities(p, positive=conv.inverted)
    if p.shape != (L,):
        raise StochasticDepthError(
            f"p has shape {p.shape}; expected ({L},), one survival probability per block",
            key="p",
        )
    trained = ("W", "win", "wout")
    t = {
        k: torch.tensor(v, dtype=torch.float64, requires_grad=k in trained)
        for k, v in arrays.items()
    }
    loss, average = _expected_losses(
        t, conv.mean(p), conv.second_moment(p), chain_scale(scaling, L), trace_yy
    )
    gW, gin, gout = torch.autograd.grad(loss, tuple(t[k] for k in trained))
    return LinearResNetExpectation(
        loss=float(loss.detach()),
        average_loss=float(average.detach()),
        grad_blocks=gW.numpy(),
        grad_in=gin.numpy(),
        grad_out=gout.numpy(),
    )
