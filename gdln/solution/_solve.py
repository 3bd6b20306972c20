r"""Numeric solutions of the reduced dynamics: the ODE and the exact gradient-descent map.

**Time convention (used everywhere in gdln).** Gradient flow is
$\tau\,\dot W = -\partial\mathcal{L}/\partial W$ (Eq. 2 of Saxe et al. 2022) with the loss
of Eq. (1), and time is measured in units of $\tau$ (so $\tau = 1$). Full-batch gradient
descent with learning rate ``lr`` is the Euler step of this flow with $dt = \mathrm{lr}$:
after ``n`` steps, $t/\tau = \mathrm{lr}\cdot n$ (one step is $1/\mathrm{lr}$ of a $\tau$).
From decoupled initial weights the reduced map
$B \leftarrow B + \mathrm{lr}\, f(B)$ is *exactly* what gradient descent on the full
network does, mode by mode.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import sympy as sp

from .._errors import DegenerateStartWarning, GdlnError
from ..reduction._loss import floor_at_zero
from ..reduction._moments import ExpectedDynamics
from ..reduction._poly import evaluate_monomials, monomial_table
from ..reduction._system import ReducedSystem, Reduction
from ..task._task import unbound_message
from . import _fast, _vector
from ._bounds import check_solve_settings, check_times
from ._gd_map import map_reduction
from ._ode import OdeProblem, SolverFailed, Stop, integrate, integrate_ivp
from ._trajectory import CONTEXT_LOSS, Trajectory, variable_key

__all__ = ["solve_model"]


_SCALAR_STATE_MAX = 512  # largest state compiled into one scalar function (see _Numeric.scalar)


class _Numeric:
    """One reduced system compiled for numbers, vectorised across its modes."""

    def __init__(self, system: ReducedSystem):
        self.system = system
        data = list(system.symbols)
        consts = list(system.constants)
        self.free = list(system.variables)
        args = [self.free, data, consts]
        self.rhs = sp.lambdify(args, [system.rhs[v] for v in self.free], "numpy")
        self.eliminated = {v: sp.lambdify(args, e, "numpy") for v, e in system.eliminated.items()}
        n = len(system.modes)
        self.data = [np.array([float(x) for x in system.symbols[s]]) for s in data]
        self.consts = [float(system.constants[c]) for c in consts]
        self.n_modes = n
        self.y0 = np.array([[float(system.initial[v])] * n for v in self.free])
        self.monomials, self.table = monomial_table(system._context_losses)
        self.lumped = list(system._lumped)
        self.solves = 0  # ODE solves so far: the numba path compiles from the second on

    @functools.cached_property
    def vector_rhs(self) -> Callable[..., list[Any]]:
        """:attr:`rhs` generated for large arrays (:func:`._vector.numpy_rhs`)."""
        args = [self.free, list(self.system.symbols), list(self.system.constants)]
        return _vector.numpy_rhs([self.system.rhs[v] for v in self.free], args)

    @functools.cached_property
    def fast_rhs(self) -> Any:
        """The right-hand side compiled by numba (:func:`._fast.compiled_rhs`) on the flat
        state ``(vars * modes,)``, with the constants $C$ as an argument."""
        system = self.system
        y = [[sp.Dummy(f"{v}_{a}") for a in range(self.n_modes)] for v in self.free]
        exprs = []
        for v in self.free:
            for a in range(self.n_modes):
                values = {f: y[i][a] for i, f in enumerate(self.free)}
                values |= {
                    s: sp.Float(d[a], 17) for s, d in zip(system.symbols, self.data, strict=True)
                }
                exprs.append(system.rhs[v].xreplace(values))
        return _fast.compiled_rhs(exprs, [s for row in y for s in row], list(system.constants))

    @functools.cached_property
    def scalar(self) -> Callable[[np.ndarray], np.ndarray] | None:
        """:attr:`scalar_list` returning an array (for the gradient-descent map)."""
        fn = self.scalar_list
        return None if fn is None else (lambda state: np.array(fn(state)))

    @functools.cached_property
    def scalar_list(self) -> Callable[[np.ndarray], list[float]] | None:
        """The right-hand side as one scalar function of the flat state ``(vars * modes,)``.

        Compiled with the ``math`` module and shared subexpressions, and only for states of
        at most ``_SCALAR_STATE_MAX`` entries: for the few variables that lumping leaves,
        this is several times faster per call than numpy on tiny arrays, and an ODE solver
        calls back into Python hundreds of times. ``None`` for larger states.
        """
        m, system = self.n_modes, self.system
        if len(self.free) * m > _SCALAR_STATE_MAX:
            return None
        y = [[sp.Dummy(f"{v}_{a}") for a in range(m)] for v in self.free]
        constants = {c: sp.Float(x, 17) for c, x in zip(system.constants, self.consts, strict=True)}
        exprs = []
        for v in self.free:
            for a in range(m):
                values = {f: y[i][a] for i, f in enumerate(self.free)}
                values.update(
                    {s: sp.Float(d[a], 17) for s, d in zip(system.symbols, self.data, strict=True)}
                )
                exprs.append(system.rhs[v].xreplace({**values, **constants}))
        fn = sp.lambdify([s for row in y for s in row], exprs, "math", cse=True)
        return lambda state: fn(*state.tolist())

    def jacobian(self, state: np.ndarray) -> np.ndarray:
        """$\\partial f_i/\\partial y_j$ of :attr:`scalar_list` (compiled on first use)."""
        return self._jacobian(state)

    @functools.cached_property
    def _jacobian(self) -> Callable[[np.ndarray], np.ndarray]:
        """The analytic Jacobian: only entries within a mode can be nonzero."""
        m, nv, system = self.n_modes, len(self.free), self.system
        y = [[sp.Dummy(f"{v}_{a}") for a in range(m)] for v in self.free]
        entries, rows, cols = [], [], []
        for a in range(m):
            values = {f: y[i][a] for i, f in enumerate(self.free)}
            values |= {
                s: sp.Float(d[a], 17) for s, d in zip(system.symbols, self.data, strict=True)
            }
            values |= {
                c: sp.Float(x, 17) for c, x in zip(system.constants, self.consts, strict=True)
            }
            for i, v in enumerate(self.free):
                f = system.rhs[v].xreplace(values)
                for j in range(nv):
                    entries.append(sp.diff(f, y[j][a]))
                    rows.append(i * m + a)
                    cols.append(j * m + a)
        fn = sp.lambdify([s for row in y for s in row], entries, "math", cse=True)
        size = nv * m

        def jacobian(state: np.ndarray) -> np.ndarray:
            out = np.zeros((size, size))
            out[rows, cols] = fn(*state.tolist())
            return out

        return jacobian

    def f(self, y: np.ndarray) -> np.ndarray:
        out = self.rhs(list(y), self.data, self.consts)
        return np.array([np.broadcast_to(np.asarray(v, dtype=float), (self.n_modes,)) for v in out])

    def all_variables(self, y: np.ndarray) -> dict[sp.Symbol, np.ndarray]:
        """Free and eliminated variables, each ``(T, modes)``, from ``y`` ``(vars, T, modes)``."""
        values = {v: y[i] for i, v in enumerate(self.free)}
        for v, fn in self.eliminated.items():
            values[v] = np.broadcast_to(
                np.asarray(fn(list(y), [d[None, :] for d in self.data], self.consts), dtype=float),
                y.shape[1:],
            )
        return values

    def context_losses(self, values: dict[sp.Symbol, np.ndarray]) -> np.ndarray:
        """$\\sum_\\alpha \\ell^c_\\alpha$ per context: ``(contexts, T)``."""
        T = next(iter(values.values())).shape[0] if values else 1
        args = [values[v] for v in self.lumped] + [
            np.broadcast_to(d, (T, self.n_modes)) for d in self.data
        ]
        if not self.monomials:
            return np.zeros((self.table.shape[0], T))
        summed = evaluate_monomials(self.monomials, args).sum(axis=-1)
        return self.table @ summed


_COMPILED: weakref.WeakKeyDictionary[ReducedSystem, _Numeric] = weakref.WeakKeyDictionary()


def _compiled(system: ReducedSystem) -> _Numeric:
    """Lambdify a system once; later solves of the same system reuse it."""
    if system not in _COMPILED:
        _COMPILED[system] = _Numeric(system)
    return _COMPILED[system]


@dataclass(frozen=True)
class _Prepared:
    """What every solve of one reduction needs, checked and converted once."""

    flow: _Flow
    probabilities: np.ndarray  # per context
    context_constants: np.ndarray  # per context


_PREPARED: weakref.WeakKeyDictionary[Reduction, _Prepared] = weakref.WeakKeyDictionary()


def _prepared(reduction: Reduction) -> _Prepared:
    """:func:`_require_numbers`, the flow and the numbers, once per reduction."""
    if reduction not in _PREPARED:
        _require_numbers(reduction)
        task = reduction.problem.require_task()
        _PREPARED[reduction] = _Prepared(
            _reduction_flow(reduction),
            np.array([float(c.probability) for c in task.contexts]),
            np.array([float(v) for v in reduction.context_constants]),
        )
    return _PREPARED[reduction]


def _require_numbers(reduction: Reduction) -> None:
    """Refuse a reduction whose data, initial values or equations still hold symbols."""
    task = reduction.problem.require_task()
    values: list[Any] = [reduction.constant, *reduction.context_constants]
    values += [c.probability for c in task.contexts]
    free: set[sp.Basic] = set()
    for system in reduction.systems:
        values += [x for vals in system.symbols.values() for x in vals]
        values += [*system.constants.values(), *system.initial.values()]
        # symbols left in the equations themselves, e.g. a symbolic survival probability
        known = {*system.variables, *system.symbols, *system.constants}
        free |= {x for rhs in system.rhs.values() for x in rhs.free_symbols if x not in known}
    free |= set().union(*(v.free_symbols for v in values if isinstance(v, sp.Basic)))
    if free:
        raise GdlnError(f"{reduction.problem.source}: {unbound_message(free)}")


def solve_model(
    reduction: Reduction | ExpectedDynamics,
    *,
    t_max: float,
    lr: float | None,
    n_points: int,
    times: npt.ArrayLike | None,
    rtol: float,
    atol: float,
) -> Trajectory:
    """Integrate (``lr`` ``None``) or iterate the dynamics of a reduction from its start."""
    t_max, lr = check_solve_settings(t_max, lr=lr, n_points=n_points)
    recorded = None if times is None else check_times(times, t_max, lr)
    system_used = "reduced"
    if isinstance(reduction, ExpectedDynamics):
        flow = _moment_flow(reduction)
    else:
        if lr is not None:  # Eq. (15) holds for the flow only: iterate the tied system
            _require_numbers(reduction)
            reduction, system_used = map_reduction(reduction)
        flow = _prepared(reduction).flow
    _warn_if_fixed_point(flow)
    if lr is None:
        times, states = _integrate_ode(
            flow, t_max, n_points=n_points, rtol=rtol, atol=atol, times=recorded
        )
        method = "ode"
    else:
        record = None if recorded is None else np.rint(recorded / lr).astype(int)
        times, states = _iterate_gd_map(flow, t_max, lr, n_points=n_points, record=record)
        method = "gd-map"
    if isinstance(reduction, ExpectedDynamics):
        return _moment_trajectory(reduction, times, states, method, lr)
    trajectory = _reduction_trajectory(reduction, times, states, method, lr)
    return dataclasses.replace(trajectory, meta={**trajectory.meta, "system": system_used})


def _warn_if_fixed_point(flow: _Flow) -> None:
    r"""Warn when $f(y_0) = 0$: the start is a fixed point and the solution stays flat.

    This is what $b(0) = 0$ gives (every path product and every gradient of Eq. (10) of
    Saxe et al. 2022 vanish on paths of two or more trained edges).
    """
    if flow.y0.size == 0:
        return
    with np.errstate(all="ignore"):
        try:
            rate = np.asarray(flow.rhs(flow.y0.copy()), dtype=float)
        except (ArithmeticError, ValueError):
            return
    if np.all(rate == 0):
        shown = np.unique(flow.y0)
        start = f"b(0) = {shown[0]:g}" if len(shown) == 1 else "the initial values"
        warnings.warn(
            f"{flow.source}: {start} is a fixed point of the dynamics: every variable's "
            "rate of change is 0 there, so nothing will change (the loss stays flat); "
            "start from a small nonzero value such as init=0.001",
            DegenerateStartWarning,
            stacklevel=3,
        )


@dataclass(frozen=True)
class _Flow:
    r"""The reduced dynamics $\tau\dot y = f(y)$ on one flat state vector.

    Attributes
    ----------
    y0
        The initial state.
    rhs
        $f$, array to array (for the gradient-descent map).
    rhs_ode
        The same $f$ in the form fastest for the ODE solver (it may return a list).
    labels
        Per state entry, ``(variable name, mode)``, for error messages.
    source
        The graph file, for error messages.
    jacobian
        $\\partial f_i/\\partial y_j$ for the ODE solver's stiff steps, or ``None``.
    fast
        The compiled solver of :mod:`._fast`, ``(times, rtol, atol)`` to states
        ``(T, state)`` or ``None`` where it did not finish (then LSODA solves); ``None``.
    """

    y0: np.ndarray
    rhs: Callable[[np.ndarray], np.ndarray]
    rhs_ode: Callable[[np.ndarray], Any]
    labels: list[tuple[str, int]]
    source: str
    jacobian: Callable[[np.ndarray], np.ndarray] | None = None
    fast: Callable[[np.ndarray, float, float], np.ndarray | None] | None = None

    def worst(self, state: np.ndarray) -> str:
        """The variable that went furthest: the first non-finite one, else the largest."""
        bad = np.flatnonzero(~np.isfinite(state))
        i = int(bad[0]) if len(bad) else int(np.argmax(np.abs(state)))
        name, mode = self.labels[i]
        return f"{name} = {state[i]:.4g} in mode {mode}"


def _reduction_flow(reduction: Reduction) -> _Flow:
    """The systems of a reduction stacked into one state: each variable's modes in a row."""
    numerics = [_compiled(s) for s in reduction.systems]
    sizes = [len(n.free) * n.n_modes for n in numerics]
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    y0 = np.concatenate([n.y0.ravel() for n in numerics]) if numerics else np.zeros(0)

    def all_systems(y: np.ndarray) -> np.ndarray:
        out = np.empty_like(y)
        for n, start, size in zip(numerics, starts, sizes, strict=False):
            if n.scalar is not None:
                out[start : start + size] = n.scalar(y[start : start + size])
                continue
            m = n.n_modes
            rows = [y[start + i * m : start + (i + 1) * m] for i in range(len(n.free))]
            for i, value in enumerate(n.rhs(rows, n.data, n.consts)):
                out[start + i * m : start + (i + 1) * m] = value
        return out

    rhs: Callable[[np.ndarray], np.ndarray] = all_systems
    rhs_ode: Callable[[np.ndarray], Any] = all_systems
    jacobian = None
    if len(numerics) == 1 and numerics[0].scalar_list is not None:
        # skip the per-system loop; the solver calls this often, and takes a list as is
        rhs, rhs_ode = numerics[0].scalar, numerics[0].scalar_list  # type: ignore[assignment]
        jacobian = numerics[0].jacobian
    labels = [
        (variable_key(str(v), k, len(numerics)), a)
        for k, n in enumerate(numerics)
        for v in n.free
        for a in range(n.n_modes)
    ]
    fast = None
    if _fast.available() and all(len(n.free) * n.n_modes <= _SCALAR_STATE_MAX for n in numerics):
        fast = functools.partial(_fast_solve, numerics)
    return _Flow(y0, rhs, rhs_ode, labels, reduction.problem.source, jacobian, fast)


