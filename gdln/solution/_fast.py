r"""Optional compiled stepping of the reduced ODE with numba (the ``fast`` extra).

With numba installed, :func:`gdln.solve` and :func:`gdln.solution.solve_batch` step each
reduced system by DOP853 (the explicit Runge-Kutta pair of order 8(5,3) of Hairer and
Wanner, as in ``scipy.integrate.solve_ivp``, same coefficients and step control), compiled:
the right-hand side is generated from the system's equations (Eq. 10 of Saxe et al. 2022,
lumped) and compiled once per system, the stepper once per process (cached on disk).
Steps are shortened to land on every recorded time, so nothing is interpolated.

Whenever the compiled stepper does not finish (a value overflows or turns non-finite, the
step size underflows, too many steps), the caller solves with LSODA instead, whose checks
name the cause: errors are the same with or without numba. Without numba, or with the
environment variable ``GDLN_NO_NUMBA`` set, nothing here is used.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import sympy as sp
from sympy.printing.pycode import PythonCodePrinter

__all__ = ["available", "compiled_rhs", "solve_scales"]

MAX_STEPS = 200_000  # per system; beyond, the caller falls back to LSODA

# the compiled functions below, which call one another by these names (set by _stepper)
_step_jit: Any = None
_initial_jit: Any = None
_one_jit: Any = None


def available() -> bool:
    """Whether numba is installed and not switched off by ``GDLN_NO_NUMBA``."""
    return not os.environ.get("GDLN_NO_NUMBA") and importlib.util.find_spec("numba") is not None


def compiled_rhs(exprs: list[sp.Expr], state: list[sp.Symbol], constants: list[sp.Symbol]) -> Any:
    """``rhs(y, c, out)`` as a numba ``cfunc``: ``out[i] = exprs[i]`` at ``y``, ``c``."""
    import numba

    names = {s: sp.Symbol(f"y_{i}") for i, s in enumerate(state)}
    names |= {s: sp.Symbol(f"c_{i}") for i, s in enumerate(constants)}
    shared, reduced = sp.cse([e.xreplace(names) for e in exprs], symbols=sp.numbered_symbols("x_"))
    printer = PythonCodePrinter({"fully_qualified_modules": True})
    lines = ["def rhs(y, c, out):"]
    lines += [f"    y_{i} = y[{i}]" for i in range(len(state))]
    lines += [f"    c_{i} = c[{i}]" for i in range(len(constants))]
    lines += [f"    {s} = {printer.doprint(e)}" for s, e in shared]
    lines += [f"    out[{i}] = {printer.doprint(e)}" for i, e in enumerate(reduced)]
    namespace: dict[str, Any] = {"math": math}
    exec("\n".join(lines), namespace)  # the source generated above from sympy
    signature = numba.types.void(
        numba.types.float64[::1], numba.types.float64[::1], numba.types.float64[::1]
    )
    return numba.cfunc(signature, error_model="numpy")(namespace["rhs"])


def solve_scales(
    rhs: Any,
    y0: np.ndarray,
    consts: np.ndarray,
    scales: np.ndarray,
    times: np.ndarray,
    *,
    rtol: float,
    atol: float,
) -> np.ndarray | None:
    """States ``(scales, T, state)`` from ``scales[k] * y0`` with constants
    ``scales[k]**2 * consts``; ``None`` if any system did not finish."""
    stepper = _stepper()
    out = np.empty((len(scales), len(times), len(y0)))
    ok = stepper(rhs, y0, consts, scales, times, rtol, atol, out)
    return out if ok else None


@functools.cache
def _stepper() -> Callable[..., bool]:
    """The compiled DOP853 loop over scales (compiled on first use, cached on disk)."""
    import numba
    from scipy.integrate._ivp import dop853_coefficients as dop

    n_stages = dop.N_STAGES
    tableau = (
        np.ascontiguousarray(dop.A[:n_stages, :n_stages]),
        np.ascontiguousarray(dop.B),
        np.ascontiguousarray(dop.E3),
        np.ascontiguousarray(dop.E5),
    )
    jit = numba.njit(cache=True, error_model="numpy")
    global _step_jit, _initial_jit, _one_jit  # compiled once, on first use
    _step_jit, _initial_jit, _one_jit = jit(_step), jit(_initial_step), jit(_one)
    over: Any = jit(_over_scales)
    return lambda *args: bool(over(*args, *tableau))


def _over_scales(rhs, y0, consts, scales, times, rtol, atol, out, A, B, E3, E5):  # type: ignore[no-untyped-def]
    for k in range(len(scales)):
        y, c = y0 * scales[k], consts * scales[k] ** 2
        if not _one_jit(rhs, y, c, times, rtol, atol, out[k], A, B, E3, E5):
            return False
    return True


def _step(rhs, y, h, c, K, y_new, tmp, rtol, atol, A, B, E3, E5):  # type: ignore[no-untyped-def]
    """One DOP853 step from ``y`` (slope ``K[0]``) by ``h`` into ``y_new``, ``K[-1]``;
    returns the error norm of ``scipy.integrate.DOP853`` (NaN if anything is not finite)."""
    n, n_stages = len(y), len(B)
    for s in range(1, n_stages):
        for i in range(n):
            acc = 0.0
            for j in range(s):
                acc += A[s, j] * K[j, i]
            tmp[i] = y[i] + h * acc
        rhs(tmp, c, K[s])
    for i in range(n):
        acc = 0.0
        for j in range(n_stages):
            acc += B[j] * K[j, i]
        y_new[i] = y[i] + h * acc
    rhs(y_new, c, K[n_stages])
    err5, err3 = 0.0, 0.0
    for i in range(n):
        e5, e3 = 0.0, 0.0
        for j in range(n_stages + 1):
            e5 += E5[j] * K[j, i]
            e3 += E3[j] * K[j, i]
        scale = atol + max(abs(y[i]), abs(y_new[i])) * rtol
        err5 += (e5 / scale) ** 2
        err3 += (e3 / scale) ** 2
        if not (math.isfinite(y_new[i]) and math.isfinite(K[n_stages, i])):
            return math.nan
    if err5 == 0.0 and err3 == 0.0:
        return 0.0
    return abs(h) * err5 / math.sqrt((err5 + 0.01 * err3) * n)


def _one(rhs, y0, c, times, rtol, atol, out, A, B, E3, E5):  # type: ignore[no-untyped-def]
    """Integrate one system through ``times`` into ``out`` ``(T, state)``; False if it
    did not finish. Step control of ``scipy.integrate.solve_ivp``'s Runge-Kutta."""
    n, n_stages = len(y0), len(B)
    K = np.empty((n_stages + 1, n))
    y, y_new, tmp = y0.copy(), np.empty(n), np.empty(n)
    rhs(y, c, K[0])
    out[0] = y
    h = _initial_jit(rhs, y, K[0], c, times[-1] - times[0], rtol, atol, tmp)
    t, steps = times[0], 0
    for k in range(1, len(times)):
        while t < times[k]:
            steps += 1
            if steps > MAX_STEPS or h <= 1e-14 * max(1.0, abs(t)):
                return False
            h_try = min(h, times[k] - t)
            norm = _step_jit(rhs, y, h_try, c, K, y_new, tmp, rtol, atol, A, B, E3, E5)
            if not norm < 1.0:
                if math.isnan(norm):
                    return False
                h = h_try * max(0.2, 0.9 * norm ** (-1 / 8))
                continue
            factor = 10.0 if norm == 0.0 else min(10.0, 0.9 * norm ** (-1 / 8))
            t = times[k] if h_try == times[k] - t else t + h_try
            h = max(h, h_try * factor) if h_try < h else h_try * factor
            y[:] = y_new
            K[0] = K[n_stages]
        out[k] = y
    return True


def _initial_step(rhs, y, f, c, span, rtol, atol, tmp):  # type: ignore[no-untyped-def]
    """The first step of Hairer, Norsett and Wanner (II.4), as scipy selects it (order 8)."""
    n = len(y)
    d0, d1 = 0.0, 0.0
    for i in range(n):
        scale = atol + abs(y[i]) * rtol
        d0 += (y[i] / scale) ** 2
        d1 += (f[i] / scale) ** 2
    d0, d1 = math.sqrt(d0 / n), math.sqrt(d1 / n)
    h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
    h0 = min(h0, span)
    for i in range(n):
        tmp[i] = y[i] + h0 * f[i]
    f1 = np.empty(n)
    rhs(tmp, c, f1)
    d2 = 0.0
    for i in range(n):
        scale = atol + abs(y[i]) * rtol
        d2 += ((f1[i] - f[i]) / scale) ** 2
    d2 = math.sqrt(d2 / n) / h0
    flat = d1 <= 1e-15 and d2 <= 1e-15
    h1 = max(1e-6, h0 * 1e-3) if flat else (0.01 / max(d1, d2)) ** (1 / 8)
    return min(100 * h0, h1, span)
