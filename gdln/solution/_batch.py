r"""Many initial scales of one reduction, solved in one call.

Scaling every initial value of a reduction by $\lambda$ changes neither its equations nor
its lumping: the lumped variables start at $\lambda B_k(0)$ and the constants of Eq. (15),
values of conserved quadratic forms $C=\sum c_{ij}B_iB_j$ of Saxe et al. 2022, become
$\lambda^2 C$. :func:`solve_batch` steps the systems of all scales at once by DOP853,
compiled by numba where installed (:mod:`._fast`), else in numpy on ``(batch, state)``
arrays (:mod:`._vector`), each system with its own step control, as it would be solved
alone. Where that stepper gives up (a stiff system, a value that is not finite), the
systems are stacked into one state, mode by mode with each mode's variables adjacent, and
handed to LSODA: the right-hand side is evaluated by numpy for the whole batch at once,
and the Jacobian of the stiff steps is banded (modes of Eq. 10 evolve independently), so
its cost grows linearly with the batch.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import sympy as sp

from .._errors import GdlnError
from ..reduction._loss import floor_at_zero
from ..reduction._system import Reduction
from . import _fast, _vector
from ._bounds import check_solve_settings
from ._ode import OdeProblem, SolverFailed, Stop, integrate
from ._solve import (
    _SCALAR_STATE_MAX,
    _compiled,
    _Numeric,
    _reduction_meta,
    _require_numbers,
    fast_states,
)
from ._trajectory import CONTEXT_LOSS, Trajectory, variable_key

__all__ = ["solve_batch"]

VECTOR_STEPS = 2_000
"""Steps (beyond two per recorded time) after which the numpy stepper gives up, taking
the batch for stiff: LSODA's implicit steps then solve it."""
CHUNK = 128
"""Scales per LSODA run: a run takes the steps of its fastest-changing member, and LSODA's
work per step grows with the state, so a sorted grid is cut into runs of this many."""
FAST_BATCH = 16
"""Fewest scales for which the numba path (:mod:`._fast`) is compiled and used."""


def solve_batch(
    reduction: Reduction,
    scales: npt.ArrayLike,
    *,
    t_max: float,
    n_points: int = 201,
    rtol: float = 1e-10,
    atol: float = 1e-12,
) -> list[Trajectory]:
    r"""Solve the reduced ODE from many initial scales in one call.

    Trajectory ``k`` starts from ``scales[k]`` times the reduction's initial values, as if
    :func:`gdln.reduce` had been given initial values ``scales[k]`` times as large (the
    constants $C$ of Eq. 15 of Saxe et al. 2022 scale as ``scales[k]**2``). Every system
    is stepped by DOP853 with its own step control, as :func:`gdln.solve` steps it with
    numba: compiled by numba (the ``fast`` extra) from :data:`FAST_BATCH` scales on, else
    in numpy across the batch. Where that stepper gives up (a stiff system, or more than
    :data:`VECTOR_STEPS` steps), sorted scales share LSODA runs
    (``scipy.integrate.odeint``) of :data:`CHUNK` at a time: one step size per run, the
    right-hand side vectorised across it, a banded Jacobian. ``meta["integrator"]`` says
    which solved.

    Parameters
    ----------
    reduction
        From :func:`gdln.reduce`.
    scales
        One-dimensional, positive and finite.
    t_max, n_points, rtol, atol
        As for :func:`gdln.solve` (the ODE; each system's error is controlled on its own).

    Raises
    ------
    GdlnError
        For scales that are not positive and finite, or if the ODE overflows, turns
        non-finite or the solver fails (naming the time, the scale, variable and value).

    Returns
    -------
    list of Trajectory
        One per scale, as :func:`gdln.solve` returns it, with ``meta["init_scale"]`` and
        ``meta["integrator"]`` (``"dop853-numba"``, ``"dop853-numpy"`` or ``"lsoda"``).

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (10) and (15).
    """
    t_max, _ = check_solve_settings(t_max, n_points=n_points)
    _require_numbers(reduction)
    values = _check_scales(reduction, scales)
    numerics = [_compiled(s) for s in reduction.systems]
    times = np.linspace(0.0, t_max, n_points)
    batch = _Batch(numerics, values)
    states, integrator = _compiled_states(batch, times, rtol, atol), "dop853-numba"
    if states is None:
        states, integrator = batch.vector_states(times, rtol, atol), "dop853-numpy"
    if states is None:
        states, integrator = _lsoda_states(reduction, batch, times, rtol, atol), "lsoda"
    return batch.trajectories(reduction, times, states, integrator)


