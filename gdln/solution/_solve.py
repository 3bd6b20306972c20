r"""Numeric solutions of the reduced dynamics: the ODE and the exact gradient-descent map.

**Time convention (used everywhere in gdln).** Gradient flow is
$\tau\,\dot W = -\partial\mathcal{L}/\partial W$ (Eq. 2 of Saxe et al. 2022) with the loss
of Eq. (1), and time is measured in units of $\tau$ (so $\tau = 1$). Full-batch gradient
descent with learning rate ``lr`` is the Euler step of this flow with $dt = \mathrm{lr}$:
after ``n`` steps, $t/\tau = \mathrm{lr}\cdot n$ (one step is $1/\mathrm{lr}$ of a $\tau$).
From decoupled initial weights the reduced map
$B \leftarrow B + \mathrm{lr}\, f(B)$ is *exactly* what gradient descent on the full
network does, mode by mode.

**One path.** :func:`solve_model` (the engine of :func:`gdln.solve`, which resolves the
settings and the route) and :func:`solve_batch` take the dynamics through one protocol,
``numeric_flow()`` (a :class:`~gdln.reduction.NumericFlow`, from a
:class:`~gdln.Reduction` or an :class:`~gdln.ExpectedDynamics` alike), and integrate a
batch of initial states with the steppers that ``method`` names
(:data:`gdln.settings.METHODS`; the steppers by name in :mod:`gdln.solution._methods`):
a single solve is a batch of one, and a batch of initial scales is an array axis of the
same path.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .._bounded._limits import WorkMeter, metering
from .._errors import DegenerateStartWarning, GdlnError
from ..reduction._numeric import NumericFlow
from ..settings._choices import ATOL, RTOL
from ..settings._declared import Settings
from ..settings._door import AT_THE_DOOR, door
from ._bounds import check_solve_settings, check_times
from ._gd_map import iterate_gd_map
from ._methods import AUTO, steppers_for
from ._recording import Recording
from ._series import CONTEXT_LOSS, VARIABLE_EDGES, variable_key
from ._status import Status, Stop
from ._stepper import Stopped, worst_entry
from ._trajectory import Trajectory

if TYPE_CHECKING:
    from ..reduction._moments import ExpectedDynamics
    from ..reduction._system import Reduction

__all__ = ["integrate_flow", "solve_batch", "solve_model"]


def solve_model(
    reduction: Reduction | ExpectedDynamics,
    settings: Settings,
    *,
    times: npt.ArrayLike | None,
    rtol: float,
    atol: float,
) -> Trajectory:
    r"""Integrate (``dynamics`` ``"flow"``) or iterate the dynamics of a reduction from its
    start, by the settings resolved at the door (``t_max``, ``lr``, ``dynamics``,
    ``points``, ``method``).

    The engine of :func:`gdln.solve` (whose docstring says what each setting means), on
    anything with ``numeric_flow()``: the ODE by the steppers that ``method`` names
    (:func:`~gdln.solution._methods.steppers_for`), recorded as ``meta["integrator"]``
    (and ``meta["ode_method"]``, the name asked for), or the exact gradient-descent map
    with learning rate ``lr``, where ``method`` must be ``"auto"``.

    Raises
    ------
    GdlnError
        A malformed setting or ``times``, an unknown ``method`` or one given with ``lr``;
        a solution that overflows or turns non-finite, or a stepper that fails.
    """
    step = settings.lr if settings.dynamics == "gd-map" else None
    points, method = settings.points, settings.method
    t_max, lr = check_solve_settings(settings.t_max, lr=step, n_points=points)
    recorded = None if times is None else check_times(times, t_max, lr)
    if lr is not None and method != AUTO:
        raise GdlnError(
            f"method (--method): {method!r} chooses an ODE stepper, but dynamics 'gd-map' "
            f"iterates the gradient-descent map (lr={lr}); leave method 'auto' or solve the "
            "flow"
        )
    steppers_for(method, 1)  # an unknown method is refused before any work
    recording = Recording(points=points) if recorded is None else Recording(times=tuple(recorded))
    flow = reduction.numeric_flow(gd_map=lr is not None)
    _warn_if_fixed_point(flow)
    unit = np.ones(1)
    meta: dict[str, Any] = {"method": "ode" if lr is None else "gd-map", "lr": lr}
    status = Status()
    if lr is None:
        grid = recording.times_of(t_max)
        states, notes, status = _integrate_ode(
            flow, grid, unit, method=method, rtol=rtol, atol=atol
        )
        meta |= notes | {"ode_method": method, "rtol": rtol, "atol": atol}
    else:
        meter = WorkMeter(
            f"{flow.source}: the gradient-descent map",
            horizon=t_max,
            advice="raise lr or lower t_max",
        )
        record = recording.steps_of(round(t_max / lr), lr=lr)
        with metering(meter):
            grid, states = _iterate_gd_map(flow, lr, record=record)
    (trajectory,) = _trajectories(flow, grid, states, unit, meta, status, recording)
    return trajectory


@door
def solve_batch(
    reduction: Reduction | ExpectedDynamics,
    scales: npt.ArrayLike,
    *,
    t_max: float | str | None = None,
    points: int | str | None = None,
    rtol: float = RTOL,
    atol: float = ATOL,
    method: str | None = None,
    resolved: Settings = AT_THE_DOOR,
) -> list[Trajectory]:
    r"""Solve the reduced ODE from many initial scales in one call.

    Trajectory ``k`` starts from ``scales[k]`` times the reduction's initial values, as if
    :func:`gdln.reduce` had been given initial values ``scales[k]`` times as large:
    scaling every initial value by $\lambda$ changes neither the equations nor the
    lumping, and the constants $C$ of Eq. (15) of Saxe et al. 2022, values of conserved
    quadratic forms, scale as $\lambda^2$. The scales are the batch axis of the path
    :func:`gdln.solve` takes; with ``method="auto"`` a batch of two or more is stepped by
    DOP853, every member with its own step control as if solved alone (numpy across the
    batch; with numba installed, the ``fast`` extra, numba compiles the right-hand side
    from 10 000 scales on), and by LSODA where DOP853 stops (a stiff system, or a value
    that is not finite; ``meta["integrator_fallback"]`` says why). A batch of one is
    solved as :func:`gdln.solve` solves it, to the last bit.

    Parameters
    ----------
    reduction
        From :func:`gdln.reduce` (or anything with ``numeric_flow()``).
    scales
        One-dimensional, positive and finite.
    t_max, points, rtol, atol, method
        As for :func:`gdln.solve` (the ODE; each system's error is controlled on its own):
        a setting left ``None`` takes the problem's value (``reduction.problem.settings``,
        :class:`gdln.settings.Settings`).

    Raises
    ------
    GdlnError
        For a malformed setting (:class:`gdln.settings.SettingError`, naming it), scales
        that are not positive and finite, or if the ODE overflows, turns non-finite or the
        stepper fails (naming the time, the scale, variable and value).

    Returns
    -------
    list of Trajectory
        One per scale, as :func:`gdln.solve` returns it, with ``meta["init_scale"]`` and
        ``meta["integrator"]`` (``"dop853-numpy"``, ``"dop853-numba"`` or ``"lsoda"``;
        ``meta["ode_method"]`` is the method asked for).
        Their arrays are views of one array per variable, scales on its last axis.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (10) and (15).
    """
    settings = resolved
    t_max, _ = check_solve_settings(settings.t_max, n_points=settings.points)
    flow = reduction.numeric_flow()
    values = _check_scales(flow, scales)
    recording = Recording(points=settings.points)
    times = recording.times_of(t_max)
    states, notes, status = _integrate_ode(
        flow, times, values, method=settings.method, rtol=rtol, atol=atol, batch=True
    )
    meta = {"method": "ode", "lr": None, **notes, "ode_method": settings.method}
    return _trajectories(flow, times, states, values, meta, status, recording, batch=True)


def integrate_flow(
    flow: NumericFlow, times: np.ndarray, *, method: str, rtol: float, atol: float
) -> tuple[np.ndarray, dict[str, str]]:
    r"""Gradient flow $\tau\dot y = f(y)$ from ``flow.y0`` at ``times`` (``times[0]`` the start).

    The stepping of :func:`solve_model` on one system, for a caller that sets the start
    itself (a phase of a schedule starts where the previous one ended: :mod:`gdln.schedule`
    restarts the stepper at every boundary, never stepping across a jump of the data).

    Parameters
    ----------
    flow
        The dynamics, with the start in ``y0``.
    times
        Increasing times from the start.
    method, rtol, atol
        As for :func:`gdln.solve`.

    Returns
    -------
    tuple
        States ``(T, n)`` and what ``meta`` records of the stepping (``integrator``, and
        ``integrator_fallback`` where one stepper gave way to another).

    Raises
    ------
    GdlnError
        The ODE overflowed, turned non-finite or the stepper failed (naming the time and
        the variable), or ``method`` is unknown.
    """
    states, notes, _ = _integrate_ode(  # a stepper's fallback is in the notes too
        flow, np.asarray(times, dtype=float), np.ones(1), method=method, rtol=rtol, atol=atol
    )
    return states[:, :, 0], notes


def _check_scales(flow: NumericFlow, scales: npt.ArrayLike) -> np.ndarray:
    try:
        values = np.asarray(scales, dtype=float)
    except (TypeError, ValueError):
        raise GdlnError(f"{flow.source}: scales must be numbers") from None
    bad = values[~(np.isfinite(values) & (values > 0))] if values.ndim == 1 else values
    if values.ndim != 1 or len(values) == 0 or len(bad):
        raise GdlnError(
            f"{flow.source}: scales must be a non-empty 1-D array of positive "
            f"finite numbers, got {bad.ravel()[:3].tolist()} of shape {values.shape}"
        )
    return values


def _integrate_ode(
    flow: NumericFlow,
    times: np.ndarray,
    scales: np.ndarray,
    *,
    method: str,
    rtol: float,
    atol: float,
    batch: bool = False,
) -> tuple[np.ndarray, dict[str, str], Status]:
    r"""Gradient flow from ``scales[k]`` times the initial state (constants times
    ``scales[k]**2``), by the steppers that ``method`` names in turn: states
    ``(T, n, batch)``, what ``meta`` records about the stepping and the status (the
    steppers that stopped before one completed). The last stepper's stop becomes one
    :class:`GdlnError` (naming the scale for a ``batch``)."""
    with np.errstate(over="ignore"):  # a scale too large is named by the stepper's stop
        y0 = flow.y0[:, None] * scales
        constants = flow.constants[:, None] * scales**2
    steppers = steppers_for(method, len(scales))
    notes: dict[str, str] = {}
    stops: list[Stop] = []
    meter = WorkMeter(f"{flow.source}: the ODE", horizon=times[-1], advice="lower b0 or t_max")
    for stepper in steppers:
        try:
            with metering(meter):
                states, integrator = stepper.integrate(
                    flow, y0, constants, times, rtol=rtol, atol=atol
                )
        except Stopped as stopped:
            if stepper is steppers[-1]:
                raise GdlnError(_stop_message(flow, stopped, scales if batch else None)) from None
            stops.append(stopped.stop(stepper.name))
            notes["integrator_fallback"] = stops[-1].describe()
            continue
        return states, {"integrator": integrator, **notes}, Status(stops=tuple(stops))
    raise AssertionError("no stepper")  # steppers_for names at least one


def _stop_message(flow: NumericFlow, stopped: Stopped, scales: np.ndarray | None) -> str:
    """One line: what stopped the ODE, when, where (variable, mode, and the scale of a
    batch) and what to lower."""
    where = worst_entry(flow, stopped.state)
    if scales is not None:
        where += f" for scale {scales[stopped.member]:.4g}"
        advice = "lower the scale or t_max"
    else:
        advice = "lower b0 (--b0) or t_max"
    return f"{flow.source}: the ODE {stopped.reason} at t = {stopped.t:.4g} tau, where {where}; {advice}"


def _iterate_gd_map(
    flow: NumericFlow, lr: float, *, record: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~gdln.solution._gd_map.iterate_gd_map` (a name of its own here, so that a
    test can see whether a solve started)."""
    return iterate_gd_map(flow, lr, record=record)


