r"""Closed-form learning dynamics that the numeric references are tested against.

Reference for tests (imports no gdln). Time is in units of $\tau$ unless ``tau`` is given.

- :func:`linear_flow` / :func:`linear_gd`: a one-layer linear network $W$ on second moments
  $\Sigma^x, \Sigma^{yx}$ under $\tau\dot W = \Sigma^{yx} - W(\Sigma^x + \gamma I)$ (Eq. 2 with
  one edge and weight decay $\gamma$) and its gradient-descent map.
- :func:`logistic_mode`: the effective singular value of a balanced two-layer pathway,
  Eq. (21) of Saxe, Sodhani & Lewallen (2022) (Saxe et al. 2014's sigmoidal solution),
  and :func:`mode_loss`, Eq. (22) per mode.
- :func:`aligned_two_layer`: the decoupled (aligned, balanced) start of Eq. (9) for a
  two-layer chain, on which each mode follows Eq. (21) exactly.
- :func:`riccati_qqt`: the λ-balanced two-layer solution on whitened inputs
  ($\Sigma^x = I$, $\Lambda = W_2^\top W_2 - W_1 W_1^\top = \lambda I$; Fukumizu 1998,
  Braun et al. 2022), written from the matrix Riccati equation below.

Riccati form. With $Q = [W_1^\top; W_2]$ and $P = QQ^\top$ (so $W_2W_1$ is the lower-left
block of $P$), gradient flow with $\Sigma^x = I$ and $\Lambda = \lambda I$ gives
$\tau\dot P = F_\lambda P + P F_\lambda - P^2$ with
$F_\lambda = \begin{bmatrix} -\lambda/2\, I & \Sigma^{yx\top} \\ \Sigma^{yx} & \lambda/2\, I
\end{bmatrix}$ (the ExactLearningDynamics repository's lambda_balanced.py, lines 116-118 and
223-225, has commented-out versions with both signs; its λ is $W_1W_1^\top - W_2^\top W_2$;
the sign here is the one the tests confirm against the full-matrix flow). Its solution is
$P(t) = e^{F_\lambda t}\,[I + P_0 K(t)]^{-1} P_0\, e^{F_\lambda t}$ with
$K(t) = \int_0^t e^{2F_\lambda s}\,ds$ (differentiate to check). It depends on the start only
through $P_0$, so it can be restarted from the end of a previous task exactly. For
$\Sigma^x = cI$ apply it to $cP$ (the weights scaled by $\sqrt c$) with the same
$\Sigma^{yx}$ and $c\lambda$.

>>> import numpy as np
>>> float(logistic_mode(1.0, 1.0, 0.5, 0.0))
0.5
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import expm


def linear_flow(
    Sigma_x, Sigma_yx, W0, t: float, *, tau: float = 1.0, gamma: float = 0.0
) -> np.ndarray:
    r"""$W(t)$ of $\tau\dot W = \Sigma^{yx} - W A$, $A = \Sigma^x + \gamma I$.

    $W(t) = W_0 e^{-A t/\tau} + \Sigma^{yx}\int_0^{t/\tau} e^{-A u}\,du$; when $A$ is
    invertible this is $W^* + (W_0 - W^*)e^{-At/\tau}$ with $W^* = \Sigma^{yx}A^{-1}$.
    The integral comes from one matrix exponential (Van Loan), so a singular $\Sigma^x$
    is fine.
    """
    Sx = np.atleast_2d(np.asarray(Sigma_x, dtype=float))
    d = Sx.shape[0]
    A = Sx + gamma * np.eye(d)
    block = np.zeros((2 * d, 2 * d))
    block[:d, :d] = -A
    block[:d, d:] = np.eye(d)
    E = expm(block * (t / tau))
    return np.asarray(W0, dtype=float) @ E[:d, :d] + np.atleast_2d(Sigma_yx) @ E[:d, d:]


def linear_gd(Sigma_x, Sigma_yx, W0, steps: int, lr: float, *, gamma: float = 0.0) -> np.ndarray:
    r"""$W_k$ of $W_{k+1} = W_k(I - \mathrm{lr}\,A) + \mathrm{lr}\,\Sigma^{yx}$, $A = \Sigma^x + \gamma I$.

    $[W_k, \Sigma^{yx}] = [W_0, \Sigma^{yx}]\,P^k$ with
    $P = \begin{bmatrix} I - \mathrm{lr}A & 0 \\ \mathrm{lr}\,I & I\end{bmatrix}$.
    """
    Sx = np.atleast_2d(np.asarray(Sigma_x, dtype=float))
    d = Sx.shape[0]
    P = np.zeros((2 * d, 2 * d))
    P[:d, :d] = np.eye(d) - lr * (Sx + gamma * np.eye(d))
    P[d:, :d] = lr * np.eye(d)
    P[d:, d:] = np.eye(d)
    Z = np.hstack([np.asarray(W0, dtype=float), np.atleast_2d(Sigma_yx)]) @ np.linalg.matrix_power(
        P, steps
    )
    return Z[:, :d]


def logistic_mode(s, d, a0, t, *, tau: float = 1.0):
    r"""Eq. (21): $a(t) = \dfrac{s/d}{1 - (1 - \frac{s}{d a_0}) e^{-2st/\tau}}$.

    The product $a = b_2 b_1$ of a balanced ($b_1 = b_2$) two-layer scalar mode with
    input-output singular value $s$ and input variance $d$, from $a(0) = a_0$.
    """
    t = np.asarray(t, dtype=float)
    r = s / d
    return r / (1.0 - (1.0 - r / a0) * np.exp(-2.0 * s * t / tau))


def mode_loss(s, d, a, sigma_y: float = 0.0):
    r"""Eq. (22) for one mode: $\tfrac12\sigma_y - s a + \tfrac12 d a^2$."""
    return 0.5 * sigma_y - s * a + 0.5 * d * np.asarray(a) ** 2


def aligned_two_layer(U, V, a0, hidden: int, R=None) -> tuple[np.ndarray, np.ndarray]:
    r"""Decoupled start of Eq. (9) for $x \to h \to y$: $W_1 = R\sqrt{A_0}V^\top$, $W_2 = U\sqrt{A_0}R^\top$.

    ``U`` (out x r) and ``V`` (in x r) hold the task's singular vectors in columns, ``a0``
    the r initial mode strengths (products); ``R`` (hidden x r, orthonormal columns)
    defaults to the first r unit vectors. Each mode then follows :func:`logistic_mode`
    when $\Sigma^{yx} = U S V^\top$ and $\Sigma^x = V D V^\top$ share $V$.
    """
    U, V = np.atleast_2d(U), np.atleast_2d(V)
    a0 = np.atleast_1d(np.asarray(a0, dtype=float))
    r = len(a0)
    R = np.eye(hidden)[:, :r] if R is None else np.asarray(R, dtype=float)
    root = np.diag(np.sqrt(a0))
    return R @ root @ V[:, :r].T, U[:, :r] @ root @ R.T


def qqt(W1, W2) -> np.ndarray:
    """$P = QQ^\\top$ with $Q = [W_1^\\top; W_2]$ (inputs first, then outputs)."""
    Q = np.vstack([np.asarray(W1).T, np.asarray(W2)])
    return Q @ Q.T


def balance(W1, W2) -> np.ndarray:
    """$\\Lambda = W_2^\\top W_2 - W_1 W_1^\\top$ (conserved by gradient flow, any data, no decay)."""
    return np.asarray(W2).T @ np.asarray(W2) - np.asarray(W1) @ np.asarray(W1).T


def riccati_qqt(P0, Sigma_yx, lam: float, t: float, *, tau: float = 1.0) -> np.ndarray:
    r"""$P(t)$ of $\tau\dot P = F_\lambda P + PF_\lambda - P^2$ from $P_0$ (see the module docstring).

    Valid for a two-layer network on whitened inputs ($\Sigma^x = I$) whose start is
    λ-balanced, $W_2^\top W_2 - W_1W_1^\top = \lambda I$. The network function
    $W_2W_1(t)$ is ``P[d_in:, :d_in]``.
    """
    S = np.atleast_2d(np.asarray(Sigma_yx, dtype=float))
    n_out, n_in = S.shape
    F = np.block([[-lam / 2 * np.eye(n_in), S.T], [S, lam / 2 * np.eye(n_out)]])
    f, basis = np.linalg.eigh(F)
    P = np.asarray(P0, dtype=float)
    # the semigroup property: apply the closed form over pieces with |f| * piece <= 2, so
    # that I + P K stays well conditioned however long t is (exact up to rounding)
    pieces = max(1, int(np.ceil(np.abs(f).max() * abs(t / tau) / 2.0)))
    s = t / tau / pieces
    grow = basis @ np.diag(np.exp(f * s)) @ basis.T
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(np.abs(f) > 1e-14, np.expm1(2 * f * s) / (2 * f), s)
    K = basis @ np.diag(k) @ basis.T
    for _ in range(pieces):
        P = grow @ np.linalg.solve(np.eye(len(F)) + P @ K, P) @ grow
        P = 0.5 * (P + P.T)
    return P
