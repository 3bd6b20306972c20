r"""What :func:`gdln.solve` solves: a problem's dynamics by its route, with its settings.

:func:`solve` is a door: it resolves its keywords against the problem's
:class:`~gdln.settings.Settings` once and passes that one value down. Below it the route
of a problem is chosen by the one rule of every command (:func:`route_of`,
:func:`dynamics_by_route`), and the numbers are computed by
:func:`~gdln.solution._solve.solve_model` or, on the matrix route,
:func:`~gdln.solution._full.full_solution`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy.typing as npt

from .._errors import GdlnError, NotDiagonalizableError, TooManyPathsError
from .._lazy import upstairs
from ..reduction._moments import ExpectedDynamics, expected
from ..reduction._reduce import derive
from ..reduction._system import Reduction
from ..settings._choices import ATOL, RTOL
from ..settings._declared import Settings
from ..settings._door import AT_THE_DOOR, door
from ..task._problem import Problem
from ..task._schedule import Schedule
from ..task._scheduled import SCHEDULE_TAKES, schedule_refusal
from ._bounds import check_solve_settings
from ._solve import solve_model
from ._trajectory import Trajectory

__all__ = [
    "RouteTaken",
    "dynamics_by_route",
    "route_of",
    "solve",
    "solve_resolved",
]


@door
def solve(
    model: Problem | Reduction | ExpectedDynamics,
    *,
    t_max: float | str | None = None,
    lr: float | str | None = None,
    dynamics: str | None = None,
    points: int | str | None = None,
    method: str | None = None,
    times: npt.ArrayLike | None = None,
    rtol: float = RTOL,
    atol: float = ATOL,
    route: str | None = None,
    lump: str | None = None,
    b0: Any = None,
    weight_decay: float | str | None = None,
    seed: int | str | None = None,
    weights: Mapping[Any, Any] | None = None,
    schedule: Schedule | None = None,
    resolved: Settings = AT_THE_DOOR,
) -> Trajectory:
    r"""Solve the dynamics of a problem: the reduced ODE, or its exact gradient-descent map.

    Every setting left ``None`` takes the problem's value (``problem.settings``: the
    graph file's ``solve:`` section over the declared defaults,
    :class:`gdln.settings.Settings`).

    Parameters
    ----------
    model
        A :class:`~gdln.Problem`, whose dynamics are obtained by ``route``; or what a
        route gave: a reduction from :func:`gdln.reduce`, or the expected dynamics of
        :func:`gdln.expected_dynamics` (the same ODE and GD map, evaluated without listing
        paths; its variables are recorded per trained edge as ``(T, modes)``).
    t_max
        Final time, in units of $\tau$ (default 10).
    lr
        The learning rate of the gradient-descent map (default 0.05).
    dynamics
        ``"flow"`` (default): the ODE, stepped by ``method``. ``"gd-map"``: iterate the
        exact gradient-descent map with learning rate ``lr`` (``round(t_max/lr)`` steps,
        at least 1 and at most :class:`gdln.graphfile.Limits` ``steps``), under every
        lumping: variables that ``lump="full"`` eliminated through a conserved quantity
        (Eq. 15, which holds for gradient flow only) are iterated by the map itself, in
        the tied system before elimination (``meta["system"] == "tied"``; otherwise
        ``"reduced"``). The recorded variables are the same either way.
    points
        Number of recorded times: an int from 2 to :class:`gdln.graphfile.Limits`
        ``points`` (default 201).
    method
        The ODE stepper (:data:`gdln.settings.METHODS`; default ``"auto"``):
        ``"lsoda"`` (Adams/BDF, the fastest for one system), ``"dop853"`` (explicit
        order 8, closer to a tight solution than LSODA and slower for one system, as
        ``benchmarks/bench_solve.py`` measures) or ``"auto"``, which for one system is
        ``"lsoda"`` (for a batch, :func:`gdln.solution.solve_batch`, DOP853 and
        LSODA where it stops); recorded as ``meta["ode_method"]``, the stepper that
        solved as ``meta["integrator"]``. Only for the flow: with
        ``dynamics="gd-map"`` a method other than ``"auto"`` is refused.
    times
        The times to record instead (units of $\tau$; ``points`` is then not used):
        increasing, from 0, the last at most ``t_max``; with the map, each a whole number
        of steps $t/\mathrm{lr}$. :func:`gdln.compare` records the theory and the
        simulations at the same steps this way.
    rtol, atol
        Tolerances of the ODE solver.
    route, lump, b0
        With a Problem: how its dynamics are obtained (:data:`gdln.settings.ROUTES`; the
        one rule of every command, :func:`route_of`: ``"auto"`` reduces, takes the moment
        route where the paths are too many to list and the full-matrix flow,
        Eqs. (3)-(4) from random weights whose singular values all equal ``b0``, where
        the statistics have no common bases; ``"matrix"`` asks for that flow), the
        lumping and $b(0)$.
    weight_decay
        With a Problem: the weight decay $\gamma$ (default: the problem's
        ``weight_decay`` setting, 0). The objective is Eq. (1) plus
        $\tfrac\gamma2\sum_e\lVert W_e\rVert_F^2$, so every reduced variable gains
        $-\gamma b$ in its flow and map (the recorded ``loss`` stays Eq. 1, without the
        penalty); ``lump="full"`` is then refused (:func:`gdln.reduce`). (An ``lr``
        given without ``dynamics`` keeps its earlier meaning, the map, with a warning.)
    seed
        With a Problem, on the matrix route from ``b0``: the seed of the random singular
        vectors of the start (default: the problem's ``seed`` setting).
    weights
        With a Problem: edge ``(u, v)`` -> its initial weight matrix $W_e(0)$, every
        edge of the graph, instead of a start from ``b0`` (with ``schedule``, every
        trained edge, also by name: ``"u->v"``). Any weights, with or without common
        bases, so the full-matrix flow or map of Eqs. (3)-(4) solves them (``route``
        ``"auto"`` or ``"matrix"``; each trained edge's singular values are recorded as
        ``"sv[u->v]"`` beside ``"W[u->v]"``); with ``schedule``, each phase by the first
        route that holds for it (:func:`gdln.schedule.run_schedule`).
        :func:`gdln.solve_from_weights` gives the λ-balanced closed form where the weights
        are λ-balanced.
    schedule
        With a Problem: follow this :class:`gdln.task.Schedule` (or the file's, with
        ``problem.schedule``) phase by phase, each phase from the previous one's end:
        every context's loss all along, the phases and their routes in
        ``meta["schedule"]``; :meth:`gdln.schedule.ScheduleResult.of` reads them and the
        measures (end losses, transfer, forgetting, savings) from the trajectory.
        ``t_max`` is then the schedule's.

    Raises
    ------
    GdlnError
        Before anything is computed, if a setting is malformed (``t_max`` or ``lr`` not a
        finite number > 0, ``points`` out of range, ``t_max/lr`` rounding to no step or to
        more steps than the limit: each message names the limit and its environment
        variable), if ``times`` is malformed; during the solve, if the solution overflows
        or becomes non-finite (naming the time or step, the variable and its value), or the
        ODE solver fails.

    Warns
    -----
    DegenerateStartWarning
        The initial values are a fixed point of the dynamics (e.g. ``b0=0``), so the
        trajectory stays flat.

    Returns
    -------
    Trajectory
        ``loss`` (Eq. 1); ``series`` holds every reduced variable as ``(T, modes)``
        and ``"context_loss"`` as ``(T, contexts)`` (per-context loss
        $\tfrac12\langle\lVert y-h\rVert^2\rangle_c$, labels in ``meta``);
        ``meta["route"]`` names the route taken (``"quotient"``, ``"contexts"``,
        ``"moments"`` or ``"matrix"``) and ``meta["route_reason"]`` why, where auto fell
        back, or what the quotient is; ``meta["method"]`` which
        dynamics were solved (``"ode"`` or ``"gd-map"``) and, for the ODE,
        ``meta["integrator"]`` which stepper solved them.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (10) (the reduced flow), Eq. (15) (eliminated
    variables) and Eq. (1) (the loss).
    """
    how: dict[str, Any] = {"times": times, "weights": weights, "rtol": rtol, "atol": atol}
    if schedule is not None:
        return _scheduled(model, schedule, resolved, **how)
    chosen = {"route", "lump", "b0", "weight_decay", "seed"} & resolved.called
    if not isinstance(model, Problem) and (chosen or weights is not None):
        raise GdlnError(
            "solve: route, lump, b0, weight_decay, seed and weights choose how a Problem's "
            "dynamics are obtained; this model was obtained already"
        )
    if weights is not None and (resolved.route not in ("auto", "matrix") or "b0" in chosen):
        given = "b0" if "b0" in chosen else f"route {resolved.route!r}"
        raise GdlnError(
            f"solve: weights and {given}: a start from given weights is solved by the "
            "full-matrix flow (route auto or matrix), a start from b0 by any route"
        )
    if resolved.dynamics == "gd-map" and "method" not in resolved.called:
        resolved = dataclasses.replace(resolved, method="auto")  # the file's is the flow's
    return solve_resolved(model, resolved, **how)


def _scheduled(model: Any, schedule: Schedule, settings: Settings, **how: Any) -> Trajectory:
    """:func:`solve` with ``schedule=``: the schedule room's engine, looked up on use (that
    room stands above this one)."""
    if not isinstance(model, Problem):
        raise GdlnError("solve: schedule= follows a Problem's contexts; pass the problem")
    refused = sorted(settings.called - set(SCHEDULE_TAKES["solve"]))  # t_max: its phases'
    if refused:
        raise GdlnError(schedule_refusal("solve", refused[0]))
    solved = upstairs("gdln.schedule._engine:schedule_solved")
    return solved(model, schedule, settings, **how).trajectory


def solve_resolved(
    model: Problem | Reduction | ExpectedDynamics,
    settings: Settings,
    *,
    times: npt.ArrayLike | None = None,
    weights: Mapping[Any, Any] | None = None,
    rtol: float = RTOL,
    atol: float = ATOL,
) -> Trajectory:
    """:func:`solve` on the settings resolved at its door: a Problem's route by the one
    rule (:func:`route_of`), then the reduced flow or map (``solve_model``), or the full
    matrices on the matrix route and from given ``weights``; ``meta`` says which route was
    taken and why."""
    step = settings.lr if settings.dynamics == "gd-map" else None
    check_solve_settings(settings.t_max, lr=step, n_points=settings.points)  # before reducing
    taken: RouteTaken | None = None
    if isinstance(model, Problem):
        taken = route_of(model, settings) if weights is None else GIVEN_WEIGHTS
        if taken.model is None:
            from ._full import full_solution

            full = full_solution(model, settings, weights, times=times)
            return dataclasses.replace(full, meta={**full.meta, **taken.meta()})
        model = taken.model
    trajectory = solve_model(model, settings, times=times, rtol=rtol, atol=atol)
    if taken is None:
        return trajectory
    return dataclasses.replace(trajectory, meta={**trajectory.meta, **taken.meta()})


def dynamics_by_route(problem: Problem, settings: Settings) -> Reduction | ExpectedDynamics:
    """The dynamics of ``problem`` by its resolved route (:data:`gdln.settings.ROUTES`).

    The one rule of :func:`solve`, ``gdln solve`` and :func:`gdln.compare`: ``auto``
    reduces (:func:`gdln.reduce`, the quotient where it applies) unless the paths are too
    many to list, then takes the moment route (:func:`gdln.expected_dynamics`), which
    gives the same expected loss and dynamics without listing paths.

    Parameters
    ----------
    problem
        A loaded problem.
    settings
        Its settings, resolved (``problem.settings``, or a door's value): ``route``,
        ``lump``, ``b0`` and ``weight_decay`` are read.

    Returns
    -------
    Reduction or ExpectedDynamics
        The reduced system (symbolic routes) or the expected dynamics (moment route).

    Raises
    ------
    GdlnError
        ``route="matrix"``, which has no reduced dynamics (:func:`gdln.solve` integrates
        the full matrices).
    """
    if settings.route == "moments":
        return expected(problem, settings)
    if settings.route == "matrix":
        raise GdlnError(
            f"{problem.source}: route 'matrix' has no reduced dynamics; gdln.solve "
            "integrates the full matrices"
        )
    try:
        return derive(problem, settings)
    except TooManyPathsError:
        if settings.route != "auto":
            raise
        return expected(problem, settings)


@dataclass(frozen=True)
class RouteTaken:
    """The route the one rule of every command takes for a problem (:func:`route_of`).

    Parameters
    ----------
    name
        Its declared name (:data:`gdln.settings.ROUTES`): ``"quotient"``, ``"contexts"``,
        ``"moments"`` or ``"matrix"``.
    model
        The dynamics it obtained (a reduction or the expected dynamics), ``None`` on the
        matrix route (the full matrices of Eqs. 3-4).
    reason
        Why ``auto`` took it where that is not plain (no common bases, too many paths, no
        symmetry quotient), or what the quotient is; ``""`` otherwise.
    """

    name: str
    model: Reduction | ExpectedDynamics | None
    reason: str = ""

    def meta(self) -> dict[str, str]:
        """The trajectory's ``meta`` entries for the route: ``route`` and ``route_reason``.

        Returns
        -------
        dict
            ``{"route": name}``, with ``"route_reason"`` where there is one.
        """
        return {"route": self.name, **({"route_reason": self.reason} if self.reason else {})}


GIVEN_WEIGHTS = RouteTaken("matrix", None, "weights given: the full-matrix flow (Eqs. 3-4)")
"""The route of a start from given weights, which need no common bases."""


def route_of(problem: Problem, settings: Settings) -> RouteTaken:
    """The one route rule of ``solve`` and ``compare``: the exact reduction where it exists.

    ``auto`` reduces (:func:`gdln.reduce`: the symmetry quotient where it holds, else
    every context); where the co-active paths are too many to list it takes the moment
    route (the same dynamics, :func:`gdln.expected_dynamics`), and where the statistics
    have no common bases (Eqs. 7-8 of Saxe et al. 2022) the full-matrix flow of
    Eqs. (3)-(4), which needs none. A route asked for by name is taken or refused.

    Parameters
    ----------
    problem
        A loaded problem.
    settings
        Its settings as resolved at the door (``route``, ``lump``, ``b0``, ``weight_decay``).

    Returns
    -------
    RouteTaken
        The route's declared name, its dynamics (``None`` for the full matrices) and why.

    Raises
    ------
    NotDiagonalizableError
        A reduced route asked for by name, and no common bases.
    TooManyPathsError
        A symbolic route asked for by name, and too many paths to list.
    """
    if settings.route == "matrix":
        return RouteTaken("matrix", None)
    try:
        model = dynamics_by_route(problem, settings)
    except NotDiagonalizableError as err:
        if settings.route != "auto":
            raise
        return RouteTaken(
            "matrix",
            None,
            f"auto: no common bases (Eqs. 7-8; residual {err.residual:.2g}), so the "
            "full-matrix flow (Eqs. 3-4)",
        )
    if isinstance(model, ExpectedDynamics):
        reason = "" if settings.route == "moments" else "auto: too many paths to list"
        return RouteTaken("moments", model, reason)
    return RouteTaken(model.route_name, model, model.route)
