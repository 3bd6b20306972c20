r"""DOP853 over a batch axis: the explicit Runge-Kutta pair 8(5,3) of Dormand and Prince.

One step of every member of the batch at once: one evaluation of the right-hand side
(Eq. 10 of Saxe et al. 2022, lumped) on states ``(n, batch)`` per stage serves the whole
batch, and the stage sums are matrix products, so numpy's per-call cost is shared. Each
member keeps its own time, step size and error control, exactly as it would be stepped
alone: a member's steps do not depend on the others, and its accuracy is what it would
be alone. Steps are shortened to land on every recorded time, so nothing is
interpolated. The tableau, the error norm and the first step are those of Hairer,
Norsett & Wanner, *Solving Ordinary Differential Equations I* (Springer 1993), Sec.
II.10 (DOP853) and II.4 (starting step size), with the step-size control of Sec. II.4
($h \leftarrow h\,\min(10, \max(0.2, 0.9\,\mathrm{err}^{-1/8}))$).

A batch of more than :data:`CHUNK_ENTRIES` state entries is stepped in runs of members
of similar size, each run small enough for its stage slopes to stay in the CPU's cache.
The right-hand side is the flow's vectorised numpy form; for a batch of at least
:data:`gdln.solution._numba.MIN_BATCH` members, with numba installed (the ``fast``
extra) and not switched off by ``GDLN_NO_NUMBA``, numba compiles the flow's scalar form
instead (:mod:`gdln.solution._numba`): the same stepper, only the right-hand side
compiled. The stepper stops (:class:`~gdln.solution._stepper.Stopped`) where a value
turns non-finite, a step size underflows, or more than :data:`STIFF_STEPS` steps beyond
two per recorded time are needed, which means the system is stiff: LSODA's implicit
steps are then the right method.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._bounded._limits import tick
from ..reduction._numeric import NumericFlow
from . import _numba
from ._dop853_tableau import E3, E5, STAGES, A, B
from ._stepper import Stepper, Stopped

__all__ = ["CHUNK_ENTRIES", "STIFF_STEPS", "Dop853", "dop853"]

STIFF_STEPS = 2_000
"""Steps, beyond two per recorded time, after which DOP853 stops: the system is stiff."""
CHUNK_ENTRIES = 16_384
"""State entries (members times their size) stepped together: a larger batch is cut into
runs of members of similar size, so that a run's 13 stage slopes stay in the CPU's cache
(4000 members of 12 entries in one run took 8 times as long as in runs of 1000) and its
members finish after similar numbers of steps."""

Rhs = Callable[[np.ndarray], np.ndarray]
"""``f(y)`` on states ``(n, batch)``, returning ``(n, batch)``."""


class Dop853(Stepper):
    """DOP853 (see the module docstring): explicit, order 8, error control per member.

    The most accurate stepper at a given tolerance (its error control is nearly
    global: within 1e-10 of a tight solution at ``rtol=1e-10`` on the shipped graphs,
    where LSODA is about 1e-8 away), and the fastest for a batch; for one system numpy's
    per-call cost makes it slower than LSODA, and it stops on stiff systems.
    """

    name = "dop853"

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
        rhs_of, integrator = _right_hand_side(flow, y0.shape[1])
        steps = STIFF_STEPS + 2 * len(times)
        n, b = y0.shape
        members = max(1, CHUNK_ENTRIES // max(n, 1))
        if b <= members:
            states = dop853(rhs_of(constants), y0, times, rtol=rtol, atol=atol, max_steps=steps)
            return states, integrator
        out = np.empty((len(times), n, b))
        by_size = np.argsort(np.abs(y0).max(axis=0), kind="stable")  # similar members
        for chunk in np.array_split(by_size, -(-b // members)):
            rhs = rhs_of(np.ascontiguousarray(constants[:, chunk]))
            try:
                out[:, :, chunk] = dop853(
                    rhs, y0[:, chunk], times, rtol=rtol, atol=atol, max_steps=steps
                )
            except Stopped as stopped:
                raise Stopped(
                    stopped.reason,
                    stopped.t,
                    stopped.state,
                    int(chunk[stopped.member]),
                    stopped.outcome,
                ) from None
        return out, integrator


def _right_hand_side(flow: NumericFlow, batch: int) -> tuple[Callable[[np.ndarray], Rhs], str]:
    """``f`` on states ``(n, members)`` given the members' constants, and its name: numba's
    compile of the scalar form for a batch of at least ``MIN_BATCH``, else numpy."""
    if flow.scalar is not None and batch >= _numba.MIN_BATCH and _numba.available():
        kernel = _numba.batch_kernel(flow.scalar)

        def compiled(constants: np.ndarray) -> Rhs:
            def rhs(y: np.ndarray) -> np.ndarray:
                out = np.empty_like(y)
                kernel(y, constants, out)
                return out

            return rhs

        return compiled, "dop853-numba"

    def vectorised(constants: np.ndarray) -> Rhs:
        def rhs(y: np.ndarray) -> np.ndarray:
            return flow.batch_rhs(y, constants)

        return rhs

    return vectorised, "dop853-numpy"


def dop853(
    rhs: Rhs, y0: np.ndarray, times: np.ndarray, *, rtol: float, atol: float, max_steps: int
) -> np.ndarray:
    """Integrate the members ``y0`` ``(n, batch)`` through ``times``: ``(T, n, batch)``.

    ``times[0]`` is the start.

    Raises
    ------
    Stopped
        More than ``max_steps`` steps, a step size that underflows, or a value that is
        not finite (see the module docstring).
    """
    n, b = y0.shape
    out = np.empty((len(times), n, b))
    out[0] = y0
    K = np.empty((STAGES + 1, n, b))
    y = np.array(y0, dtype=float)
    last = len(times) - 1
    with np.errstate(all="ignore"):
        K[0] = rhs(y)
        h = _initial_step(rhs, y, K[0], times[-1] - times[0], rtol, atol)
        t = np.full(b, float(times[0]))
        k = np.ones(b, dtype=int)  # the next recorded time, per member
        steps = 0
        while (live := k <= last).any():
            steps += 1
            tick(float(t[live].min()))
            target = times[np.minimum(k, last)]
            if steps > max_steps:
                m = int(np.flatnonzero(live)[0])
                raise Stopped(
                    f"needed more than {max_steps} DOP853 steps (a stiff system: "
                    "method='lsoda' steps it)",
                    t[m],
                    y[:, m].copy(),
                    m,
                )
            small = live & (h <= 1e-14 * np.maximum(1.0, np.abs(t)))
            if small.any():
                m = int(np.flatnonzero(small)[0])
                raise Stopped("DOP853 step size underflowed", t[m], y[:, m].copy(), m)
            h_try = np.where(live, np.minimum(h, target - t), 0.0)
            y_new, norm = _step(rhs, y, h_try, K, rtol, atol)
            failed = live & np.isnan(norm)
            if failed.any():
                m = int(np.flatnonzero(failed)[0])
                raise Stopped("overflowed", t[m], y_new[:, m].copy(), m, "overflowed")
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
            np.copyto(K[0], K[STAGES], where=accept)
            out[k[landed], :, landed] = y[:, landed].T
            k = k + landed
    return out


def _step(
    rhs: Rhs, y: np.ndarray, h: np.ndarray, K: np.ndarray, rtol: float, atol: float
) -> tuple[np.ndarray, np.ndarray]:
    r"""One DOP853 step of every member from ``y`` (slopes ``K[0]``) by ``h`` ``(batch,)``.

    Returns the new states and each member's error norm
    $|h|\,E_5^2/\sqrt{(E_5^2 + 0.01\,E_3^2)\,n}$ (NaN where anything is not finite).
    Fills ``K[1:]``; ``K[STAGES]`` is the slope at the new state (the next step's first).
    """
    flat = K.reshape(len(K), -1)  # stage combinations as matrix products
    for s in range(1, STAGES):
        K[s] = rhs(y + h * (A[s, :s] @ flat[:s]).reshape(y.shape))
    y_new = y + h * (B @ flat[:STAGES]).reshape(y.shape)
    K[STAGES] = rhs(y_new)
    scale = atol + np.maximum(np.abs(y), np.abs(y_new)) * rtol
    err5 = np.square((E5 @ flat[:STAGES]).reshape(y.shape) / scale).sum(axis=0)
    err3 = np.square((E3 @ flat[:STAGES]).reshape(y.shape) / scale).sum(axis=0)
    norm = np.abs(h) * err5 / np.sqrt((err5 + 0.01 * err3) * y.shape[0])
    norm = np.where((err5 == 0.0) & (err3 == 0.0), 0.0, norm)
    finite = np.isfinite(y_new).all(axis=0) & np.isfinite(K[STAGES]).all(axis=0)
    return y_new, np.where(finite, norm, np.nan)


def _initial_step(
    rhs: Rhs, y: np.ndarray, f: np.ndarray, span: float, rtol: float, atol: float
) -> np.ndarray:
    """The first step of each member (Hairer, Norsett & Wanner, Sec. II.4, for order 8)."""
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
