r"""Many initial scales of one reduction, solved as one ODE.

Scaling every initial value of a reduction by $\lambda$ changes neither its equations nor
its lumping: the lumped variables start at $\lambda B_k(0)$ and the constants of Eq. (15),
values of conserved quadratic forms $C=\sum c_{ij}B_iB_j$ of Saxe et al. 2022, become
$\lambda^2 C$. :func:`solve_batch` stacks the systems of all scales into one state, mode by
mode with each mode's variables adjacent, and hands it to LSODA once: the right-hand side
is evaluated by numpy for the whole batch at once, and the Jacobian of the stiff steps is
banded (modes of Eq. 10 evolve independently), so its cost grows linearly with the batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import sympy as sp

from .._errors import GdlnError
from ..reduction._poly import evaluate_monomials
from ..reduction._system import Reduction
from . import _fast
from ._ode import OdeProblem, SolverFailed, Stop, integrate
from ._solve import (
    _SCALAR_STATE_MAX,
    _check_settings,
    _compiled,
    _Numeric,
    _reduction_meta,
    _require_numbers,
    fast_states,
)
from ._trajectory import Trajectory

__all__ = ["solve_batch"]

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
    constants $C$ of Eq. 15 of Saxe et al. 2022 scale as ``scales[k]**2``). With numba
    installed (the ``fast`` extra) and at least :data:`FAST_BATCH` scales, each is
    stepped by compiled DOP853 (:mod:`gdln.solution._fast`). Otherwise sorted scales
    share LSODA runs (``scipy.integrate.odeint``) of :data:`CHUNK` at a time: one step
    size per run, the right-hand side vectorised across it, a banded Jacobian.

    Parameters
    ----------
    reduction
        From :func:`gdln.reduce`.
    scales
        One-dimensional, positive and finite.
    t_max, n_points, rtol, atol
        As for :func:`gdln.solve` (the ODE; tolerances apply to the stacked state).

    Raises
    ------
    GdlnError
        For scales that are not positive and finite, or if the ODE overflows, turns
        non-finite or the solver fails (naming the time, the scale, variable and value).

    Returns
    -------
    list of Trajectory
        One per scale, as :func:`gdln.solve` returns it, with ``meta["init_scale"]``.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (10) and (15).
    """
    _check_settings(t_max, None)
    _require_numbers(reduction)
    values = _check_scales(reduction, scales)
    numerics = [_compiled(s) for s in reduction.systems]
    times = np.linspace(0.0, t_max, n_points)
    compiled = _compiled_states(numerics, values, times, rtol, atol)
    if compiled is not None:
        return _Batch(numerics, values).trajectories(reduction, times, compiled)
    out: list[Trajectory | None] = [None] * len(values)
    order = np.argsort(values, kind="stable")  # similar scales take similar steps
    for chunk in np.array_split(order, -(-len(order) // CHUNK)):
        batch = _Batch(numerics, values[chunk])
        try:
            problem = OdeProblem(batch.y0, batch.rhs, band=batch.band)
            states = integrate(problem, times, rtol=rtol, atol=atol)
        except Stop as stop:
            what = "solver failed" if isinstance(stop, SolverFailed) else stop.reason
            raise GdlnError(
                f"{reduction.problem.source}: the ODE {what} at t = {stop.t:.4g} tau, where "
                f"{batch.worst(stop.state)}; lower the scale or t_max"
            ) from None
        for k, trajectory in zip(chunk, batch.trajectories(reduction, times, states), strict=True):
            out[k] = trajectory
    return [t for t in out if t is not None]


def _compiled_states(
    numerics: list[_Numeric], scales: np.ndarray, times: np.ndarray, rtol: float, atol: float
) -> np.ndarray | None:
    """With numba (:mod:`._fast`), each scale's systems stepped by compiled DOP853, as
    ``(T, state)`` in :class:`_Batch`'s layout; ``None`` without numba, for small batches
    (compiling costs more) or where a system did not finish (then LSODA solves)."""
    sizes = [len(n.free) * n.n_modes for n in numerics]
    if not _fast.available() or len(scales) < FAST_BATCH or max(sizes) > _SCALAR_STATE_MAX:
        return None
    states = fast_states(numerics, scales, times, rtol, atol)
    if states is None:
        return None
    parts, start, (b, T) = [], 0, states.shape[:2]
    for n, size in zip(numerics, sizes, strict=True):
        part = states[:, :, start : start + size].reshape(b, T, len(n.free), n.n_modes)
        parts.append(part.transpose(1, 0, 3, 2).reshape(T, -1))  # (T, b * modes * vars)
        start += size
    return np.concatenate(parts, axis=1)


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
        """$f$ of every system and scale, as one flat array."""
        out = np.empty_like(y)
        for n, start, data, consts in self.parts:
            size = len(self.scales) * n.n_modes * len(n.free)
            rows = y[start : start + size].reshape(-1, len(n.free)).T.copy()  # contiguous
            block = out[start : start + size].reshape(-1, len(n.free))
            for i, value in enumerate(n.rhs(list(rows), data, consts)):
                block[:, i] = value
        return out

    def worst(self, state: np.ndarray) -> str:
        """The entry that went furthest, named by variable, mode and scale."""
        bad = np.flatnonzero(~np.isfinite(state))
        i = int(bad[0]) if len(bad) else int(np.argmax(np.abs(state)))
        for k, (n, start, _, _) in enumerate(self.parts):
            b, m, nv = len(self.scales), n.n_modes, len(n.free)
            if i < start + b * m * nv:
                scale, mode, var = np.unravel_index(i - start, (b, m, nv))
                suffix = "" if len(self.parts) == 1 else f"@{k}"
                return (
                    f"{n.free[var]}{suffix} = {state[i]:.4g} in mode {mode} "
                    f"for scale {self.scales[scale]:.4g}"
                )
        raise AssertionError(i)

    def trajectories(
        self, reduction: Reduction, times: np.ndarray, states: np.ndarray
    ) -> list[Trajectory]:
        """One :class:`Trajectory` per scale from the stacked states ``(T, state)``."""
        task = reduction.problem.require_task()
        probabilities = np.array([float(c.probability) for c in task.contexts])
        b, T = len(self.scales), len(times)
        constants = np.array([float(v) for v in reduction.context_constants])
        context_loss = np.zeros((len(constants), T, b))
        series: dict[str, np.ndarray] = {}  # name -> (T, b, modes)
        for k, (n, start, data, consts) in enumerate(self.parts):
            y = states[:, start : start + b * n.n_modes * len(n.free)].reshape(T, -1, len(n.free))
            values = self._all_variables(n, y, data, consts)
            context_loss += self._context_losses(n, values, data)
            suffix = "" if len(self.parts) == 1 else f"@{k}"
            for v, arr in values.items():
                series[f"{v}{suffix}"] = arr.reshape(T, b, n.n_modes)
        by_scale = np.ascontiguousarray(context_loss.transpose(2, 1, 0)) + constants  # (b, T, c)
        losses = by_scale @ probabilities  # (b, T)
        meta = _reduction_meta(reduction, "ode", None)
        out = []
        for j, scale in enumerate(self.scales):
            one = {name: arr[:, j] for name, arr in series.items()}
            one["context_loss"] = by_scale[j]
            out.append(Trajectory(times, losses[j], one, {**meta, "init_scale": float(scale)}))
        return out

    @staticmethod
    def _all_variables(
        n: _Numeric, y: np.ndarray, data: list[np.ndarray], consts: list[np.ndarray]
    ) -> dict[sp.Symbol, np.ndarray]:
        """Free and eliminated variables ``(T, batch * modes)`` from ``y`` ``(T, b*m, vars)``."""
        values = {v: y[:, :, i] for i, v in enumerate(n.free)}
        rows = [y[:, :, i] for i in range(len(n.free))]
        for v, fn in n.eliminated.items():
            value = fn(rows, [d[None, :] for d in data], [c[None, :] for c in consts])
            values[v] = np.broadcast_to(np.asarray(value, dtype=float), y.shape[:2])
        return values

    def _context_losses(
        self, n: _Numeric, values: dict[sp.Symbol, np.ndarray], data: Sequence[np.ndarray]
    ) -> np.ndarray:
        r"""$\sum_\alpha \ell^c_\alpha$ per context and scale: ``(contexts, T, batch)``."""
        T, b = next(iter(values.values())).shape[0], len(self.scales)
        if not n.monomials:
            return np.zeros((n.table.shape[0], T, b))
        args = [values[v] for v in n.lumped] + [np.broadcast_to(d, (T, len(d))) for d in data]
        summed = evaluate_monomials(n.monomials, args).reshape(-1, T, b, n.n_modes).sum(axis=-1)
        return (n.table @ summed.reshape(len(n.monomials), -1)).reshape(-1, T, b)