def _warn_if_fixed_point(flow: NumericFlow) -> None:
    r"""Warn when $f(y_0) = 0$: the start is a fixed point and the solution stays flat.

    This is what $b(0) = 0$ gives (every path product and every gradient of Eq. (10) of
    Saxe et al. 2022 vanish on paths of two or more trained edges).
    """
    if flow.y0.size == 0:
        return
    with np.errstate(all="ignore"):
        try:
            rate = flow.rhs(flow.y0.copy())
        except (ArithmeticError, ValueError):
            return
    if np.all(rate == 0):
        shown = np.unique(flow.y0)
        start = f"b(0) = {shown[0]:g}" if len(shown) == 1 else "the initial values"
        warnings.warn(
            f"{flow.source}: {start} is a fixed point of the dynamics: every variable's "
            "rate of change is 0 there, so nothing will change (the loss stays flat); "
            "start from a small nonzero value such as b0=0.001",
            DegenerateStartWarning,
            stacklevel=3,
        )


def _trajectories(
    flow: NumericFlow,
    times: np.ndarray,
    states: np.ndarray,
    scales: np.ndarray,
    meta: dict[str, Any],
    status: Status,
    recording: Recording,
    *,
    batch: bool = False,
) -> list[Trajectory]:
    """One :class:`Trajectory` per member of ``states`` ``(T, n, batch)``, each with the
    run's ``status`` and ``recording``."""
    recorded = flow.record(states, flow.constants[:, None] * scales**2)
    out = []
    for j, scale in enumerate(scales):
        series = {
            variable_key(name, system, flow.systems): arr[..., j]
            for (name, system), arr in recorded.series.items()
        }
        series[CONTEXT_LOSS] = recorded.context_loss[..., j]
        if not batch:  # one trajectory: its own contiguous arrays
            series = {name: np.ascontiguousarray(arr) for name, arr in series.items()}
        one = {**flow.meta, **meta, VARIABLE_EDGES: {k: list(v) for k, v in flow.edges.items()}}
        if batch:
            one["init_scale"] = float(scale)
        trajectory = Trajectory(
            times, recorded.loss[:, j], series, one, status=status, recording=recording
        )
        out.append(trajectory)
    return out