def _compiled_states(
    batch: _Batch, times: np.ndarray, rtol: float, atol: float
) -> list[np.ndarray] | None:
    """With numba (:mod:`._fast`), each scale's systems stepped by compiled DOP853, per
    system ``(T, vars, modes, batch)``; ``None`` without numba, for small batches
    (compiling costs more) or where a system did not finish."""
    numerics = [n for n, *_ in batch.parts]
    sizes = [len(n.free) * n.n_modes for n in numerics]
    if not _fast.available() or len(batch.scales) < FAST_BATCH or max(sizes) > _SCALAR_STATE_MAX:
        return None
    states = fast_states(numerics, batch.scales, times, rtol, atol)  # (b, T, state)
    if states is None:
        return None
    parts, start, (b, T) = [], 0, states.shape[:2]
    for n, size in zip(numerics, sizes, strict=True):
        part = states[:, :, start : start + size].transpose(1, 2, 0)  # a view
        parts.append(part.reshape(T, len(n.free), n.n_modes, b))
        start += size
    return parts


def _lsoda_states(
    reduction: Reduction, batch: _Batch, times: np.ndarray, rtol: float, atol: float
) -> list[np.ndarray]:
    """Sorted scales through LSODA, :data:`CHUNK` at a time, per system ``(T, vars, modes,
    batch)``; the solver's stops become one :class:`GdlnError`."""
    out = [
        np.empty((len(times), len(n.free), n.n_modes, len(batch.scales))) for n, *_ in batch.parts
    ]
    order = np.argsort(batch.scales, kind="stable")  # similar scales take similar steps
    for chunk in np.array_split(order, -(-len(order) // CHUNK)):
        part = _Batch([n for n, *_ in batch.parts], batch.scales[chunk])
        try:
            problem = OdeProblem(part.y0, part.rhs, band=part.band)
            states = integrate(problem, times, rtol=rtol, atol=atol)
        except Stop as stop:
            what = "solver failed" if isinstance(stop, SolverFailed) else stop.reason
            raise GdlnError(
                f"{reduction.problem.source}: the ODE {what} at t = {stop.t:.4g} tau, where "
                f"{part.worst(stop.state)}; lower the scale or t_max"
            ) from None
        for whole, (n, start, _, _) in zip(out, part.parts, strict=True):
            size = len(chunk) * n.n_modes * len(n.free)
            y = states[:, start : start + size].reshape(len(times), len(chunk), n.n_modes, -1)
            whole[..., chunk] = y.transpose(0, 3, 2, 1)
    return out


def _check_scales(reduction: Reduction, scales: npt.ArrayLike) -> np.ndarray:
    try:
        values = np.asarray(scales, dtype=float)
    except (TypeError, ValueError):
        raise GdlnError(f"{reduction.problem.source}: scales must be numbers") from None
    bad = values[~(np.isfinite(values) & (values > 0))] if values.ndim == 1 else values
    if values.ndim != 1 or len(values) == 0 or len(bad):
        raise GdlnError(
            f"{reduction.problem.source}: scales must be a non-empty 1-D array of positive "
            f"finite numbers, got {bad.ravel()[:3].tolist()} of shape {values.shape}"
        )
    return values


class _Batch:
    """The systems of a reduction for every scale, stacked (see the module docstring)."""

    def __init__(self, numerics: list[_Numeric], scales: np.ndarray):
        self.scales = scales
        self.parts: list[tuple[_Numeric, int, list[np.ndarray], list[np.ndarray]]] = []
        y0, start = [], 0
        for n in numerics:
            b, m, nv = len(scales), n.n_modes, len(n.free)
            data = [np.tile(d, b) for d in n.data]
            consts = [np.repeat(c * scales**2, m) for c in n.consts]
            self.parts.append((n, start, data, consts))
            y0.append((scales[:, None, None] * n.y0.T[None, :, :]).ravel())  # (b, m, nv)
            start += b * m * nv
        self.y0 = np.concatenate(y0)
        self.band = max(len(n.free) for n in numerics) - 1

    def rhs(self, y: np.ndarray) -> np.ndarray:
        """$f$ of every system and scale, as one flat array (LSODA's layout)."""
        out = np.empty_like(y)
        for n, start, data, consts in self.parts:
            size = len(self.scales) * n.n_modes * len(n.free)
            rows = y[start : start + size].reshape(-1, len(n.free)).T.copy()  # contiguous
            block = out[start : start + size].reshape(-1, len(n.free))
            for i, value in enumerate(n.rhs(list(rows), data, consts)):
                block[:, i] = value
        return out

    def vector_states(self, times: np.ndarray, rtol: float, atol: float) -> list[np.ndarray] | None:
        """Each system by the numpy DOP853 of :mod:`._vector`, ``(T, vars, modes, batch)``;
        ``None`` where it gave up."""
        out = []
        for n, *_ in self.parts:
            b, nv, m = len(self.scales), len(n.free), n.n_modes
            consts = [c * self.scales**2 for c in n.consts]
            fn, data = n.vector_rhs, [d[:, None] for d in n.data]

            def rhs(y: np.ndarray, fn=fn, data=data, consts=consts, nv=nv, m=m) -> np.ndarray:
                f = np.empty_like(y)  # (vars * modes, b): each variable's rows adjacent
                rows = [y[i * m : (i + 1) * m] for i in range(nv)]
                for i, value in enumerate(fn(rows, data, consts)):
                    f[i * m : (i + 1) * m] = value
                return f

            y0 = n.y0.reshape(-1, 1) * self.scales  # (vars * modes, b)
            steps = VECTOR_STEPS + 2 * len(times)
            states = _vector.dop853(rhs, y0, times, rtol=rtol, atol=atol, max_steps=steps)
            if states is None:
                return None
            out.append(states.reshape(len(times), nv, m, b))
        return out

    def worst(self, state: np.ndarray) -> str:
        """The entry that went furthest, named by variable, mode and scale."""
        bad = np.flatnonzero(~np.isfinite(state))
        i = int(bad[0]) if len(bad) else int(np.argmax(np.abs(state)))
        for k, (n, start, _, _) in enumerate(self.parts):
            b, m, nv = len(self.scales), n.n_modes, len(n.free)
            if i < start + b * m * nv:
                scale, mode, var = np.unravel_index(i - start, (b, m, nv))
                name = variable_key(str(n.free[var]), k, len(self.parts))
                return f"{name} = {state[i]:.4g} in mode {mode} for scale {self.scales[scale]:.4g}"
        raise AssertionError(i)

    def trajectories(
        self, reduction: Reduction, times: np.ndarray, states: list[np.ndarray], integrator: str
    ) -> list[Trajectory]:
        """One :class:`Trajectory` per scale from each system's ``(T, vars, modes, batch)``;
        their arrays are views of one array per variable, scales on its last axis."""
        task = reduction.problem.require_task()
        probabilities = np.array([float(c.probability) for c in task.contexts])
        constants = np.array([float(v) for v in reduction.context_constants])
        b = len(self.scales)
        context_loss = np.broadcast_to(constants[:, None], (len(times), len(constants), b))
        series: dict[str, np.ndarray] = {}  # name -> (T, modes, b)
        for k, ((n, *_), y) in enumerate(zip(self.parts, states, strict=True)):
            values = self._all_variables(n, y)
            context_loss = context_loss + self._context_losses(n, values)
            series |= {variable_key(str(v), k, len(self.parts)): arr for v, arr in values.items()}
        context_loss = floor_at_zero(context_loss, constants[:, None])
        losses = probabilities @ context_loss  # (T, b)
        meta = {**_reduction_meta(reduction, "ode", None), "integrator": integrator}
        out = []
        for j, scale in enumerate(self.scales):
            one = {name: arr[..., j] for name, arr in series.items()}
            one[CONTEXT_LOSS] = context_loss[..., j]
            out.append(Trajectory(times, losses[:, j], one, {**meta, "init_scale": float(scale)}))
        return out

    def _all_variables(self, n: _Numeric, y: np.ndarray) -> dict[sp.Symbol, np.ndarray]:
        """Free and eliminated variables ``(T, modes, batch)`` from ``y`` ``(T, vars, m, b)``."""
        values = {v: y[:, i] for i, v in enumerate(n.free)}
        rows, data = list(values.values()), [d[:, None] for d in n.data]
        consts = [c * self.scales**2 for c in n.consts]
        shape = (y.shape[0], *y.shape[2:])
        for v, fn in n.eliminated.items():
            values[v] = np.broadcast_to(np.asarray(fn(rows, data, consts), dtype=float), shape)
        return values

    def _context_losses(self, n: _Numeric, values: dict[sp.Symbol, np.ndarray]) -> np.ndarray:
        r"""$\sum_\alpha \ell^c_\alpha$ per context and scale: ``(T, contexts, batch)``."""
        T, _, b = next(iter(values.values())).shape
        summed = np.empty((T, len(n.monomials), b))
        args = [values[v] for v in n.lumped] + [d[:, None] for d in n.data]
        for k, monomial in enumerate(n.monomials):  # products: no pow on large arrays
            product: np.ndarray | float = 1.0
            for v, e in monomial:
                for _ in range(e):
                    product = product * args[v]
            summed[:, k] = np.broadcast_to(product, (T, n.n_modes, b)).sum(axis=1)
        return n.table @ summed
