r"""Numeric solutions of the reduced dynamics: the ODE and the exact gradient-descent map.

**Time convention (used everywhere in gdln).** Gradient flow is
$\tau\,\dot W = -\partial\mathcal{L}/\partial W$ (Eq. 2 of Saxe et al. 2022) with the loss
of Eq. (1), and time is measured in units of $\tau$ (so $\tau = 1$). Full-batch gradient
descent with learning rate ``lr`` is the Euler step of this flow with $dt = \mathrm{lr}$:
after ``n`` steps, $t/\tau = \mathrm{lr}\cdot n$ (one step is $1/\mathrm{lr}$ of a $\tau$).
From decoupled initial weights the reduced map
$B \leftarrow B + \mathrm{lr}\, f(B)$ is *exactly* what gradient descent on the full
network does, mode by mode.

**One path.** :func:`solve` and :func:`solve_batch` take the dynamics through one
protocol, ``numeric_flow()`` (a :class:`~gdln.reduction.NumericFlow`, from a
:class:`~gdln.Reduction` or an :class:`~gdln.ExpectedDynamics` alike), and integrate a
batch of initial states with one stepper of the table
:data:`gdln.solution.METHODS` (:mod:`gdln.solution._methods`): a single solve is a batch
of one, and a batch of initial scales is an array axis of the same path.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .._errors import DegenerateStartWarning, GdlnError
from ..reduction._numeric import NumericFlow
from ._bounds import check_solve_settings, check_times
from ._gd_map import iterate_gd_map
from ._methods import AUTO, steppers_for
from ._stepper import Stopped
from ._trajectory import Trajectory

if TYPE_CHECKING:
    from ..reduction._moments import ExpectedDynamics
    from ..reduction._system import Reduction

__all__ = ["check_solve_settings", "solve", "solve_batch"]


def solve(
    reduction: Reduction | ExpectedDynamics,
    *,
    t_max: float,
    lr: float | None = None,
    n_points: int = 201,
    times: npt.ArrayLike | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    method: str = AUTO,
) -> Trajectory:
    r"""Integrate the reduced dynamics from the reduction's initial values.

    Parameters
    ----------
    reduction
        From :func:`gdln.reduce`, or the expected dynamics of :func:`gdln.expected_dynamics`
        (the same ODE and GD map, evaluated without listing paths; its variables are
        recorded per trained edge as ``(T, modes)``): anything with ``numeric_flow()``.
    t_max
        Final time, in units of $\tau$.
    lr
        ``None``: solve the ODE with ``method``. A number: iterate the exact
        gradient-descent map with this learning rate (``round(t_max/lr)`` steps, at least
        1 and at most :class:`gdln.graphfile.Limits` ``steps``), under every lumping:
        variables that ``lump="full"`` eliminated through a conserved quantity (Eq. 15,
        which holds for gradient flow only) are iterated by the map itself, in the tied
        system before elimination (``meta["system"] == "tied"``; otherwise
        ``"reduced"``). The recorded variables are the same either way.
    n_points
        Number of recorded times: an int from 2 to :class:`gdln.graphfile.Limits`
        ``points``.
    times
        The times to record instead (units of $\tau$; ``n_points`` is then not used):
        increasing, from 0, the last at most ``t_max``; with ``lr``, each a whole number
        of steps $t/\mathrm{lr}$. :func:`gdln.compare` records the theory and the
        simulations at the same steps this way.
    rtol, atol
        Tolerances of the ODE stepper.
    method
        The ODE stepper, a name of :data:`gdln.solution.METHODS`: ``"lsoda"`` (Adams/BDF,
        the fastest for one system), ``"dop853"`` (explicit order 8, within 1e-10 of a
        tight solution where LSODA is about 1e-8 away, about 20 times slower for one
        system) or ``"auto"``, which for one system is ``"lsoda"``; recorded as
        ``meta["integrator"]``. Only for the ODE: with ``lr``, it must stay ``"auto"``.

    Raises
    ------
    GdlnError
        Before anything is computed, if ``t_max`` or ``lr`` is not a finite number > 0,
        ``n_points`` is out of range, or ``t_max/lr`` rounds to no step or to more steps
        than the limit (each message names the limit and its environment variable);
        if ``times`` is malformed or ``method`` unknown (or given with ``lr``); during the
        solve, if the solution overflows or becomes non-finite (naming the time or step,
        the variable and its value), or the ODE stepper fails.

    Warns
    -----
    DegenerateStartWarning
        The initial values are a fixed point of the dynamics (e.g. ``init=0``), so the
        trajectory stays flat.

    Returns
    -------
    Trajectory
        ``loss`` (Eq. 1); ``series`` holds every reduced variable as ``(T, modes)``
        and ``"context_loss"`` as ``(T, contexts)`` (per-context loss
        $\tfrac12\langle\lVert y-h\rVert^2\rangle_c$, labels in ``meta``); ``meta``
        says where the dynamics came from, ``"method"`` (``"ode"`` or ``"gd-map"``),
        and for the ODE ``"integrator"``.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (10) (the reduced flow), Eq. (15) (eliminated
    variables) and Eq. (1) (the loss).
    """
    t_max, lr = check_solve_settings(t_max, lr=lr, n_points=n_points)
    recorded = None if times is None else check_times(times, t_max, lr)
    if lr is not None and method != AUTO:
        raise GdlnError(
            f"method={method!r} chooses an ODE stepper; with lr={lr} the gradient-descent "
            "map is iterated (leave method='auto', or drop lr)"
        )
    steppers_for(method, 1)  # an unknown method is refused before any work
    flow = reduction.numeric_flow(gd_map=lr is not None)
    _warn_if_fixed_point(flow)
    unit = np.ones(1)
    meta: dict[str, Any] = {"method": "ode" if lr is None else "gd-map", "lr": lr}
    if lr is None:
        grid = np.linspace(0.0, t_max, n_points) if recorded is None else recorded
        states, notes = _integrate_ode(flow, grid, unit, method=method, rtol=rtol, atol=atol)
        meta |= notes
    else:
        record = None if recorded is None else np.rint(recorded / lr).astype(int)
        grid, states = _iterate_gd_map(flow, t_max, lr, n_points=n_points, record=record)
    (trajectory,) = _trajectories(flow, grid, states, unit, meta)
    return trajectory


def solve_batch(
    reduction: Reduction | ExpectedDynamics,
    scales: npt.ArrayLike,
    *,
    t_max: float,
    n_points: int = 201,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    method: str = AUTO,
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
    t_max, n_points, rtol, atol, method
        As for :func:`gdln.solve` (the ODE; each system's error is controlled on its own).

    Raises
    ------
    GdlnError
        For scales that are not positive and finite, or if the ODE overflows, turns
        non-finite or the stepper fails (naming the time, the scale, variable and value).

    Returns
    -------
    list of Trajectory
        One per scale, as :func:`gdln.solve` returns it, with ``meta["init_scale"]`` and
        ``meta["integrator"]`` (``"dop853-numpy"``, ``"dop853-numba"`` or ``"lsoda"``).
        Their arrays are views of one array per variable, scales on its last axis.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (10) and (15).
    """
    t_max, _ = check_solve_settings(t_max, n_points=n_points)
    flow = reduction.numeric_flow()
    values = _check_scales(flow, scales)
    steppers_for(method, len(values))
    times = np.linspace(0.0, t_max, n_points)
    states, notes = _integrate_ode(
        flow, times, values, method=method, rtol=rtol, atol=atol, batch=True
    )
    meta = {"method": "ode", "lr": None, **notes}
    return _trajectories(flow, times, states, values, meta, batch=True)


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
) -> tuple[np.ndarray, dict[str, str]]:
    r"""Gradient flow from ``scales[k]`` times the initial state (constants times
    ``scales[k]**2``), by the steppers that ``method`` names in turn: states
    ``(T, n, batch)`` and what ``meta`` records about the stepping. The last stepper's
    stop becomes one :class:`GdlnError` (naming the scale for a ``batch``)."""
    with np.errstate(over="ignore"):  # a scale too large is named by the stepper's stop
        y0 = flow.y0[:, None] * scales
        constants = flow.constants[:, None] * scales**2
    steppers = steppers_for(method, len(scales))
    notes: dict[str, str] = {}
    for stepper in steppers:
        try:
            states, integrator = stepper.integrate(flow, y0, constants, times, rtol=rtol, atol=atol)
        except Stopped as stopped:
            if stepper is steppers[-1]:
                raise GdlnError(_stop_message(flow, stopped, scales if batch else None)) from None
            notes["integrator_fallback"] = (
                f"{stepper.name} stopped: the ODE {stopped.reason} at t = {stopped.t:.4g} tau"
            )
            continue
        return states, {"integrator": integrator, **notes}
    raise AssertionError("no stepper")  # steppers_for names at least one


