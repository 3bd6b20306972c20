r"""The closed-form solution of a λ-balanced two-layer network (a matrix Riccati equation).

For $\dot W_1 = W_2^\top(\tilde\Sigma - W_2W_1)$, $\dot W_2 = (\tilde\Sigma - W_2W_1)W_1^\top$
(whitened inputs, Eqs. 3-4 of Saxe et al. 2022 with $\Sigma^x = I$) the matrix
$\Lambda = W_2^\top W_2 - W_1W_1^\top$ is conserved. When $\Lambda = \lambda I$, the stacked
$Q = [W_1^\top;\ W_2]$ obeys $\dot Q = FQ - \tfrac12 QQ^\top Q$ with

$$F = \begin{pmatrix}-\tfrac\lambda2 I & \tilde\Sigma^\top\\ \tilde\Sigma & \tfrac\lambda2 I
\end{pmatrix},$$

so $P = QQ^\top = \begin{pmatrix}W_1^\top W_1 & W_1^\top W_2^\top\\ W_2W_1 & W_2W_2^\top
\end{pmatrix}$ obeys the Riccati equation $\dot P = FP + PF - P^2$ (Fukumizu 1998; Braun,
Dominé, Fitzgerald & Saxe 2022 for $\lambda = 0$; Dominé et al. 2025, "From lazy to rich",
for any $\lambda$), whose solution from any $P_0$ is

$$P(t) = e^{Ft}Q_0\big[I + Q_0^\top G(t) Q_0\big]^{-1}Q_0^\top e^{Ft},\qquad
G(t) = \int_0^t e^{2Fs}\,ds.$$

Unequal input and output sizes need nothing more: $F$ has the eigenvalues
$\pm\sqrt{s_\alpha^2+\lambda^2/4}$ and $\mp\lambda/2$ on the directions with no singular
value. Evaluating $P(t)$ in one go multiplies $e^{Ft}$ by the inverse of a matrix whose
condition number grows like $e^{2f_{\max}t}$; the flow is a semigroup, so gdln composes the
same closed form over sub-intervals $\Delta$ on which every inverse is well conditioned:
$Q \leftarrow e^{F\Delta}QL^{-\top}$ with $LL^\top = I + Q^\top G(\Delta)Q$, in the
eigenbasis of $F$. Each step is exact; only rounding accumulates. The condition number of
$I + Q^\top GQ$ is at most $1 + \lVert G(\Delta)\rVert\,\lambda_{\max}(P)$, and
$\lambda_{\max}(P(t)) \le B = \max(\lambda_{\max}(P_0), 2f_{\max})$ at all times (for
the top eigenvector $v$, $v^\top\dot Pv = 2\lambda_{\max}v^\top Fv - \lambda_{\max}^2
\le 2f_{\max}\lambda_{\max} - \lambda_{\max}^2$), so steps with $f_{\max}\Delta \le 2$
and $1 + \lVert G(\Delta)\rVert B \le 100$ keep it below 100; $f_{\max}$ is the
largest eigenvalue of $F$. The cost is about $f_{\max}t/2$ steps of $(r+o)$-sized linear algebra.
"""

from __future__ import annotations

import math

import numpy as np

from .._bounded._limits import check_work

__all__: list[str] = []  # package-internal: used by gdln.balanced._solve

MAX_GROWTH = 2.0
"""Largest $f_{\\max}\\Delta$ of one step (the growth $e^{f\\Delta}$ of any direction)."""
STEP_SECONDS = 3e-5
"""Seconds of one step of the composed closed form (small dense linear algebra: a
Cholesky factor and a solve of ``(r + o)``-sized matrices)."""
MAX_CONDITION = 100.0
"""Bound on the condition number of $I + Q^\\top G(\\Delta)Q$ in one step."""


def riccati_matrix(target: np.ndarray, lam: float) -> np.ndarray:
    r"""$F$ of the Riccati equation (module docstring), ``(r + o, r + o)`` for ``(o, r)``.

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
    target: np.ndarray, lam: float, q0: np.ndarray, times: np.ndarray, *, what: str = ""
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
    what
        A prefix naming the file and pathway in the error of a solution whose steps
        (about $f_{\max}t/2$, :data:`STEP_SECONDS` each) pass the limit ``work``.

    Returns
    -------
    numpy.ndarray
        ``(T, r + o, r + o)``.
    """
    return riccati_steps(target, lam, q0, times, what=what)[0]


