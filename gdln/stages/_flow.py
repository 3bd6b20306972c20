"""Settling on a plateau: gradient flow restricted to the active variables, run to rest.

After an escape the active pathways move to the constrained optimum: the fixed point that
gradient flow reaches with every small variable held at zero (a subspace the flow keeps,
Eq. 10 of Saxe et al. 2022). It is found by integrating that flow until its speed has
fallen far below the largest speed it reached, or has reached the floor that round-off
in the flow sets and stays there.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.integrate import solve_ivp

from .._errors import GdlnError

__all__ = ["Unsettled", "settle"]

REST = 1e-10  # at rest: speed below this fraction of the largest speed on the way
FLOOR = 1e-8  # ... or below this fraction and no longer falling (the round-off floor)
MAX_CHUNKS = 60
NEAR = 1e-3  # below this fraction of the peak speed, try a Newton step to the rest point
FLAT = 1e-8  # curvatures below this fraction of the largest are flat (symmetries)
NEWTON_LIMIT = 400  # Newton steps (a finite-difference Jacobian) up to this many numbers


def settle(
    flow: Callable[[np.ndarray], np.ndarray],
    start: np.ndarray,
    *,
    what: str,
    method: str = "LSODA",
    budget: int | None = None,
) -> np.ndarray:
    r"""Integrate $\dot x = f(x)$ from ``start`` until it is at rest; return where.

    Near the rest point, where the speed has fallen below :data:`NEAR` of its peak,
    a Newton step finishes the approach: the limit of the flow linearised at $x$,
    $x - \sum_{\lambda_k<0} v_k v_k^\top f(x)/\lambda_k$ over the eigenpairs of the
    (symmetrised, finite-difference) Jacobian, flat directions left alone. It is taken
    only where no direction grows and it lowers the speed tenfold. A gradient flow
    whose slowest modes decay at $10^{-3}$ of its fastest needs $10^3$ times more
    steps without it.

    Parameters
    ----------
    flow
        $f$ on the state vector.
    start
        The initial state.
    what
        What is settling, for the error message.
    method
        The stepper of :func:`scipy.integrate.solve_ivp`: ``"LSODA"`` for a few
        variables; ``"DOP853"`` for many (full matrices).
    budget
        The most evaluations of ``flow`` to spend (default: no limit).

    Raises
    ------
    Unsettled
        If the flow does not come to rest within $2^{60}$ time units or ``budget``
        evaluations; it carries where it stopped and how fast it still moved.
    """
    count = [0]

    def counted(y: np.ndarray) -> np.ndarray:
        count[0] += 1
        if budget is not None and count[0] > budget:
            raise _OverBudget
        return flow(y)

    x = np.asarray(start, float).copy()
    peak = float(np.linalg.norm(flow(x)))
    if peak == 0.0:
        return x
    chunk = 1.0
    ends: list[float] = []  # the speed at the end of each chunk
    try:
        for _ in range(MAX_CHUNKS):
            result = solve_ivp(
                lambda _t, y: counted(y), (0.0, chunk), x, method=method, rtol=1e-11, atol=1e-14
            )
            if not result.success:
                raise GdlnError(f"{what}: the restricted flow failed: {result.message}")
            picks = np.unique(np.linspace(0, result.y.shape[1] - 1, 25).round().astype(int))
            speeds = [float(np.linalg.norm(counted(result.y[:, i]))) for i in picks]
            peak = max(peak, *speeds)
            x = result.y[:, -1]
            ends.append(speeds[-1])
            if speeds[-1] <= REST * peak:
                return x
            if len(ends) >= 3 and ends[-1] <= FLOOR * peak and ends[-1] > 0.5 * min(ends[-3:-1]):
                return x  # two doublings of the time without halving the speed: round-off
            while speeds[-1] <= NEAR * peak and len(x) <= NEWTON_LIMIT:
                step = _newton(counted, x, speeds[-1])
                if step is None:
                    break
                x, speed = step
                if speed <= REST * peak:
                    return x
                speeds.append(speed)
            chunk *= 2.0
    except _OverBudget:
        pass
    reason = (
        f"the restricted flow still moved at {float(np.linalg.norm(flow(x))) / peak:.2g} of "
        f"its peak speed after {count[0]} evaluations"
    )
    raise Unsettled(f"{what}: {reason}", state=x, reason=reason)


class Unsettled(GdlnError):
    """The flow of a plateau did not come to rest; ``state`` is where it stopped."""

    def __init__(self, message: str, *, state: np.ndarray, reason: str = ""):
        super().__init__(message)
        self.state = state
        self.reason = reason or message


class _OverBudget(Exception):
    """Raised inside the flow when its budget of evaluations is spent."""


def _newton(
    flow: Callable[[np.ndarray], np.ndarray], x: np.ndarray, speed: float
) -> tuple[np.ndarray, float] | None:
    """One Newton step to the rest point (see :func:`settle`), or ``None`` if refused."""
    here = flow(x)
    n = len(x)
    J = np.empty((n, n))
    for i in range(n):
        h = 1e-6 * max(1.0, abs(float(x[i])))
        e = np.zeros(n)
        e[i] = h
        J[:, i] = (flow(x + e) - flow(x - e)) / (2 * h)
    values, vectors = np.linalg.eigh(0.5 * (J + J.T))
    flat = FLAT * float(np.abs(values).max(initial=0.0))
    if values.max(initial=0.0) > flat:
        return None  # a direction still grows: not yet near the rest point
    falling = values < -flat
    coefficients = (vectors[:, falling].T @ here) / values[falling]
    candidate = x - vectors[:, falling] @ coefficients
    after = float(np.linalg.norm(flow(candidate)))
    if after > 0.1 * speed:
        return None
    return candidate, after