def _stop_message(flow: NumericFlow, stopped: Stopped, scales: np.ndarray | None) -> str:
    """One line: what stopped the ODE, when, where (variable, mode, and the scale of a
    batch) and what to lower."""
    where = flow.worst(stopped.state)
    if scales is not None:
        where += f" for scale {scales[stopped.member]:.4g}"
        advice = "lower the scale or t_max"
    else:
        advice = "lower the initial value (--init) or t_max"
    return f"{flow.source}: the ODE {stopped.reason} at t = {stopped.t:.4g} tau, where {where}; {advice}"


def _iterate_gd_map(
    flow: NumericFlow, t_max: float, lr: float, *, n_points: int, record: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~gdln.solution._gd_map.iterate_gd_map` (a name of its own here, so that a
    test can see whether a solve started)."""
    return iterate_gd_map(flow, t_max, lr, n_points=n_points, record=record)


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
            "start from a small nonzero value such as init=0.001",
            DegenerateStartWarning,
            stacklevel=3,
        )


def _trajectories(
    flow: NumericFlow,
    times: np.ndarray,
    states: np.ndarray,
    scales: np.ndarray,
    meta: dict[str, Any],
    *,
    batch: bool = False,
) -> list[Trajectory]:
    """One :class:`Trajectory` per member of ``states`` ``(T, n, batch)``."""
    recorded = flow.record(states, flow.constants[:, None] * scales**2)
    out = []
    for j, scale in enumerate(scales):
        series = {name: arr[..., j] for name, arr in recorded.series.items()}
        series["context_loss"] = recorded.context_loss[..., j]
        if not batch:  # one trajectory: its own contiguous arrays
            series = {name: np.ascontiguousarray(arr) for name, arr in series.items()}
        one = {**flow.meta, **meta}
        if batch:
            one["init_scale"] = float(scale)
        out.append(Trajectory(times, recorded.loss[:, j], series, one))
    return out
