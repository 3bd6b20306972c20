r"""How small variables leave a saddle, at leading order as the initial scale $u_0\to 0$.

At a plateau the active variables sit at a fixed point $b^*$ and the others are small. The
small ones follow gradient flow on $\Phi(\varepsilon)=-\mathcal{L}(b^*,\varepsilon)$ with
the tying weights $w$ ($\tau\dot\varepsilon_i = w_i\,\partial\Phi/\partial\varepsilon_i$,
Eq. 10 of Saxe et al. 2022 with the $1/|O|$ of tying, Eqs. 44-46). Its lowest homogeneous
part decides what escapes first and when:

* **degree 2** (two small edges on a path): $\dot\varepsilon = WH\varepsilon$ is linear,
  each eigen-direction grows as $e^{\lambda t}$, so a variable of size $u_0^{q}$ escapes
  after $t = q\ln(1/u_0)/\lambda$. Sizes are tracked as orders $q$ (the exponent of $u_0$)
  with prefactors: after a stage of length $\tau\ln(1/u_0)$ the component of eigenvalue
  $\lambda_k$ has order $q_k - \lambda_k\tau$ (a max-plus recursion). With one pathway
  this is the logistic escape of Eq. (21); with several it is the budget bookkeeping of
  Zhang, Latham & Saxe (2024): the weaker pathway spends $\lambda t$ of its $\ln(1/u_0)$
  while the stronger one escapes.
* **degree $m\ge3$** (deeper pathways): with $\varepsilon = u_0^{q}\eta$ and
  $t = u_0^{-q(m-2)}s$, $\eta$ obeys the degree-$m$ flow, which blows up at a finite
  $s^*$; so the escape time is $s^*u_0^{-q(m-2)}$ (for one balanced pathway of rate $r$,
  $s^* = 1/((m-2)r)$). Variables that grow with the escaping ones, but slower, leave with a
  smaller order: near the blow-up $\eta_e \propto \lVert\eta\rVert^{\kappa_e}$, so their
  order becomes $q(1-\kappa_e)$.

Orders are measured in units of $\ln(1/u_0)$ and times are returned as a coefficient of
$\ln(1/u_0)$ or of a power of $u_0$: the leading order, without $O(1)$ corrections.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp

from ._polynomial import Polynomial

__all__ = ["EXPONENTIAL", "POWER", "Escape", "Sizes", "escape"]

EXPONENTIAL = "exponential"
"""Escape through a degree-2 potential: time proportional to $\\ln(1/u_0)$."""
POWER = "power"
"""Escape through a degree $m\\ge3$ potential: time proportional to $u_0^{-q(m-2)}$."""

CANCEL = 1e-9  # a component below this fraction of its terms' sizes cancels exactly
RADII = (1e6, 1e12)  # the blow-up is followed from |eta| = 1 to these sizes
SLOPE_TOL = 1e-3  # growth exponents within this of 1 escape, within this of 0 do not grow
MAX_SCALED_TIME = 1e12


@dataclass(frozen=True)
class Sizes:
    r"""Sizes of the small variables: $\varepsilon_e \approx \eta_e\,u_0^{q_e}$.

    Parameters
    ----------
    order
        The exponents $q_e$ (``inf`` for a variable that is exactly zero).
    scale
        The prefactors $\eta_e$.
    """

    order: np.ndarray
    scale: np.ndarray

    def take(self, keep: np.ndarray) -> Sizes:
        """The sizes of the variables selected by ``keep`` (indices or a mask)."""
        return Sizes(self.order[keep], self.scale[keep])


@dataclass(frozen=True)
class Escape:
    r"""What leaves the saddle first, and when.

    Parameters
    ----------
    mechanism
        :data:`EXPONENTIAL` or :data:`POWER`.
    degree
        The degree $m$ of the potential part that drives it.
    coefficient, power
        The duration is ``coefficient * ln(1/u0)`` (exponential) or
        ``coefficient * u0**(-power)`` (power).
    rate
        The growth rate $\lambda$ of an exponential escape (0 for a power escape).
    escaping
        Indices of the escaping variables.
    direction
        The escape direction over all the small variables (zero except on ``escaping``).
    after
        The sizes of every small variable when the escape completes (order 0 for those
        that escape).
    """

    mechanism: str
    degree: int
    coefficient: float
    power: float
    rate: float
    escaping: tuple[int, ...]
    direction: np.ndarray
    after: Sizes


def escape(potential: Polynomial, weights: np.ndarray, sizes: Sizes) -> Escape | None:
    r"""The first escape of the small variables from a saddle, or ``None`` if none escapes.

    Parameters
    ----------
    potential
        $\Phi(\varepsilon)$ in the small variables (terms of degree 0 and 1 are ignored;
        the caller activates variables with a degree-1 force at once).
    weights
        The tying weights $w_i$ ($1/|O|$ for a variable standing for $|O|$ edges).
    sizes
        The current sizes of the small variables.

    Returns
    -------
    Escape or None
        The lowest-degree part with a growing direction decides (degree 2 first).

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (10), (21); Zhang, Latham & Saxe (2024),
    the time of the unimodal phase.
    """
    weights = np.asarray(weights, float)
    degrees = sorted({int(d) for d in potential.degrees() if d >= 2})
    for degree in degrees:
        part = potential.part(degree)
        if degree == 2:
            found = _linear_escape(part, weights, sizes)
        else:
            found = _power_escape(part, degree, weights, sizes)
        if found is not None:
            return found
    return None


# --------------------------------------------------------------------------- degree 2


def _eigen_groups(H: np.ndarray, weights: np.ndarray) -> list[tuple[float, np.ndarray]]:
    r"""Eigenvalues of $WH$ (grouped when equal) and their projectors $P_k$."""
    root = np.sqrt(weights)
    values, vectors = np.linalg.eigh(root[:, None] * H * root[None, :])
    scale = max(float(np.abs(values).max(initial=0.0)), 1e-300)
    groups: list[tuple[float, np.ndarray]] = []
    start = 0
    for k in range(1, len(values) + 1):
        if k == len(values) or values[k] - values[start] > 1e-9 * scale:
            Q = vectors[:, start:k]
            projector = root[:, None] * (Q @ Q.T) / root[None, :]
            groups.append((float(values[start:k].mean()), projector))
            start = k
    return groups


def _leading(projector: np.ndarray, sizes: Sizes) -> tuple[np.ndarray, np.ndarray]:
    r"""Per variable $e$, the order and prefactor of $(P\varepsilon)_e$ at leading order.

    Terms of equal order add up; where they cancel exactly (a symmetric start), the next
    order leads. ``inf`` order: the component is zero.
    """
    n = projector.shape[0]
    order = np.full(n, np.inf)
    coef = np.zeros(n)
    finite = np.isfinite(sizes.order) & (sizes.scale != 0)
    for q in np.unique(sizes.order[finite]):
        mask = finite & (np.abs(sizes.order - q) <= 1e-12)
        value = projector[:, mask] @ sizes.scale[mask]
        magnitude = np.abs(projector[:, mask]) @ np.abs(sizes.scale[mask])
        new = np.isinf(order) & (np.abs(value) > CANCEL * magnitude) & (magnitude > 0)
        order[new] = q
        coef[new] = value[new]
    return order, coef


def _linear_escape(part: Polynomial, weights: np.ndarray, sizes: Sizes) -> Escape | None:
    H = part.hessian_of_quadratic()
    if not np.any(H):
        return None
    groups = _eigen_groups(H, weights)
    top = max(abs(lam) for lam, _ in groups)
    leading = [(lam, *_leading(P, sizes)) for lam, P in groups]
    candidates = [
        float(np.min(order[np.isfinite(order)] / lam))
        for lam, order, _ in leading
        if lam > 1e-9 * top and np.isfinite(order).any()
    ]
    if not candidates:
        return None
    tau = min(candidates)
    n = len(weights)
    new_order = np.full(n, np.inf)
    new_scale = np.zeros(n)
    for lam, order, coef in leading:
        shifted = order - lam * tau
        lower = shifted < new_order - 1e-9
        with np.errstate(invalid="ignore"):  # inf - inf: neither lower nor tied
            tie = np.isfinite(shifted) & (np.abs(shifted - new_order) <= 1e-9)
        new_scale = np.where(lower, coef, np.where(tie, new_scale + coef, new_scale))
        new_order = np.where(lower, shifted, new_order)
    escaping = np.flatnonzero(np.isfinite(new_order) & (new_order <= 1e-9))
    new_order[escaping] = 0.0
    direction = np.zeros(n)
    direction[escaping] = new_scale[escaping]
    rate = min(lam for lam, order, _ in leading if lam > 1e-9 * top and _hits(order, lam, tau))
    return Escape(
        mechanism=EXPONENTIAL,
        degree=2,
        coefficient=tau,
        power=0.0,
        rate=rate,
        escaping=tuple(int(i) for i in escaping),
        direction=direction,
        after=Sizes(new_order, new_scale),
    )


def _hits(order: np.ndarray, lam: float, tau: float) -> bool:
    """Whether a component of eigenvalue ``lam`` reaches order 0 at ``tau``."""
    finite = np.isfinite(order)
    return bool(finite.any() and np.min(order[finite] / lam) <= tau * (1 + 1e-9))


# --------------------------------------------------------------------------- degree >= 3


def _power_escape(
    part: Polynomial, degree: int, weights: np.ndarray, sizes: Sizes
) -> Escape | None:
    support = part.support()
    seeded = support & np.isfinite(sizes.order) & (sizes.scale != 0)
    if not seeded.any():
        return None
    q = float(sizes.order[seeded].min())
    eta0 = np.where(seeded & (np.abs(sizes.order - q) <= 1e-12), sizes.scale, 0.0)
    blowup = _blow_up(part, degree, weights, eta0)
    if blowup is None:
        return None
    s_star, (r1, eta1), (r2, eta2) = blowup
    n = len(weights)
    new_order = sizes.order.copy()
    new_scale = sizes.scale.copy()
    escaping = []
    for e in range(n):
        if eta2[e] == 0:
            continue  # not driven: keeps its size
        kappa = (np.log(abs(eta2[e])) - np.log(abs(eta1[e]) or 1e-300)) / (np.log(r2 / r1))
        if kappa >= 1 - SLOPE_TOL:
            escaping.append(e)
            new_order[e], new_scale[e] = 0.0, eta2[e] / r2
        elif abs(kappa) <= SLOPE_TOL:
            new_order[e], new_scale[e] = q, eta2[e]
        else:
            new_order[e], new_scale[e] = q * (1 - kappa), eta2[e] / r2**kappa
    direction = np.zeros(n)
    direction[escaping] = eta2[escaping] / r2
    return Escape(
        mechanism=POWER,
        degree=degree,
        coefficient=s_star,
        power=q * (degree - 2),
        rate=0.0,
        escaping=tuple(escaping),
        direction=direction,
        after=Sizes(new_order, new_scale),
    )


def _blow_up(
    part: Polynomial, degree: int, weights: np.ndarray, eta0: np.ndarray
) -> tuple[float, tuple[float, np.ndarray], tuple[float, np.ndarray]] | None:
    r"""Follow $\dot\eta = W\nabla\Phi_m(\eta)$ to its blow-up time $s^*$.

    The time is reparametrised, $ds/d\sigma = 1/(1+\lVert\eta\rVert^{m-2})$, so the
    solver's steps stay finite as $\eta$ diverges. Returns $s^*$ and the states when
    $\lVert\eta\rVert_\infty$ passes the two :data:`RADII`, or ``None`` if it does not
    blow up within :data:`MAX_SCALED_TIME`.
    """
    n = len(eta0)
    power = degree - 2

    def rhs(_sigma: float, y: np.ndarray) -> np.ndarray:
        eta = y[:n]
        slow = 1.0 / (1.0 + np.max(np.abs(eta)) ** power)
        out = np.empty(n + 1)
        out[:n] = weights * part.gradient(eta) * slow
        out[n] = slow
        return out

    def reach(radius: float) -> Callable[[float, np.ndarray], float]:
        def event(_sigma: float, y: np.ndarray) -> float:
            return float(np.log(np.max(np.abs(y[:n])) + 1e-300) - np.log(radius))

        return event

    first, second = reach(RADII[0]), reach(RADII[1])
    second.terminal = True  # type: ignore[attr-defined]
    scale = max(float(np.max(np.abs(eta0))), 1e-300)
    y0 = np.concatenate([eta0 / scale, [0.0]])
    # eta is rescaled to max 1: the unscaled problem runs scale**power times faster
    result = solve_ivp(
        rhs,
        (0.0, MAX_SCALED_TIME),
        y0,
        method="LSODA",
        rtol=1e-10,
        atol=1e-14,
        events=(first, second),
    )
    if not result.t_events[1].size or not result.t_events[0].size:
        return None
    y1 = result.y_events[0][0]
    y2 = result.y_events[1][0]
    s_star = float(y2[n]) / scale**power
    return s_star, (RADII[0] * scale, y1[:n] * scale), (RADII[1] * scale, y2[:n] * scale)
