r"""DOP853 in numpy over a batch of independent systems (no compiler needed).

:func:`gdln.solution.solve_batch` without numba steps every system of the batch at once:
one evaluation of the right-hand side (Eq. 10 of Saxe et al. 2022, lumped) on arrays of
shape ``(batch, modes)`` per variable serves all systems, so numpy's per-call overhead
is shared by the batch. Each system keeps its own time, step size and error control,
exactly as :mod:`gdln.solution._fast` steps it alone (scipy's DOP853 coefficients and step
control, steps shortened to land on every recorded time): a system's steps do not depend
on the others, and its accuracy is what it would be alone.

The stepper gives up (returns ``None``, and the caller solves with LSODA, whose checks
name the cause) where a value turns non-finite, a step size underflows or a system needs
more than ``max_steps`` steps, e.g. because it is stiff.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import sympy as sp
from sympy.printing.numpy import NumPyPrinter
from sympy.printing.precedence import PRECEDENCE

__all__ = ["dop853", "numpy_rhs"]

Rhs = Callable[[np.ndarray], np.ndarray]
"""``f(y)`` on states ``(n, batch)``, returning ``(n, batch)``: systems on the last axis,
so that each state variable is one contiguous row across the batch."""


class _Printer(NumPyPrinter):
    """numpy code with small integer powers as products (``x**3`` is a slow ``pow``)."""

    def _print_Pow(self, expr: sp.Pow, rational: bool = False) -> str:
        base, exponent = expr.args
        if exponent.is_Integer and 2 <= int(exponent) <= 8:
            factor = self.parenthesize(base, PRECEDENCE["Mul"])
            return "(" + "*".join([factor] * int(exponent)) + ")"
        return str(super()._print_Pow(expr, rational=rational))


def numpy_rhs(
    exprs: Sequence[sp.Expr], args: Sequence[Sequence[sp.Symbol]]
) -> Callable[..., list[Any]]:
    """``f(*arrays)`` returning ``exprs`` evaluated by numpy, shared subexpressions once.

    ``args`` are the argument lists as for :func:`sympy.lambdify`; a value may come back
    as a scalar where an expression does not depend on the arrays.
    """
    printer = _Printer({"fully_qualified_modules": False, "inline": True})
    return sp.lambdify([list(a) for a in args], list(exprs), "numpy", cse=True, printer=printer)


@functools.cache
def _tableau() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``A``, ``B``, ``E3``, ``E5`` of scipy's DOP853 (Hairer and Wanner's 8(5,3) pair)."""
    from scipy.integrate._ivp import dop853_coefficients as dop

    n = dop.N_STAGES
    return dop.A[:n, :n].copy(), dop.B.copy(), dop.E3.copy(), dop.E5.copy()


def dop853(
    rhs: Rhs,
    y0: np.ndarray,
    times: np.ndarray,
    *,
    rtol: float,
    atol: float,
    max_steps: int,
) -> np.ndarray | None:
    """Integrate the systems ``y0`` ``(n, batch)`` through ``times``: ``(T, n, batch)``.

    ``times[0]`` is the start. ``None`` where the stepper gave up (see the module
    docstring); the step control is that of :func:`gdln.solution._fast._one`, per system.
    """
    A, B, E3, E5 = _tableau()
    n, b, stages = y0.shape[0], y0.shape[1], len(B)
    out = np.empty((len(times), n, b))
    out[0] = y0
    K = np.empty((stages + 1, n, b))
    y = y0.copy()
    with np.errstate(all="ignore"):
        K[0] = rhs(y)
        h = _initial_step(rhs, y, K[0], times[-1] - times[0], rtol, atol)
        t = np.full(b, float(times[0]))
        k = np.ones(b, dtype=int)  # the next recorded time, per system
        steps = 0
        while (live := k < len(times)).any():
            steps += 1
            target = times[np.minimum(k, len(times) - 1)]
            if steps > max_steps or np.any(live & (h <= 1e-14 * np.maximum(1.0, np.abs(t)))):
                return None
            h_try = np.where(live, np.minimum(h, target - t), 0.0)
            y_new, norm = _step(rhs, y, h_try, K, rtol, atol, A, B, E3, E5)
            if np.isnan(norm[live]).any():
                return None
            accept = live & (norm < 1.0)
            power = norm ** (-1 / 8)
            h = np.where(live & ~accept, h_try * np.maximum(0.2, 0.9 * power), h)
            factor = np.where(norm == 0.0, 10.0, np.minimum(10.0, 0.9 * power))
            grown = np.where(h_try < h, np.maximum(h, h_try * factor), h_try * factor)
            landed = accept & (h_try == target - t)
            t = np.where(accept, np.where(landed, target, t + h_try), t)
            landed |= accept & (t >= target)
            h = np.where(accept, grown, h)
            np.copyto(y, y_new, where=accept)
            np.copyto(K[0], K[stages], where=accept)
            out[k[landed], :, landed] = y[:, landed].T
            k = k + landed
    return out


def _step(
    rhs: Rhs,
    y: np.ndarray,
    h: np.ndarray,
    K: np.ndarray,
    rtol: float,
    atol: float,
    A: np.ndarray,
    B: np.ndarray,
    E3: np.ndarray,
    E5: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """One DOP853 step of every system from ``y`` (slopes ``K[0]``) by ``h`` ``(batch,)``:
    the new states and each system's error norm (that of ``scipy.integrate.DOP853``; NaN
    where anything is not finite). Fills ``K[1:]``."""
    stages, flat = len(B), K.reshape(len(K), -1)  # stage combinations as matrix products
    for s in range(1, stages):
        K[s] = rhs(y + h * (A[s, :s] @ flat[:s]).reshape(y.shape))
    y_new = y + h * (B @ flat[:stages]).reshape(y.shape)
    K[stages] = rhs(y_new)
    scale = atol + np.maximum(np.abs(y), np.abs(y_new)) * rtol
    err5 = np.square((E5 @ flat).reshape(y.shape) / scale).sum(axis=0)
    err3 = np.square((E3 @ flat).reshape(y.shape) / scale).sum(axis=0)
    norm = np.abs(h) * err5 / np.sqrt((err5 + 0.01 * err3) * y.shape[0])
    norm = np.where((err5 == 0.0) & (err3 == 0.0), 0.0, norm)
    finite = np.isfinite(y_new).all(axis=0) & np.isfinite(K[stages]).all(axis=0)
    return y_new, np.where(finite, norm, np.nan)


def _initial_step(
    rhs: Rhs, y: np.ndarray, f: np.ndarray, span: float, rtol: float, atol: float
) -> np.ndarray:
    """The first step of each system, as :func:`gdln.solution._fast._initial_step` (Hairer,
    Norsett and Wanner II.4, order 8)."""
    n = y.shape[0]
    scale = atol + np.abs(y) * rtol
    d0 = np.sqrt(np.square(y / scale).sum(axis=0) / n)
    d1 = np.sqrt(np.square(f / scale).sum(axis=0) / n)
    h0 = np.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / np.where(d1 > 0, d1, 1.0))
    h0 = np.minimum(h0, span)
    f1 = rhs(y + h0 * f)
    d2 = np.sqrt(np.square((f1 - f) / scale).sum(axis=0) / n) / h0
    flat = (d1 <= 1e-15) & (d2 <= 1e-15)
    h1 = np.where(flat, np.maximum(1e-6, h0 * 1e-3), (0.01 / np.maximum(d1, d2)) ** (1 / 8))
    return np.minimum(np.minimum(100 * h0, h1), span)