def fast_states(
    numerics: list[_Numeric], scales: np.ndarray, times: np.ndarray, rtol: float, atol: float
) -> np.ndarray | None:
    """States ``(scales, T, state)`` by :mod:`._fast`, systems side by side as in
    :func:`_reduction_flow`; ``None`` if a system did not finish."""
    parts = []
    for n in numerics:
        consts = np.array(n.consts, dtype=float)
        out = _fast.solve_scales(
            n.fast_rhs, n.y0.ravel(), consts, scales, times, rtol=rtol, atol=atol
        )
        if out is None:
            return None
        parts.append(out)
    return np.concatenate(parts, axis=2)


def _fast_solve(
    numerics: list[_Numeric], times: np.ndarray, rtol: float, atol: float
) -> np.ndarray | None:
    """One solve by :mod:`._fast`, from the second solve of the same systems on (the first
    is LSODA's: compiling costs more than one solve); ``None`` to leave it to LSODA."""
    for n in numerics:
        n.solves += 1
    if any(n.solves < 2 for n in numerics):
        return None
    states = fast_states(numerics, np.ones(1), times, rtol, atol)
    return None if states is None else states[0]


def _moment_flow(dynamics: ExpectedDynamics) -> _Flow:
    r"""$\tau\dot b=-\partial\mathcal L/\partial b$ on the live entries of ``b``, from $b(0)$."""
    alive = dynamics.alive

    def rhs(y: np.ndarray) -> np.ndarray:
        b = np.zeros(alive.shape)
        b[alive] = y
        return dynamics.flow(b)[alive]

    rows, cols = np.nonzero(alive)
    labels = [(str(dynamics.variables[r]), int(c)) for r, c in zip(rows, cols, strict=True)]
    y0 = dynamics.initial[alive].astype(float)
    return _Flow(y0, rhs, rhs, labels, dynamics.problem.source)


