r"""LSODA: Adams steps while the reduced dynamics are smooth, BDF steps when they turn stiff.

The stepper of :func:`gdln.solve` for one system, and the one that takes over a batch
that DOP853 cannot step (Petzold's LSODA, from ODEPACK, driven from Fortran by
``scipy.integrate.odeint``). For one system of at most
:data:`~gdln.reduction._numeric.SCALAR_STATE_MAX` entries the right-hand side is the
flow's scalar form (a list in, a list out: the solver calls it about a thousand times a
solve) and BDF's Jacobian the analytic one. Otherwise the batch is cut into runs of
:data:`CHUNK` members of similar size (a run takes the steps of its fastest-changing
member, and LSODA's work per step grows with the state), each run one state with every
block of coupled entries adjacent (the modes of Eq. 10 of Saxe et al. 2022 evolve
independently), so that BDF's finite-difference Jacobian is banded and its cost grows
linearly with the batch.

The right-hand side is wrapped in checks that stop the solver when a value overflows or
turns non-finite, when it is called :data:`STALL_CALLS` times (plus 10 per entry)
without advancing in t, or more than :data:`MAX_RHS_CALLS` times. Where the Fortran
driver refuses (e.g. values near overflow), the same LSODA is stepped again from Python
(``scipy.integrate.solve_ivp``) until the checks name the cause.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.integrate import odeint, solve_ivp

from .._bounded._limits import tick
from ..reduction._numeric import NumericFlow
from ._stepper import Stepper, Stopped, worst_member

__all__ = ["CHUNK", "LOCAL", "MAX_RHS_CALLS", "STALL_CALLS", "Lsoda"]

MAX_RHS_CALLS = 2_000_000  # the ODE solver gives up after this many right-hand-side calls
STALL_CALLS = 10_000  # ... or after this many (plus 10 per entry) without advancing in t
CHUNK = 128
"""Members of a batch per LSODA run."""
TICK_EVERY = 32  # the work meter is charged every 32nd call (a clock read costs what a call does)
LOCAL = 1e-3
"""One system is stepped at ``LOCAL`` times the tolerances asked for: LSODA controls the
error of each step, and its solution drifts about 100 times ``rtol`` from a tight one
(1.2e-8 of L(0) at Fig. 4e at ``rtol=1e-10``; 1.1e-11 at ``LOCAL=1e-3``, for 1.6 times
the right-hand-side calls), so that one solve is within ``rtol`` as DOP853's is; never
below 1e-13, where LSODA refuses the tolerance."""


class _Stop(Exception):
    """Raised inside the right-hand side to stop the solver; carries where it stopped."""

    def __init__(
        self,
        reason: str,
        t: float,
        state: np.ndarray,
        outcome: str = "stepper_failed",
    ):
        super().__init__(reason)
        self.reason, self.t, self.state, self.outcome = reason, t, state, outcome


class _SolverFailed(_Stop):
    """LSODA itself gave up (``reason`` is its message)."""


@dataclass(frozen=True)
class _Problem:
    r"""$\tau\dot z = f(z)$ from ``z0``, as LSODA sees it.

    ``jacobian`` is ``None`` (LSODA differentiates by finite differences, banded when
    ``band`` is given: zero more than ``band`` places from the diagonal) or dense.
    """

    z0: np.ndarray
    rhs: Callable[[np.ndarray], Any]
    jacobian: Callable[[np.ndarray], np.ndarray] | None = None
    band: int | None = None


class Lsoda(Stepper):
    """LSODA (see the module docstring): implicit where the dynamics are stiff.

    The fastest stepper for one system; its error control is local (about 100 times
    ``rtol`` from a tight solution on the shipped graphs), so one system is stepped at
    :data:`LOCAL` times the tolerances; the runs of a batch at the tolerances given.
    """

    name = "lsoda"

    def integrate(
        self,
        flow: NumericFlow,
        y0: np.ndarray,
        constants: np.ndarray,
        times: np.ndarray,
        *,
        rtol: float,
        atol: float,
    ) -> tuple[np.ndarray, str]:
        n, b = y0.shape
        out = np.empty((len(times), n, b))
        if b == 1 and flow.scalar is not None:
            c = constants[:, 0]
            problem = _scalar_problem(flow, y0[:, 0], c)
            try:
                tight = {"rtol": max(rtol * LOCAL, min(rtol, 1e-13)), "atol": atol * LOCAL}
                out[:, :, 0] = _solve(problem, times, **tight)
            except _Stop as stop:
                raise Stopped(
                    _reason(stop), stop.t, np.asarray(stop.state, dtype=float), 0, stop.outcome
                ) from None
            return out, self.name
        order = np.argsort(flow.blocks, kind="stable")  # each block's entries adjacent
        sizes = np.unique(flow.blocks, return_counts=True)[1]
        band = int(sizes.max()) - 1 if len(sizes) else 0
        by_size = np.argsort(np.abs(y0).max(axis=0), kind="stable")  # similar members
        for chunk in np.array_split(by_size, -(-b // CHUNK)):
            problem = _batch_problem(flow, y0[:, chunk], constants[:, chunk], order, band)
            try:
                z = _solve(problem, times, rtol=rtol, atol=atol)
            except _Stop as stop:
                states = _unpack(np.asarray(stop.state, dtype=float)[None], order, len(chunk))[0]
                m = worst_member(states)
                raise Stopped(
                    _reason(stop), stop.t, states[:, m], int(chunk[m]), stop.outcome
                ) from None
            out[:, :, chunk] = _unpack(z, order, len(chunk))
        return out, self.name


def _reason(stop: _Stop) -> str:
    return f"solver failed ({stop.reason})" if isinstance(stop, _SolverFailed) else stop.reason


def _scalar_problem(flow: NumericFlow, y0: np.ndarray, c: np.ndarray) -> _Problem:
    """One member through the flow's scalar form, with its analytic Jacobian."""
    scalar, values, size = flow.scalar, c.tolist(), len(y0)
    assert scalar is not None

    def rhs(y: np.ndarray) -> list[float]:
        out = [0.0] * size
        scalar(y.tolist(), values, out)
        return out

    jacobian = None
    if flow.scalar_jacobian is not None:
        dense = flow.scalar_jacobian
        jacobian = lambda y: dense(y, c)  # noqa: E731
    return _Problem(y0, rhs, jacobian)


