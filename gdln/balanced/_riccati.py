r"""The closed-form solution of a λ-balanced two-layer network (a matrix Riccati equation).

For $\dot W_1 = W_2^\top(\tilde\Sigma - W_2W_1)$, $\dot W_2 = (\tilde\Sigma - W_2W_1)W_1^\top$
(whitened inputs, Eqs. 3-4 of Saxe et al. 2022 with $\Sigma^x = I$) the matrix
$\Lambda = W_2^\top W_2 - W_1W_1^\top$ is conserved. When $\Lambda = \lambda I$, the stacked
$Q = [W_1^\top;\ W_2]$ obeys $\dot Q = FQ - \tfrac12 QQ^\top Q$ with

$$F = \begin{pmatrix}-\tfrac\lambda2 I & \tilde\Sigma^\top\\ \tilde\Sigma & \tfrac\lambda2 I
\end{pmatrix},$$

so $P = QQ^\top = \begin{pmatrix}W_1^\top W_1 & W_1^\top W_2^\top\\ W_2W_1 & W_2W_2^\top
\end{pmatrix}$ obeys the Riccati equation $\dot P = FP + PF - P^2$ (Fukumizu 1998; Braun,
Dominé, Fitzgerald & Saxe 2022, Eq. 5 and Thm. 3.1), whose solution from any $P_0$ is

$$P(t) = e^{Ft}Q_0\big[I + Q_0^\top G(t) Q_0\big]^{-1}Q_0^\top e^{Ft},\qquad
G(t) = \int_0^t e^{2Fs}\,ds.$$

Unequal input and output sizes need nothing more: $F$ has the eigenvalues
$\pm\sqrt{s_\alpha^2+\lambda^2/4}$ and $\mp\lambda/2$ on the directions with no singular
value. Evaluating $P(t)$ in one go multiplies $e^{Ft}$ by the inverse of a matrix whose
condition number grows like $e^{2f_{\max}t}$; the flow is a semigroup, so gdln composes the
same closed form over sub-intervals $\Delta$ on which $f_{\max}\Delta \le 1$ and
$\Delta\,\lVert Q\rVert_F^2 \le 4$, where every inverse is well conditioned:
$Q \leftarrow e^{F\Delta}QL^{-\top}$ with $LL^\top = I + Q^\top G(\Delta)Q$, in the
eigenbasis of $F$. Each step is exact; only rounding accumulates.
"""

from __future__ import annotations

import math

import numpy as np

__all__: list[str] = []  # package-internal: used by gdln.balanced._solve

MAX_GROWTH = 1.0
"""Largest $f_{\\max}\\Delta$ of one step (the growth $e^{f\\Delta}$ of any direction)."""
MAX_STEP_LOAD = 4.0
"""Largest $\\Delta\\lVert Q\\rVert_F^2$ of one step (bounds the condition of $I + Q^\\top GQ$)."""


def riccati_matrix(target: np.ndarray, lam: float) -> np.ndarray:
    r"""$F$ of Braun et al. (2022), Eq. (5): ``(r + o, r + o)`` for a target ``(o, r)``.

    >>> riccati_matrix(np.array([[2.0]]), 1.0)
    array([[-0.5,  2. ],
           [ 2. ,  0.5]])
    """
    o, r = target.shape
    F = np.zeros((r + o, r + o))
    F[:r, :r] = -lam / 2 * np.eye(r)
    F[r:, r:] = lam / 2 * np.eye(o)
    F[:r, r:] = target.T
    F[r:, :r] = target
    return F


def riccati_solution(
    target: np.ndarray, lam: float, q0: np.ndarray, times: np.ndarray
) -> np.ndarray:
    r"""$P(t) = Q(t)Q(t)^\top$ of the λ-balanced flow at ``times`` (module docstring).

    Parameters
    ----------
    target
        $\tilde\Sigma$, ``(o, r)``.
    lam
        $\lambda$ of $W_2^\top W_2 - W_1W_1^\top = \lambda I$.
    q0
        $Q_0 = [W_1^\top;\ W_2]$, ``(r + o, h)``.
    times
        Non-decreasing times from 0, in the whitened clock.

    Returns
    -------
    numpy.ndarray
        ``(T, r + o, r + o)``.
    """
    F = riccati_matrix(target, lam)
    f, O = np.linalg.eigh(F)
    # a thin factor with the same Q Q^T: at most r + o columns, whatever the hidden width
    q = O.T @ q0
    if q.shape[1] > q.shape[0]:
        q = np.linalg.qr(q.T, mode="r").T
    f_max = max(float(f.max()), 0.0)
    out = np.empty((len(times), *F.shape))
    now = 0.0
    for k, t in enumerate(np.asarray(times, dtype=float)):
        while now < t:
            load = float(np.sum(q * q))
            limit = min(
                MAX_GROWTH / f_max if f_max > 0 else math.inf,
                MAX_STEP_LOAD / load if load > 0 else math.inf,
            )
            dt = min(t - now, limit)
            q = _step(q, f, dt)
            now = t if dt == t - now else now + dt
        out[k] = O @ (q @ q.T) @ O.T
    return (out + out.transpose(0, 2, 1)) / 2


def _step(q: np.ndarray, f: np.ndarray, dt: float) -> np.ndarray:
    r"""$Q \leftarrow e^{F\Delta}QL^{-\top}$, $LL^\top = I + Q^\top G(\Delta)Q$, in $F$'s eigenbasis.

    $G(\Delta)$ is diagonal there, $g_i = (e^{2f_i\Delta}-1)/(2f_i)$ (``expm1``; $\Delta$
    where $f_i = 0$).
    """
    x = 2 * f * dt
    ratio = np.ones_like(x)
    nonzero = x != 0
    ratio[nonzero] = np.expm1(x[nonzero]) / x[nonzero]
    g = dt * ratio
    M = np.eye(q.shape[1]) + q.T @ (g[:, None] * q)
    L = np.linalg.cholesky(M)
    scaled = np.exp(f * dt)[:, None] * q
    return np.linalg.solve(L, scaled.T).T
