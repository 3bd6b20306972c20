"""Settling on a plateau: gradient flow restricted to the active variables, run to rest.

After an escape the active pathways move to the constrained optimum: the fixed point that
gradient flow reaches with every small variable held at zero (a subspace the flow keeps,
Eq. 10 of Saxe et al. 2022). It is found by integrating that flow until its speed has
fallen far below the largest speed it reached.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.integrate import solve_ivp

from .._errors import GdlnError

__all__ = ["settle"]

REST = 1e-10  # at rest: speed below this fraction of the largest speed on the way
MAX_CHUNKS = 60


def settle(flow: Callable[[np.ndarray], np.ndarray], start: np.ndarray, *, what: str) -> np.ndarray:
    r"""Integrate $\dot x = f(x)$ from ``start`` until it is at rest; return where.

    Parameters
    ----------
    flow
        $f$ on the state vector.
    start
        The initial state.
    what
        What is settling, for the error message.

    Raises
    ------
    GdlnError
        If the flow does not come to rest within $2^{60}$ time units.
    """
    x = np.asarray(start, float).copy()
    peak = float(np.linalg.norm(flow(x)))
    if peak == 0.0:
        return x
    chunk = 1.0
    for _ in range(MAX_CHUNKS):
        result = solve_ivp(
            lambda _t, y: flow(y), (0.0, chunk), x, method="LSODA", rtol=1e-11, atol=1e-14
        )
        if not result.success:
            raise GdlnError(f"{what}: the restricted flow failed: {result.message}")
        picks = np.unique(np.linspace(0, result.y.shape[1] - 1, 25).round().astype(int))
        speeds = [float(np.linalg.norm(flow(result.y[:, i]))) for i in picks]
        peak = max(peak, *speeds)
        x = result.y[:, -1]
        if speeds[-1] <= REST * peak:
            return x
        chunk *= 2.0
    raise GdlnError(f"{what}: the restricted flow did not come to rest")