def _batch_problem(
    flow: NumericFlow, y0: np.ndarray, c: np.ndarray, order: np.ndarray, band: int
) -> _Problem:
    """Members ``y0`` ``(n, m)`` as one state: member after member, entries by ``order``."""
    n, m = y0.shape

    def rhs(z: np.ndarray) -> np.ndarray:
        y = np.empty((n, m))
        y[order] = z.reshape(m, n).T
        return np.asarray(flow.batch_rhs(y, c))[order].T.ravel()

    return _Problem(y0[order].T.ravel(), rhs, band=band)


def _unpack(z: np.ndarray, order: np.ndarray, m: int) -> np.ndarray:
    """States ``(T, n, m)`` from LSODA's ``(T, m * n)`` of :func:`_batch_problem`."""
    T, n = z.shape[0], len(order)
    out = np.empty((T, n, m))
    out[:, order] = z.reshape(T, m, n).transpose(0, 2, 1)
    return out


def _solve(problem: _Problem, times: np.ndarray, *, rtol: float, atol: float) -> np.ndarray:
    """LSODA through ``times``: states ``(T, size)``; the Fortran driver first, then, if it
    refuses, the same method stepped from Python to name the cause."""
    try:
        return _odeint(problem, times, rtol=rtol, atol=atol)
    except _SolverFailed:
        return _solve_ivp(problem, times, rtol=rtol, atol=atol)


def _odeint(problem: _Problem, times: np.ndarray, *, rtol: float, atol: float) -> np.ndarray:
    fun, last = _checked(problem.rhs, problem.z0)
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
            problem.z0,
            times,
            rtol=rtol,
            atol=atol,
            mxstep=MAX_RHS_CALLS,
            full_output=True,
            **options,
        )
    if info["message"] != "Integration successful." or not np.all(np.isfinite(states)):
        raise _SolverFailed(str(info["message"]), last[0], last[1])
    return np.asarray(states)


def _solve_ivp(problem: _Problem, times: np.ndarray, *, rtol: float, atol: float) -> np.ndarray:
    fun, last = _checked(problem.rhs, problem.z0)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        result = solve_ivp(
            lambda t, y: fun(y, t),
            (times[0], times[-1]),
            problem.z0,
            method="LSODA",
            t_eval=times,
            rtol=rtol,
            atol=atol,
        )
    if result.status != 0 or not np.all(np.isfinite(result.y)):
        raise _SolverFailed(str(result.message), last[0], last[1])
    states = result.y.T
    states[0] = problem.z0  # t_eval[0] comes from the first step's interpolant otherwise
    return np.asarray(states)


def _checked(
    rhs: Callable[[np.ndarray], Any], z0: np.ndarray
) -> tuple[Callable[[np.ndarray, float], Any], list[Any]]:
    """``rhs`` as ``f(y, t)`` that raises :class:`_Stop` (see the module docstring).

    The list it returns holds the last time and state asked about (at first, the start).
    """
    last: list[Any] = [0.0, z0]
    patience = STALL_CALLS + 10 * len(z0)  # allows a few finite-difference Jacobians
    counter: list[Any] = [0, patience, -1.0]  # calls, next checkpoint, t at the last one

    def fun(y: np.ndarray, t: float) -> Any:
        last[0], last[1] = t, y
        counter[0] += 1
        if counter[0] >= counter[1]:
            if t <= counter[2]:
                raise _Stop(f"solver made no progress in {patience} right-hand-side calls", t, y)
            if counter[0] > MAX_RHS_CALLS:
                raise _Stop(f"solver gave up after {MAX_RHS_CALLS} right-hand-side calls", t, y)
            counter[1], counter[2] = counter[0] + patience, t
        if not counter[0] % TICK_EVERY:
            tick(t)
        try:
            value = rhs(y)
        except OverflowError as err:
            raise _Stop("overflowed", t, y, "overflowed") from err
        except ZeroDivisionError as err:
            raise _Stop("divided by zero", t, y, "not_finite") from err
        total = sum(value) if isinstance(value, list) else float(value.sum())
        if total - total != 0:  # inf or nan: float products overflow to inf silently
            raise _Stop("overflowed", t, y, "overflowed")
        return value

    return fun, last
