r"""How small variables leave a saddle, at leading order as the initial scale $u_0\to 0$.

At a plateau the active variables sit at a fixed point $b^*$ and the others are small. The
small ones follow gradient flow on $\Phi(\varepsilon)=-\mathcal{L}(b^*,\varepsilon)$ with
the tying weights $w$ ($\tau\dot\varepsilon_i = w_i\,\partial\Phi/\partial\varepsilon_i$,
Eq. 10 of Saxe et al. 2022 with the $1/|O|$ of tying, Eqs. 44-46). Its lowest homogeneous
part decides what escapes first and when:

* **degree 2** (two small edges on a path): $\dot\varepsilon = WH\varepsilon$ is linear,
  each eigen-direction grows as $e^{\lambda t}$, so a component of size $u_0^{q}$ escapes
  after $t = q\ln(1/u_0)/\lambda$. The small variables are kept as a sum of components
  $\varepsilon = \sum_j u_0^{q_j} g_j$; after a stage of length $\tau\ln(1/u_0)$ the part
  of $g_j$ of eigenvalue $\lambda_k$ has order $q_j - \lambda_k\tau$ (a max-plus
  recursion). With one pathway this is the logistic escape of Eq. (21); with several it
  is the budget of Zhang, Latham & Saxe (2024): the weaker pathway spends $\lambda t$ of
  its $\ln(1/u_0)$ while the stronger one escapes (or, where its residual changed sign,
  regains what it lost).
* **degree $m\ge3$** (deeper pathways): with $\varepsilon = u_0^{q}\eta$ and
  $t = u_0^{-q(m-2)}s$, $\eta$ obeys the degree-$m$ flow, which blows up at a finite
  $s^*$; the escape time is $s^*u_0^{-q(m-2)}$ (for one balanced pathway of rate $r$,
  $s^* = 1/((m-2)r)$). Variables that grow with the escaping ones, but slower, leave with a
  smaller order: near the blow-up $\eta_e \propto \lVert\eta\rVert^{\kappa_e}$, so their
  order becomes $q(1-\kappa_e)$.

Two kinds of components are tracked. *Exact* ones are the actual start $u_0\eta$ and what
the flow makes of it; they reproduce the exact reduced ODE, including the exact
cancellations of a symmetric start (equal starting values keep a product's sign).
*Generic* ones stand for small random weights: every direction present at order 1, none
cancelling. An escape that only generic components reach is reported as not *realized*
by the exact start. Orders are in units of $\ln(1/u_0)$; times are returned as a
coefficient of $\ln(1/u_0)$ or of a power of $u_0$: the leading order, without $O(1)$
corrections.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp
from scipy.sparse.csgraph import connected_components

from ._polynomial import Polynomial

__all__ = [
    "EXPONENTIAL",
    "POWER",
    "Escape",
    "Sizes",
    "advance",
    "advance_by",
    "escape",
    "spectrum",
]

EXPONENTIAL = "exponential"
"""Escape through a degree-2 potential: time proportional to $\\ln(1/u_0)$."""
POWER = "power"
"""Escape through a degree $m\\ge3$ potential: time proportional to $u_0^{-q(m-2)}$."""

CANCEL = 1e-9  # a vector below this fraction of its terms' sizes cancels exactly
SAME = 1e-9  # orders closer than this are equal
RADII = (1e6, 1e12)  # the blow-up is followed from |eta| = 1 to these sizes
SLOPE_TOL = 1e-3  # growth exponents within this of 1 escape, within this of 0 do not grow
MAX_SCALED_TIME = 1e12

Component = tuple[float, np.ndarray]


@dataclass(frozen=True)
class Sizes:
    r"""The small variables as $\varepsilon \approx \sum_j u_0^{q_j} g_j$.

    Parameters
    ----------
    exact
        Components $(q_j, g_j)$ of the actual start and its evolution.
    generic
        Components $(q_j, G_j)$ of a generic start: the columns of $G_j$ span directions
        present at order $q_j$ (each with an independent coefficient).
    """

    exact: tuple[Component, ...]
    generic: tuple[Component, ...]

    @classmethod
    def start(cls, eta: np.ndarray) -> Sizes:
        """$u_0\\eta$, with every direction also present generically at order 1."""
        eta = np.asarray(eta, float)
        return cls(((1.0, eta),), ((1.0, np.eye(len(eta))),))

    def take(self, keep: Sequence[int] | np.ndarray) -> Sizes:
        """The sizes of the variables ``keep`` (indices) only."""
        keep = np.asarray(keep, dtype=int)
        exact = tuple((q, g[keep]) for q, g in self.exact if np.any(g[keep]))
        generic = tuple((q, _span(G[keep])) for q, G in self.generic)
        return Sizes(exact, tuple((q, G) for q, G in generic if G.shape[1]))

    def orders(self) -> np.ndarray:
        """Each variable's order: its largest component ($\\infty$ if none)."""
        n = _size(self)
        out = np.full(n, np.inf)
        for q, g in self.exact:
            out[g != 0] = np.minimum(out[g != 0], q)
        for q, G in self.generic:
            rows = np.abs(G).max(axis=1) > CANCEL
            out[rows] = np.minimum(out[rows], q)
        return out