def riccati_steps(
    target: np.ndarray, lam: float, q0: np.ndarray, times: np.ndarray, *, what: str = ""
) -> tuple[np.ndarray, np.ndarray]:
    r""":func:`riccati_solution`, and a factor $Q$ with $QQ^\top = P$ at the last time.

    The factor is the one the composed closed form carries (at most $r + o$ columns, the
    same $QQ^\top$ as $Q_0$'s flow, in the nodes' coordinates): where a schedule
    restarts the solution from the end of a phase, it is the next phase's $Q_0$.

    Returns
    -------
    tuple
        ``(P, Q)``: ``(T, r + o, r + o)`` and ``(r + o, k)``.
    """
    F = riccati_matrix(target, lam)
    f, basis = np.linalg.eigh(F)
    # a thin factor with the same Q Q^T: at most r + o columns, whatever the hidden width
    q = basis.T @ q0
    if q.shape[1] > q.shape[0]:
        q = np.asarray(np.linalg.qr(q.T, mode="r")).T
    f_max = max(float(f.max()), 0.0)
    # the largest eigenvalue of P never exceeds max(its start, 2 f_max) (module docstring)
    bound = max(float(np.linalg.norm(q, 2)) ** 2 if q.size else 0.0, 2 * f_max)
    longest = _longest_step(f_max, bound)
    span = float(np.max(times, initial=0.0))
    total = span / longest + len(times) if longest > 0 else math.inf
    check_work(
        total * STEP_SECONDS,
        f"{what}the closed form in {total:.3g} steps of at most {longest:.3g} "
        f"(F's largest rate {f_max:.3g}, P up to {bound:.3g})",
        advice="smaller lambda, weights or t_max",
    )
    out = np.empty((len(times), *F.shape))
    steps: dict[float, tuple[np.ndarray, np.ndarray]] = {}
    before = 0.0
    for k, t in enumerate(np.asarray(times, dtype=float)):
        span = t - before
        if span > 0:
            count = max(1, math.ceil(span / longest))
            dt = span / count
            if dt not in steps:
                steps[dt] = _propagator(f, dt)
            for _ in range(count):
                q = _step(q, *steps[dt])
        before = max(before, t)
        out[k] = basis @ (q @ q.T) @ basis.T
    return (out + out.transpose(0, 2, 1)) / 2, basis @ q


def _longest_step(f_max: float, bound: float) -> float:
    """The longest step with $f_{\\max}\\Delta \\le$ ``MAX_GROWTH`` and
    $1 + g_{\\max}(\\Delta)B \\le$ ``MAX_CONDITION`` (module docstring)."""
    if bound <= 0:
        return MAX_GROWTH / f_max if f_max > 0 else math.inf
    step = MAX_GROWTH / f_max if f_max > 0 else (MAX_CONDITION - 1) / bound
    with np.errstate(over="ignore"):  # an overflow is a step too long: halve it
        while 1 + float(_propagator(np.array([f_max]), step)[1][0]) * bound > MAX_CONDITION:
            step /= 2
    return step


def _propagator(f: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
    r"""$e^{f_i\Delta}$ and $g_i = (e^{2f_i\Delta}-1)/(2f_i)$ (``expm1``; $\Delta$ where $f_i = 0$)."""
    x = 2 * f * dt
    ratio = np.ones_like(x)
    nonzero = x != 0
    ratio[nonzero] = np.expm1(x[nonzero]) / x[nonzero]
    return np.exp(f * dt), dt * ratio


def _step(q: np.ndarray, growth: np.ndarray, g: np.ndarray) -> np.ndarray:
    r"""$Q \leftarrow e^{F\Delta}QL^{-\top}$, $LL^\top = I + Q^\top G(\Delta)Q$, in $F$'s
    eigenbasis, where $e^{F\Delta}$ (``growth``) and $G(\Delta)$ (``g``) are diagonal."""
    M = np.eye(q.shape[1]) + q.T @ (g[:, None] * q)
    L = np.linalg.cholesky(M)
    return np.linalg.solve(L, (growth[:, None] * q).T).T