def _integrate_ode(
    flow: _Flow,
    t_max: float,
    *,
    n_points: int,
    rtol: float,
    atol: float,
    times: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Gradient flow by LSODA (:func:`~gdln.solution._ode.integrate`): times ``(T,)`` and
    states ``(state, T)``; the solver's stops become one :class:`GdlnError`."""
    times = np.linspace(0.0, t_max, n_points) if times is None else times
    fast = None if flow.fast is None else flow.fast(times, rtol, atol)
    if fast is not None:
        return times, fast.T
    problem = OdeProblem(flow.y0, flow.rhs_ode, flow.jacobian)
    try:
        try:
            states = integrate(problem, times, rtol=rtol, atol=atol)
        except SolverFailed:  # the Fortran driver refused: step from Python to find why
            states = integrate_ivp(problem, times, rtol=rtol, atol=atol)
    except SolverFailed as failed:
        raise GdlnError(
            f"{flow.source}: the ODE solver failed at t = {failed.t:.4g} tau, where "
            f"{flow.worst(failed.state)}: {failed.reason}"
        ) from None
    except Stop as stop:
        raise GdlnError(
            f"{flow.source}: the ODE {stop.reason} at t = {stop.t:.4g} tau, where "
            f"{flow.worst(stop.state)}; lower the initial value (--init) or t_max"
        ) from None
    return times, states.T


def _iterate_gd_map(
    flow: _Flow, t_max: float, lr: float, *, n_points: int, record: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    r"""Gradient descent $y \leftarrow y + \mathrm{lr}\,f(y)$: times ``(T,)``, states ``(state, T)``.

    ``round(t_max / lr)`` steps; about ``n_points`` of them are recorded, step 0 and the
    last included (or up to the last of the increasing steps ``record``, each of them
    recorded). A step that overflows is found by replaying from the last record.
    """
    if record is None:
        steps = round(t_max / lr)
        record = np.unique(np.linspace(0, steps, min(n_points, steps + 1)).round().astype(int))
    states_list, y, step = [], flow.y0.copy(), 0
    with np.errstate(all="ignore"):
        for target in record:
            good, good_step = y, step
            try:
                while step < target:
                    y = y + lr * flow.rhs(y)
                    step += 1
                finite = bool(np.all(np.isfinite(y)))
            except (OverflowError, ZeroDivisionError):
                finite = False
            if not finite:
                step, y = _first_bad_step(flow, lr, good, good_step)
                raise GdlnError(
                    f"{flow.source}: the gradient-descent map diverged at step {step} "
                    f"(t = {step * lr:.4g} tau, lr={lr}), where {flow.worst(y)}; lower lr or b0 (--b0)"
                )
            states_list.append(y.copy())
    return record * lr, np.array(states_list).T


def _first_bad_step(flow: _Flow, lr: float, y: np.ndarray, step: int) -> tuple[int, np.ndarray]:
    """Replay the map from a finite state to the first step that is not finite."""
    try:
        while np.all(np.isfinite(y)):
            y = y + lr * flow.rhs(y)
            step += 1
    except (OverflowError, ZeroDivisionError):
        step += 1
    return step, y


def _reduction_trajectory(
    reduction: Reduction, times: np.ndarray, states: np.ndarray, method: str, lr: Any
) -> Trajectory:
    """Every variable per system ``(T, modes)``, the loss and the per-context losses."""
    numerics = [_compiled(s) for s in reduction.systems]
    prepared = _prepared(reduction)
    probabilities = prepared.probabilities
    context_loss = prepared.context_constants[:, None] * np.ones(len(times))
    series: dict[str, np.ndarray] = {}
    splits = np.cumsum([len(n.free) * n.n_modes for n in numerics])[:-1]
    for k, (n, part) in enumerate(zip(numerics, np.split(states, splits), strict=True)):
        y = part.reshape(len(n.free), n.n_modes, len(times)).transpose(0, 2, 1)
        values = n.all_variables(y)
        context_loss = context_loss + n.context_losses(values)
        for v, arr in values.items():
            series[variable_key(str(v), k, len(numerics))] = np.asarray(arr)
    context_loss = floor_at_zero(context_loss, prepared.context_constants[:, None])
    series[CONTEXT_LOSS] = context_loss.T
    meta = _reduction_meta(reduction, method, lr)
    return Trajectory(t=times, loss=probabilities @ context_loss, series=series, meta=meta)


def _reduction_meta(reduction: Reduction, method: str, lr: Any) -> dict[str, Any]:
    """The ``meta`` of a trajectory solved from ``reduction``."""
    return {
        "source": reduction.problem.source,
        "params": {k: str(v) for k, v in reduction.problem.params.items()},
        "lump": reduction.lump,
        "method": method,
        "lr": lr,
        "time_unit": "tau",
        "modes": [list(s.modes) for s in reduction.systems],
        "context_labels": [c.label for c in reduction.problem.require_task().contexts],
    }


def _moment_trajectory(
    dynamics: ExpectedDynamics, times: np.ndarray, states: np.ndarray, method: str, lr: Any
) -> Trajectory:
    """Series per trained edge ``(T, modes)``, the expected loss and per-context losses."""
    bs = np.zeros((len(times), *dynamics.alive.shape))
    bs[:, dynamics.alive] = states.T
    context_loss = np.array([dynamics.context_losses(b) for b in bs])  # never below 0
    task = dynamics.problem.require_task()
    probabilities = np.array([float(c.probability) for c in task.contexts])
    series = {str(v): bs[:, i, :] for i, v in enumerate(dynamics.variables)}
    series[CONTEXT_LOSS] = context_loss
    meta = {
        "source": dynamics.problem.source,
        "params": {k: str(v) for k, v in dynamics.problem.params.items()},
        "route": "moments",
        "method": method,
        "lr": lr,
        "time_unit": "tau",
        "modes": list(range(dynamics.n_modes)),
        "context_labels": [c.label for c in task.contexts],
    }
    return Trajectory(t=times, loss=context_loss @ probabilities, series=series, meta=meta)
