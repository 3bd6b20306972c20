r"""Stepping the reduced ODE $\tau\dot y = f(y)$ (Eq. 10 of Saxe et al. 2022, lumped).

One integrator for :func:`gdln.solve` and :func:`gdln.solution.solve_batch`: LSODA driven
from Fortran (``scipy.integrate.odeint``), which switches between Adams and BDF steps as
the dynamics turn stiff. The right-hand side is the compiled scalar function of
:class:`~gdln.solution._solve._Numeric` (or numpy, vectorised across modes and systems);
where BDF needs a Jacobian, it is the analytic one (compiled on first use) or, for a
batch, a banded finite-difference one, so that its cost grows linearly with the batch.

The right-hand side is wrapped in checks that stop the solver with :class:`Stop` when a
value overflows or turns non-finite, when the solver calls it ``patience`` times without
advancing in t, or more than :data:`MAX_RHS_CALLS` times.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.integrate import odeint, solve_ivp

__all__ = [
    "MAX_RHS_CALLS",
    "STALL_CALLS",
    "OdeProblem",
    "SolverFailed",
    "Stop",
    "integrate",
    "integrate_ivp",
]

MAX_RHS_CALLS = 2_000_000  # the ODE solver gives up after this many right-hand-side calls
STALL_CALLS = 10_000  # ... or after this many (plus 10 per variable) without advancing in t


class Stop(Exception):
    """Raised inside the right-hand side to stop the solver; carries where it stopped."""

    def __init__(self, reason: str, t: float, state: np.ndarray):
        super().__init__(reason)
        self.reason, self.t, self.state = reason, t, state


class SolverFailed(Stop):
    """LSODA itself gave up (``reason`` is its message)."""


@dataclass(frozen=True)
class OdeProblem:
    r"""$\tau\dot y = f(y)$ from ``y0``, as LSODA sees it.

    Attributes
    ----------
    y0
        The initial state.
    rhs
        $f$; it may return a list (the compiled scalar form) or an array.
    jacobian
        ``None`` (LSODA differentiates numerically) or $\partial f_i/\partial y_j$ as a
        dense array.
    band
        ``None`` (dense Jacobian), or the half-bandwidth of a Jacobian that is zero more
        than ``band`` places from the diagonal (independent blocks of a batch).
    """

    y0: np.ndarray
    rhs: Callable[[np.ndarray], Any]
    jacobian: Callable[[np.ndarray], np.ndarray] | None = None
    band: int | None = None


def integrate(problem: OdeProblem, times: np.ndarray, *, rtol: float, atol: float) -> np.ndarray:
    """LSODA through ``times`` (``times[0]`` is the start): states ``(T, state)``.

    Raises
    ------
    Stop
        From the right-hand side's checks (see the module docstring).
    SolverFailed
        If LSODA fails or returns values that are not finite.
    """
    fun, last = _checked(problem.rhs, len(problem.y0))
    options: dict[str, Any] = {}
    if problem.band is not None:
        options.update(ml=problem.band, mu=problem.band)
    elif problem.jacobian is not None:
        jacobian = problem.jacobian
        options["Dfun"] = lambda y, t: jacobian(y)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        states, info = odeint(
            fun,
            problem.y0,
            times,
            rtol=rtol,
            atol=atol,
            mxstep=MAX_RHS_CALLS,
            full_output=True,
            **options,
        )
    if info["message"] != "Integration successful." or not np.all(np.isfinite(states)):
        raise SolverFailed(str(info["message"]), last[0], last[1])
    return states


def integrate_ivp(
    problem: OdeProblem, times: np.ndarray, *, rtol: float, atol: float
) -> np.ndarray:
    """The same as :func:`integrate` by ``scipy.integrate.solve_ivp`` (LSODA stepped from
    Python, several times slower): where the Fortran driver refuses a start (e.g. values
    near overflow), this one steps on until the checks name the cause."""
    fun, last = _checked(problem.rhs, len(problem.y0))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        result = solve_ivp(
            lambda t, y: fun(y, t),
            (times[0], times[-1]),
            problem.y0,
            method="LSODA",
            t_eval=times,
            rtol=rtol,
            atol=atol,
        )
    if result.status != 0 or not np.all(np.isfinite(result.y)):
        raise SolverFailed(str(result.message), last[0], last[1])
    states = result.y.T
    states[0] = problem.y0  # t_eval[0] comes from the first step's interpolant otherwise
    return states


def _checked(
    rhs: Callable[[np.ndarray], Any], size: int
) -> tuple[Callable[[np.ndarray, float], Any], list[Any]]:
    """``rhs`` as ``f(y, t)`` that raises :class:`Stop` (see the module docstring).

    The list it returns holds the last time and state asked about.
    """
    last: list[Any] = [0.0, None]
    patience = STALL_CALLS + 10 * size  # allows a few finite-difference Jacobians
    counter = [0, patience, -1.0]  # calls, next checkpoint, t at the last checkpoint

    def fun(y: np.ndarray, t: float) -> Any:
        last[0], last[1] = t, y
        counter[0] += 1
        if counter[0] >= counter[1]:
            if t <= counter[2]:
                raise Stop(f"solver made no progress in {patience} right-hand-side calls", t, y)
            if counter[0] > MAX_RHS_CALLS:
                raise Stop(f"solver gave up after {MAX_RHS_CALLS} right-hand-side calls", t, y)
            counter[1], counter[2] = counter[0] + patience, t
        try:
            value = rhs(y)
        except OverflowError as err:
            raise Stop("overflowed", t, y) from err
        except ZeroDivisionError as err:
            raise Stop("divided by zero", t, y) from err
        total = sum(value) if isinstance(value, list) else float(value.sum())
        if total - total != 0:  # inf or nan: float products overflow to inf silently
            raise Stop("overflowed", t, y)
        return value

    return fun, last
