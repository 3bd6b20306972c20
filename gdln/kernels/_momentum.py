r"""Depth-induced momentum: Prop. 6.2 of the path-formula paper.

Adding a trainable scalar layer $g=\mu f$ in front of a network $f$ changes its
gradient-descent Gram matrix to $H(g)=\mu^2H(f)+u_fu_f^\top$ (Eq. (34), App. F of
*Model architecture controls gradient descent dynamics: a combinatorial path-based
formula*); :func:`momentum_cosines` evaluates both readings of Prop. 6.2 at one state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._errors import GraphSpecError

__all__ = ["MomentumCosines", "momentum_cosines", "scalar_layer_gram"]


def scalar_layer_gram(h_f: np.ndarray, u_f: np.ndarray, mu: float) -> np.ndarray:
    r"""$H(g)=\mu^2H(f)+u_fu_f^\top$ for $g=\mu f$ with a trainable scalar $\mu$.

    Eq. (34) of App. F of the path-formula paper: $g$ has every path of $f$ with $\mu$ in
    front, and one new path of length 1 (the edge $\mu$, fed by $f$'s output).

    Parameters
    ----------
    h_f
        ``(N, N)`` Gram matrix $H(f)$.
    u_f
        ``(N,)`` outputs of $f$.
    mu
        The scalar $\mu$.

    Returns
    -------
    numpy.ndarray
        ``(N, N)`` $H(g)$.

    Raises
    ------
    GraphSpecError
        The shapes of ``h_f`` and ``u_f`` do not fit.

    References
    ----------
    *Model architecture controls gradient descent dynamics: a combinatorial path-based
    formula*, Eq. (34), App. F.
    """
    h = np.asarray(h_f, dtype=float)
    u = np.asarray(u_f, dtype=float).reshape(-1)
    if h.ndim != 2 or h.shape != (len(u), len(u)):
        raise GraphSpecError(
            f"h_f, u_f: got shapes {h.shape} and {u.shape}, expected (N, N) and (N,)"
        )
    return mu * mu * h + np.outer(u, u)


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return float("nan")
    return float(a @ b) / (na * nb)


@dataclass(frozen=True)
class MomentumCosines:
    r"""The two sides of Prop. 6.2 of the path-formula paper at one state.

    Parameters
    ----------
    proved_f, proved_g
        $\cos(H(f)u_f,u_f)$ and $\cos(H(g)u_g,u_g)$: the form App. F proves,
        $\cos(H(g)u_g,u_g)\ge\cos(H(f)u_f,u_f)$ (Eqs. 41-47), true for every PSD $H(f)$.
    flow_f, flow_g
        $\cos(H(f)(y-u_f),u_f)$ and $\cos(H(g)(y-u_g),u_g)$: Eq. (17) read literally with
        $du/dt=-H(u-y)$ (Eq. 4); ``nan`` when no targets were given.

    References
    ----------
    *Model architecture controls gradient descent dynamics: a combinatorial path-based
    formula*, Prop. 6.2 and App. F.
    """

    proved_f: float
    proved_g: float
    flow_f: float
    flow_g: float

    @property
    def proved_holds(self) -> bool:
        r"""$\cos(H(g)u_g,u_g)\ge\cos(H(f)u_f,u_f)$ up to rounding."""
        return self.proved_g >= self.proved_f - 1e-12

    @property
    def flow_holds(self) -> bool:
        r"""$\cos(H(g)(y-u_g),u_g)\ge\cos(H(f)(y-u_f),u_f)$ up to rounding."""
        return self.flow_g >= self.flow_f - 1e-12


def momentum_cosines(
    h_f: np.ndarray, u_f: np.ndarray, mu: float, y: np.ndarray | None = None
) -> MomentumCosines:
    r"""Both readings of Prop. 6.2 (depth-induced momentum) of the path-formula paper.

    $g=\mu f$, $u_g=\mu u_f$ and $H(g)$ from Eq. (34) (:func:`scalar_layer_gram`).

    Parameters
    ----------
    h_f
        ``(N, N)`` Gram matrix $H(f)$.
    u_f
        ``(N,)`` outputs $u_f$ of $f$ on the examples.
    mu
        The scalar $\mu$.
    y
        ``(N,)`` targets, for the ``flow_*`` reading (optional).

    Returns
    -------
    MomentumCosines
        Both sides of both readings.

    Raises
    ------
    GraphSpecError
        The shapes of ``h_f``, ``u_f`` or ``y`` do not fit.

    References
    ----------
    *Model architecture controls gradient descent dynamics: a combinatorial path-based
    formula*, Prop. 6.2, Eqs. (17) and (34), App. F.

    Examples
    --------
    >>> c = momentum_cosines(np.diag([1.0, 4.0]), np.array([1.0, 1.0]), 1.0)
    >>> c.proved_holds, round(c.proved_f, 4), round(c.proved_g, 4)
    (True, 0.8575, 0.9487)
    """
    u = np.asarray(u_f, dtype=float).reshape(-1)
    h = np.asarray(h_f, dtype=float)
    hg = scalar_layer_gram(h, u, mu)
    ug = mu * u
    if y is None:
        flow_f = flow_g = float("nan")
    else:
        yv = np.asarray(y, dtype=float).reshape(-1)
        if yv.shape != u.shape:
            raise GraphSpecError(f"y: got shape {yv.shape}, expected {u.shape} (one per u_f)")
        flow_f = _cos(h @ (yv - u), u)
        flow_g = _cos(hg @ (yv - ug), ug)
    return MomentumCosines(_cos(h @ u, u), _cos(hg @ ug, ug), flow_f, flow_g)
