r"""The time scales of learning from small initialisation, for any graph.

From initial weights of scale $u_0\to0$ a gated deep linear network learns in stages: long
plateaus, then fast transitions in which pathways (or singular modes) become active one at
a time. :func:`timescales` reports the stages in order: what becomes active, when (the
leading order in $u_0$ and its formula), the loss on the next plateau and the map each
active pathway computes there.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from .._edge import edge_name
from .._errors import GdlnError, NotDiagonalizableError, shorten
from .._runtime._blas import one_blas_thread
from ..reduction._quotient import QUOTIENT_ROUTE
from ..reduction._reduce import derive
from ..reduction._system import Reduction
from ..settings._choices import ELIMINATING
from ..settings._declared import Settings
from ..settings._door import AT_THE_DOOR, door
from ..task._problem import Problem
from ._aligned import (
    ModeStage,
    edge_bases,
    edge_values,
    final_signs,
    mode_networks,
    mode_stages,
    path_maps,
    path_name,
    tying_lumpings,
)
from ._ode import BUDGET, mode_trajectory, ode_half_time
from ._result import Stage, Timescales, tidy_loss

__all__ = ["timescales"]

ALIGNED_ASSUMPTIONS = (
    "leading order as u0 -> 0 from b(0) = u0 on every edge (a decoupled start, Eq. 9), "
    "with every other direction also present at order u0, as from small random weights; "
    "O(1) corrections to the times are left out",
    "a pathway escaping through two small edges takes ln(1/u0)/rate; through m >= 3 small "
    "edges a time proportional to u0^-(m-2) (the blow-up time of its flow)",
    "on each plateau the active variables sit at the fixed point of the flow restricted to "
    "them (the constrained optimum); the residual each small pathway sees is recomputed there",
    "ODE half: the exact reduced ODE (Eq. 10) from b(0) = u0, first time the maps of the "
    "pathways a stage completes reach half their plateau values",
)


@door
@one_blas_thread()
def timescales(
    problem: Problem,
    *,
    b0: Any = None,
    route: str | None = None,
    lump: str | None = None,
    ode: bool = True,
    resolved: Settings = AT_THE_DOOR,
) -> Timescales:
    r"""The stages of learning from small initial weights: order, times, plateaus, maps.

    Every setting left ``None`` takes the problem's value (``problem.settings``).

    Parameters
    ----------
    problem
        A loaded graph file with a task.
    b0
        The initial scale $u_0$ of every reduced variable, $0 < u_0 < 1$ (a number or an
        expression such as ``"1/1000"``; default: the problem's ``b0`` setting).
    route
        The route of every command (:data:`gdln.settings.ROUTES`): ``"quotient"`` or
        ``"contexts"`` take the *aligned* analysis, the leading order of the exact reduced
        ODE (Eq. 10) derived by that route, mode by mode, for statistics with common
        bases; ``"matrix"`` takes the *asymptotic* analysis, rank-one stages from the top
        singular direction of each inactive pathway's residual correlation, for any
        statistics (:mod:`gdln.stages._asymptotic`); ``"auto"`` (default): aligned when
        :func:`gdln.reduce` finds common bases, else asymptotic.
    lump
        The lumping of the reduction on the aligned route: ``"symmetry"`` (the default:
        edges tied only where the graph's symmetry ties them, e.g. routing's $M$ input
        edges), ``"none"`` (one variable per edge: every direction a generic start has) or
        ``"balanced"`` (fewest variables, but the edges of one pathway tied together, so
        that a product cannot change sign). All are exact from $b_e(0) = u_0$.
    ode
        On the aligned route, also solve the exact reduced ODE from $b_e(0) = u_0$ for
        each stage's time to half-completion.

    Returns
    -------
    Timescales
        The stages in order, with the route and its assumptions.

    Raises
    ------
    GdlnError
        If ``b0`` is not a number in $(0, 1)$, ``route`` or ``lump`` is unknown or
        unsupported (``"moments"``, ``"full"``), an aligned route is asked for and the
        statistics have no common bases, or the problem's ``weight_decay`` is not 0 (the
        escape times and the constrained optima assume no penalty).

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (10), (21) and (44)-(53); Zhang, Latham &
    Saxe (2024), *Understanding unimodal bias in multimodal deep linear networks*.

    Examples
    --------
    >>> import gdln
    >>> problem = gdln.load("graphs/late_fusion.yaml", params={"k": "2", "rho": "1/2"})
    >>> result = gdln.timescales(problem, b0=1e-6, ode=False)
    >>> [round(r, 3) for r in result.ratios()]
    [1.0, 5.0]
    """
    return stages_of(problem, resolved, ode=ode)


def stages_of(problem: Problem, settings: Settings, *, ode: bool = True) -> Timescales:
    """The stages of learning by the settings resolved at a door (``b0``, ``route``,
    ``lump``, and ``weight_decay``, which must be 0): the body of :func:`timescales`."""
    route, lump = settings.route, settings.lump
    if settings.weight_decay:
        raise GdlnError(
            f"{problem.source}: weight_decay {settings.weight_decay:g}: timescales assumes no "
            "weight decay (its escape times and constrained optima are those of gamma = 0); "
            "use gdln solve --weight-decay for the dynamics"
        )
    if route == "moments":
        raise GdlnError(
            f"{problem.source}: route 'moments' lists no pathways; timescales takes auto, "
            "quotient, contexts (aligned) or matrix (asymptotic)"
        )
    if lump in ELIMINATING:
        raise GdlnError(f"lump={lump!r}: timescales takes {tying_lumpings()}")
    u0 = initial_scale(problem, settings)
    if route == "matrix":
        from ._asymptotic import asymptotic_timescales

        return asymptotic_timescales(problem, u0)
    try:
        reduction = derive(problem, dataclasses.replace(settings, b0=u0))
    except NotDiagonalizableError as err:
        if route != "auto":
            raise
        from ._asymptotic import asymptotic_timescales

        reason = (
            f"auto: no common bases (Eqs. 7-8; residual {err.residual:.2g}), so the "
            "asymptotic stages of the full-matrix statistics"
        )
        return asymptotic_timescales(problem, u0, reason=reason)
    return aligned_timescales(reduction, u0, ode=ode)


def initial_scale(problem: Problem, settings: Settings) -> float:
    """$u_0$ from the resolved ``b0`` setting; refused unless one number in (0, 1)."""
    b0 = settings.b0
    try:
        value = float(b0)
    except (TypeError, ValueError) as err:
        raise GdlnError(
            f"{problem.source}: b0 {shorten(b0)}: expected one number (the initial scale u0)"
        ) from err
    if not (0 < value < 1 and math.isfinite(value)):
        raise GdlnError(
            f"{problem.source}: b0 {shorten(b0)}: the initial scale u0 must be between 0 and 1"
        )
    return value


@one_blas_thread()
def aligned_timescales(reduction: Reduction, u0: float, *, ode: bool = True) -> Timescales:
    """The aligned route on a reduction (see :mod:`gdln.stages._aligned`)."""
    source = reduction.problem.source
    networks = mode_networks(reduction)
    per_mode = [mode_stages(net, source=source) for net in networks]
    signs: dict[int, np.ndarray] = {}
    for i, (net, stages_i) in enumerate(zip(networks, per_mode, strict=True)):
        if all(s.realized for s in stages_i):
            continue
        # +u0 everywhere cannot change a product's sign: start from the final signs instead
        flipped = final_signs(stages_i, len(net.names))
        again = mode_stages(net, source=source, signs=flipped)
        if all(s.realized for s in again) and len(again) == len(stages_i):
            per_mode[i], signs[id(net)] = again, flipped
    groups = _merge([s for stages in per_mode for s in stages], u0)
    bases = edge_bases(reduction)
    solutions = _solutions(networks, groups, u0, signs) if ode else {}
    constant = float(reduction.constant)
    plateaus = [np.zeros(len(net.names)) for net in networks]
    index = {id(net): i for i, net in enumerate(networks)}
    stages = []
    previous_ode = 0.0
    for group in groups:
        for s in group:
            plateaus[index[id(s.network)]] = s.plateau
        loss = constant + sum(net.loss(x) for net, x in zip(networks, plateaus, strict=True))
        maps = {} if bases is None else path_maps(reduction, edge_values(networks, plateaus), bases)
        ode_time = None
        if solutions:
            parts = [(s, solutions[id(s.network)]) for s in group]
            if all(s.realized for s in group):
                ode_time = ode_half_time(parts, previous_ode)
            previous_ode = ode_time if ode_time is not None else previous_ode
        first = group[0]
        stages.append(
            Stage(
                active=tuple(
                    f"{s.network.names[i]}[{s.network.mode}]" for s in group for i in s.escaping
                ),
                pathways=tuple(
                    f"{path_name(s.network.paths[i].path)}[{s.network.mode}]"
                    for s in group
                    for i in s.new_paths
                ),
                time=first.time.value(u0),
                time_formula=first.time.expression(),
                loss=tidy_loss(float(loss), constant),
                maps=maps,
                mechanism=first.mechanism if all(s.realized for s in group) else "generic only",
                modes=tuple(sorted({s.network.mode for s in group})),
                ode_time=ode_time,
                holds_for=first.time.holds_for(),
            )
        )
    assumptions: tuple[str, ...] = ALIGNED_ASSUMPTIONS + _stopped(networks, solutions)
    if signs:
        flipped_names = [
            f"{net.names[i]}[{net.mode}] ({', '.join(edge_name(e) for e in net.edges[i])})"
            for net in networks
            if id(net) in signs
            for i in np.flatnonzero(signs[id(net)] < 0)
        ]
        assumptions += (
            "from b(0) = +u0 on every edge the exact reduced ODE could not change the sign "
            "of a product that must change sign; for those modes the leading order and the "
            "ODE both start at b(0) = -u0 on "
            + ", ".join(flipped_names)
            + " (the signs of the final weights; an escape through two small edges does not "
            "depend on the signs, the blow-up time of a deeper one does)",
        )
    if reduction.route.startswith(QUOTIENT_ROUTE):
        assumptions += (
            f"derived on the {reduction.route.split(';')[0]}: the maps listed are those of "
            "the representative context's pathways; every pathway of one orbit learns the "
            "same map at the same time (route contexts lists them all)",
        )
    pinned = [st.pathways or st.active for st in stages if st.mechanism == "generic only"]
    if pinned:
        names = ", ".join(n for names in pinned for n in names)
        assumptions += (
            "stages marked 'generic only' happen from small random weights but not in the "
            "exact reduced ODE from b(0) = +u0, whose symmetric start cannot change the sign "
            f"of a product that must change sign: {names} (no ODE half time)",
        )
    return Timescales(
        source=source,
        u0=u0,
        route=reduction.route_name,
        stages=tuple(stages),
        assumptions=assumptions,
        initial_loss=constant,
        analysis="aligned",
        route_reason=reduction.route,
    )


def _merge(stages: list[ModeStage], u0: float) -> list[list[ModeStage]]:
    """Stages sorted by time; stages of different modes with equal times are one stage."""
    ordered = sorted(stages, key=lambda s: s.time.value(u0))
    groups: list[list[ModeStage]] = []
    for s in ordered:
        if (
            groups
            and groups[-1][0].time.close_to(s.time)
            and all(g.network is not s.network for g in groups[-1])
        ):
            groups[-1].append(s)
        else:
            groups.append([s])
    return groups


def _solutions(
    networks: list, groups: list[list[ModeStage]], u0: float, signs: dict[int, np.ndarray]
) -> dict[int, Any]:
    """The reduced ODE of every mode with a stage, until its last stage is done."""
    last = max((g[0].time.value(u0) for g in groups), default=0.0)
    t_end = 3.0 * last + 50.0  # a bound only: each mode stops when its last stage is done
    out: dict[int, Any] = {}
    for net in {id(s.network): s.network for g in groups for s in g}.values():
        final = [s for g in groups for s in g if s.network is net][-1]
        out[id(net)] = mode_trajectory(net, u0, t_end, signs.get(id(net)), last=final)
    return out


def _stopped(networks: list, solutions: dict[int, Any]) -> tuple[str, ...]:
    """A line naming the modes whose ODE the budget stopped, if any."""
    cut = [
        f"mode {net.mode} at t = {solutions[id(net)].t_reached:.6g}"
        for net in networks
        if id(net) in solutions and not solutions[id(net)].complete
    ]
    if not cut:
        return ()
    return (
        f"ODE half: the exact reduced ODE stopped after {BUDGET} evaluations of its "
        "right-hand side (" + ", ".join(cut) + "); the stages after that have no ODE half time",
    )