def _size(sizes: Sizes) -> int:
    for _, g in sizes.exact:
        return len(g)
    for _, G in sizes.generic:
        return G.shape[0]
    return 0


def _span(G: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """An orthonormal basis of the columns of ``G``: the directions above ``CANCEL * scale``.

    ``scale`` is the size of what ``G`` was computed from (orthonormal inputs: 1), so
    round-off of an exact cancellation is not mistaken for a direction.
    """
    if not G.size:
        return np.zeros((G.shape[0], 0))
    U, s, _ = np.linalg.svd(G, full_matrices=False)
    return U[:, s > CANCEL * scale]


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
    escaping
        Indices of the escaping variables.
    direction
        The escape direction over all the small variables (zero except on ``escaping``).
    after
        The small variables when the escape completes (those escaping at order 0).
    realized
        Whether the exact start reaches this escape (``False``: only a generic start
        does, the exact one being pinned by its symmetry).
    log_shift
        A power escape's term in $\ln(1/u_0)$ from the exponential stages before it
        (:func:`_elapsed`; 0 for an exponential escape): its time is
        ``coefficient * u0**(-power) + log_shift * ln(1/u0)``.
    """

    mechanism: str
    degree: int
    coefficient: float
    power: float
    escaping: tuple[int, ...]
    direction: np.ndarray
    after: Sizes
    realized: bool = True
    log_shift: float = 0.0


def escape(
    potential: Polynomial,
    weights: np.ndarray,
    sizes: Sizes,
    history: Sequence[tuple[float, Polynomial]] = (),
) -> Escape | None:
    r"""The first escape of the small variables from a saddle, or ``None`` if none escapes.

    Parameters
    ----------
    potential
        $\Phi(\varepsilon)$ in the small variables (terms of degree 0 and 1 are ignored;
        the caller activates variables with a degree-1 force at once).
    weights
        The tying weights $w_i$ ($1/|O|$ for a variable standing for $|O|$ edges).
    sizes
        The small variables' components.
    history
        The exponential stages since the small variables' sizes were set, each as its
        duration (a coefficient of $\ln(1/u_0)$) and the potential of its plateau in
        these variables. A power-law escape has run its own flow during them: its time
        gains the log term of :func:`_elapsed`.

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
            found = _power_escape(part, degree, weights, sizes, history)
        if found is not None:
            return found
    return None


def advance(
    potential: Polynomial, weights: np.ndarray, sizes: Sizes, duration: float | None
) -> Sizes:
    r"""The small variables after a plateau of ``duration`` (a coefficient of $\ln(1/u_0)$).

    The degree-2 part of $\Phi$ decides at leading order: the part of a component of
    order $q$ with eigenvalue $\lambda$ of $W\nabla^2\Phi$ leaves with order
    $q - \lambda\Delta$ (the max-plus recursion of :func:`escape`, stopped before any
    escape). ``duration=None`` stands for a power-law plateau, longer than any multiple of
    $\ln(1/u_0)$: shrinking parts vanish, the others keep their orders.
    """
    H = potential.part(2).hessian_of_quadratic() if len(potential.coefficients) else None
    if H is None or not np.any(H):
        return sizes
    return advance_by(spectrum(H, np.asarray(weights, float)), sizes, duration)


def spectrum(H: np.ndarray, weights: np.ndarray) -> list[tuple[float, np.ndarray]]:
    """The eigenvalues of $WH$, grouped when equal, with their projectors (see :func:`advance`)."""
    return _eigen_groups(H, weights)


def advance_by(
    groups: list[tuple[float, np.ndarray]], sizes: Sizes, duration: float | None
) -> Sizes:
    """:func:`advance` with the :func:`spectrum` of the plateau already found."""
    if not groups:
        return sizes
    top = max(abs(lam) for lam, _ in groups)
    exact: list[Component] = []
    generic: list[Component] = []
    for lam, P in groups:
        if duration is None:
            if lam < -1e-9 * top:
                continue
            shift = 0.0
        else:
            shift = lam * duration
        exact += [(q - shift, g) for q, g in _project_exact(P, sizes)]
        generic += [(q - shift, G) for q, G in _project_generic(P, sizes)]
    return _merge(exact, generic)


# --------------------------------------------------------------------------- degree 2


def _eigen_groups(H: np.ndarray, weights: np.ndarray) -> list[tuple[float, np.ndarray]]:
    r"""Eigenvalues of $WH$ (grouped when equal) and their projectors $P_k$.

    Each set of variables that $H$ couples (a connected component) is decomposed on its
    own, so that a projector is exactly zero on the variables its eigenvalue does not
    reach: a pathway that does not interact with another never borrows its escape by
    round-off.
    """
    root = np.sqrt(weights)
    A = root[:, None] * H * root[None, :]
    n = len(weights)
    _, labels = connected_components(A != 0, directed=False)
    values_list: list[float] = []
    vectors_list: list[np.ndarray] = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        w, v = np.linalg.eigh(A[np.ix_(members, members)])
        for k in range(len(members)):
            full = np.zeros(n)
            full[members] = v[:, k]
            values_list.append(float(w[k]))
            vectors_list.append(full)
    order = np.argsort(values_list, kind="stable")
    values = np.asarray(values_list)[order]
    vectors = np.asarray(vectors_list)[order].T
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


def _project_exact(P: np.ndarray, sizes: Sizes) -> list[Component]:
    """$P$ applied to the exact components, equal orders summed, cancellations dropped."""
    out: list[Component] = []
    for q in sorted({q for q, _ in sizes.exact}):
        parts = [g for r, g in sizes.exact if abs(r - q) <= SAME]
        value = _cancelled(
            np.asarray(sum(P @ g for g in parts)),
            np.asarray(sum(np.abs(P) @ np.abs(g) for g in parts)),
        )
        if np.any(value):
            out.append((q, value))
    return out


def _cancelled(value: np.ndarray, magnitude: np.ndarray) -> np.ndarray:
    """``value`` with the entries below :data:`CANCEL` of the largest term set to zero.

    ``magnitude`` is the size of the terms each entry sums: an entry far below the
    largest of them is an exact cancellation, or round-off on a variable the
    projection does not reach.
    """
    return np.where(np.abs(value) > CANCEL * float(np.max(magnitude, initial=0.0)), value, 0.0)


def _project_generic(P: np.ndarray, sizes: Sizes) -> list[Component]:
    """$P$ applied to the generic spans (orthonormal columns), directions that vanish dropped."""
    scale = float(np.abs(P).sum(axis=1).max(initial=0.0))
    return [(q, B) for q, G in sizes.generic if (B := _span(P @ G, scale)).shape[1]]


def _linear_escape(part: Polynomial, weights: np.ndarray, sizes: Sizes) -> Escape | None:
    H = part.hessian_of_quadratic()
    if not np.any(H):
        return None
    groups = _eigen_groups(H, weights)
    top = max(abs(lam) for lam, _ in groups)
    projected = [(lam, _project_exact(P, sizes), _project_generic(P, sizes)) for lam, P in groups]
    candidates = [
        min(q for q, _ in exact + generic) / lam
        for lam, exact, generic in projected
        if lam > 1e-9 * top and exact + generic
    ]
    if not candidates:
        return None
    tau = min(candidates)
    exact_after = [(q - lam * tau, g) for lam, exact, _ in projected for q, g in exact]
    generic_after = [(q - lam * tau, G) for lam, _, generic in projected for q, G in generic]
    after = _merge(exact_after, generic_after)
    orders = after.orders()
    escaping = np.flatnonzero(orders <= SAME)
    direction = np.zeros(len(weights))
    leading = [g for q, g in after.exact if q <= SAME]
    realized = bool(leading) and all(any(g[e] != 0 for g in leading) for e in escaping)
    if leading:
        direction = np.sum(leading, axis=0)
    else:
        G = np.hstack([G for q, G in after.generic if q <= SAME])
        direction = G @ np.ones(G.shape[1])
    direction = np.where(np.isin(np.arange(len(weights)), escaping), direction, 0.0)
    return Escape(
        mechanism=EXPONENTIAL,
        degree=2,
        coefficient=tau,
        power=0.0,
        escaping=tuple(int(i) for i in escaping),
        direction=direction,
        after=after,
        realized=realized,
    )


def _merge(exact: list[Component], generic: list[Component]) -> Sizes:
    """Components with equal orders summed (exact) or spanned together (generic)."""
    exact_out: list[Component] = []
    for q in sorted({round(q, 12) for q, _ in exact}):
        g = sum(v for r, v in exact if abs(r - q) <= SAME)
        if np.any(g):
            exact_out.append((max(q, 0.0), np.asarray(g, float)))
    generic_out: list[Component] = []
    for q in sorted({round(q, 12) for q, _ in generic}):
        G = _span(np.hstack([V for r, V in generic if abs(r - q) <= SAME]))
        if G.shape[1]:
            generic_out.append((max(q, 0.0), G))
    return Sizes(tuple(exact_out), tuple(generic_out))


# --------------------------------------------------------------------------- degree >= 3


def _power_escape(
    part: Polynomial,
    degree: int,
    weights: np.ndarray,
    sizes: Sizes,
    history: Sequence[tuple[float, Polynomial]] = (),
) -> Escape | None:
    support = part.support()
    orders = sizes.orders()
    seeded = support & np.isfinite(orders)
    if not seeded.any():
        return None
    q = float(orders[seeded].min())
    eta0 = sum((g for r, g in sizes.exact if abs(r - q) <= SAME), np.zeros(len(weights)))
    eta0 = np.where(support, eta0, 0.0)
    realized = bool(np.any(eta0))
    if not realized:  # only a generic start reaches it: a unit vector per variable there
        spans = [G for r, G in sizes.generic if abs(r - q) <= SAME]
        eta0 = np.where(support, np.abs(np.hstack(spans)).sum(axis=1), 0.0)
    blowup = _blow_up(part, degree, weights, eta0)
    if blowup is None:
        return None
    s_star, (r1, eta1), (r2, eta2) = blowup
    n = len(weights)
    escaping = [
        int(e)
        for e in np.flatnonzero(eta2 != 0)
        if np.log(abs(eta2[e]) / (abs(eta1[e]) or 1e-300)) / np.log(r2 / r1) >= 1 - SLOPE_TOL
    ]
    xi = np.zeros(n)
    xi[escaping] = eta2[escaping] / r2  # the self-similar shape of the blow-up
    small = np.flatnonzero(support & ~np.isin(np.arange(n), escaping))
    after = _after_blow_up(part, degree, weights, sizes, q, xi, escaping, small, (r2, eta2))
    return Escape(
        mechanism=POWER,
        degree=degree,
        coefficient=s_star,
        power=q * (degree - 2),
        escaping=tuple(escaping),
        direction=xi,
        after=after,
        realized=realized,
        log_shift=_elapsed(part, degree, weights, eta0, history),
    )


def _elapsed(
    part: Polynomial,
    degree: int,
    weights: np.ndarray,
    eta0: np.ndarray,
    history: Sequence[tuple[float, Polynomial]],
) -> float:
    r"""The coefficient of $\ln(1/u_0)$ that earlier exponential stages add to a blow-up.

    With $\varepsilon = u_0^q\eta$, a stage of duration $\Delta_k\ln(1/u_0)$ on a
    plateau of potential $\Phi_k$ moves $\eta$ by
    $\Delta_k\ln(1/u_0)\,u_0^{q(m-2)}\,W\nabla\Phi_{k,m}(\eta)$ (its degree-$m$ part),
    so the blow-up time $u_0^{-q(m-2)}s^*(\eta)$ of the present plateau changes by
    $\sum_k\Delta_k\ln(1/u_0)\,\nabla s^*(\eta)\cdot W\nabla\Phi_{k,m}(\eta)$ (to
    first order; central differences of $s^*$). A stage whose plateau is the present
    one gives $-\Delta_k$ (the flow is the one that blows up), cancelling its duration;
    for a balanced depth-3 pathway whose rate went from $r_0$ to $r_1$ the escape comes
    at $1/(r_1u_0) + \Delta(1 - r_0/r_1)\ln(1/u_0)$: the time $\int r\,dt = 1/u_0$
    (Saxe, Sodhani & Lewallen 2022, Eq. 10; Saxe et al. 2014 for one pathway).
    """
    total = 0.0
    for duration, potential in history:
        drift = weights * potential.part(degree).gradient(eta0)
        if not duration or not np.any(drift):
            continue
        size = float(np.max(np.abs(eta0))) / max(float(np.max(np.abs(drift))), 1e-300)
        h = 1e-4 * size
        ahead = _blow_up(part, degree, weights, eta0 + h * drift)
        behind = _blow_up(part, degree, weights, eta0 - h * drift)
        if ahead is None or behind is None:
            continue
        total += duration * (ahead[0] - behind[0]) / (2 * h)
    return total


def _after_blow_up(
    part: Polynomial,
    degree: int,
    weights: np.ndarray,
    sizes: Sizes,
    q: float,
    xi: np.ndarray,
    escaping: list[int],
    small: np.ndarray,
    end: tuple[float, np.ndarray],
) -> Sizes:
    r"""The small variables when the blow-up completes.

    Near the blow-up the escaping variables are $R\xi$ with
    $R^{m-2} = 1/((m-2)\lambda(s^*-s))$, $W\nabla\Phi_m(\xi) = \lambda\xi$, and the small
    ones obey $\dot\eta_I = K\eta_I/(s^*-s)$ with
    $K = W_I\,\partial_I^2\Phi_m(\xi)/((m-2)\lambda)$: the part of eigenvalue $\mu_k$
    grows like $R^{\kappa_k}$, $\kappa_k = (m-2)\mu_k$, up to $R = u_0^{-q}$, so a component
    of order $r$ leaves with order $r - q\kappa_k$. The exact part starts from the
    integrated state at the last radius; variables outside the potential keep theirs.
    """
    n = len(weights)
    radius, eta = end
    outside = ~np.isin(np.arange(n), [*escaping, *small.tolist()])
    exact: list[Component] = [(r, np.where(outside, g, 0.0)) for r, g in sizes.exact]
    generic: list[Component] = [(r, G * outside[:, None]) for r, G in sizes.generic]
    exact.append((0.0, xi))
    if not small.size:
        return _merge(exact, generic)
    rate = float(np.median((weights * part.gradient(xi))[escaping] / xi[escaping]))
    fixed = [i for i in range(n) if i not in set(small.tolist())]
    local = part.restrict(fixed, xi[fixed])  # a polynomial in the small variables only
    H = local.hessian_of_quadratic() / ((degree - 2) * rate)
    for mu, P in _eigen_groups(H, weights[small]):
        kappa = (degree - 2) * mu
        for r, g in [(q, eta), *((r, g) for r, g in sizes.exact if r > q + SAME)]:
            value = P @ g[small]
            magnitude = np.abs(P) @ np.abs(g[small])
            value = _cancelled(value, magnitude)
            if np.any(value):
                full = np.zeros(n)
                full[small] = value / (radius**kappa if r == q else 1.0)
                exact.append((r - q * kappa, full))
        scale = float(np.abs(P).sum(axis=1).max(initial=0.0))
        for r, G in sizes.generic:
            B = _span(P @ G[small], scale)
            if B.shape[1]:
                full_B = np.zeros((n, B.shape[1]))
                full_B[small] = B
                generic.append((r - q * kappa, full_B))
    return _merge(exact, generic)


def _blow_up(
    part: Polynomial, degree: int, weights: np.ndarray, eta0: np.ndarray
) -> tuple[float, tuple[float, np.ndarray], tuple[float, np.ndarray]] | None:
    r"""Follow $\dot\eta = W\nabla\Phi_m(\eta)$ to its blow-up time $s^*$.

    The time is reparametrised, $ds/d\sigma = 1/(1+\lVert\eta\rVert^{m-2})$, so the
    solver's steps stay finite as $\eta$ diverges. Returns $s^*$ and the states when
    $\lVert\eta\rVert_\infty$ passes the two :data:`RADII` (times the start's size), or
    ``None`` if it does not blow up within :data:`MAX_SCALED_TIME`.
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
